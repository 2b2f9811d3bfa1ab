/* test_dispatcher_back: a worker that gave a job back because its data
 * server was unreachable takes the job again once it reports it not failed
 * and its back-off has passed (dispatcher/core/worker_back.c); other
 * refusals stay for good; the back-off grows and is capped. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "common/base/log.h"
#include "dispatcher/core/jobs.h"
#include "tests/unit/fixtures_jobs.h"

static const disp_limits_t LIM = {
    .split_size = 10,
    .max_splits_per_worker = 2,
    .max_client_splits = 4,
    .max_jobs = 3,
    .worker_timeout_ms = 1000,
    .client_timeout_ms = 5000,
};

#define SPEC                                                                                       \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"                  \
    " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 4, \"epochs\": 2,"                  \
    " \"offload\": \"all\"}"

static uint32_t jw_n(disp_job_t *job, uint64_t wid)
{
    disp_jw_t *jw = disp_job_jw(job, wid);
    return jw != NULL ? jw->n : 0;
}

/* The heartbeat failure text a worker sends for job (worker/report.c). */
static void down_text(char *out, size_t len, const disp_job_t *job)
{
    snprintf(out, len,
             "job %" PRIu64 ": data server unreachable: after 4 attempts: "
             "http://h/d/shard-000001.tar: Couldn't connect to server",
             job->id);
}

START_TEST(test_failure_text)
{
    ck_assert(disp_failure_is_data_server("job 7: data server unreachable: x", 7));
    ck_assert(!disp_failure_is_data_server("job 7: data server unreachable: x", 8));
    ck_assert(!disp_failure_is_data_server("job 7: fingerprint 8 != 7", 7));
    /* Another job's reason does not count for this one. */
    ck_assert(
        !disp_failure_is_data_server("job 7: fingerprint 8 != 7; job 9: data server unreachable: x",
                                     7));
    ck_assert(
        disp_failure_is_data_server("job 7: fingerprint 8 != 7; job 9: data server unreachable: x",
                                    9));
    ck_assert(!disp_failure_is_data_server(NULL, 7));
    ck_assert(!disp_failure_is_data_server("", 7));
}
END_TEST

START_TEST(test_delay_grows_capped)
{
    ck_assert_int_eq(disp_back_delay_ms(1), DISP_BACK_MIN_MS);
    ck_assert_int_eq(disp_back_delay_ms(2), 2 * DISP_BACK_MIN_MS);
    ck_assert_int_eq(disp_back_delay_ms(3), 4 * DISP_BACK_MIN_MS);
    ck_assert_int_eq(disp_back_delay_ms(100), DISP_BACK_MAX_MS);
    for (uint32_t n = 1; n < 40; n++) {
        ck_assert_int_le(disp_back_delay_ms(n), disp_back_delay_ms(n + 1));
    }
}
END_TEST

START_TEST(test_back_after_delay)
{
    fx_jobs_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    disp_job_t *job = fx_jobs_submit(&e, SPEC, 50);
    ck_assert_uint_eq(jw_n(job, w1), 2);
    char why[256];
    down_text(why, sizeof(why), job);
    ck_assert_int_eq(disp_jobs_worker_refused(&e.js, job, w1, why, e.now), 0);
    disp_jw_t *jw = disp_job_jw(job, w1);
    ck_assert_int_eq(jw->banned, 1);
    ck_assert_int_eq(jw->down, 1);
    ck_assert_uint_eq(jw->nout, 1);
    ck_assert_ptr_nonnull(strstr(jw->why_out, "data server unreachable"));
    ck_assert_uint_eq(jw_n(job, w1), 0);
    /* Reported again before the back-off: still out. */
    ck_assert_int_eq(disp_jobs_worker_back(&e.js, job, w1, e.now + DISP_BACK_MIN_MS - 1), 0);
    ck_assert_int_eq(disp_job_jw(job, w1)->banned, 1);
    /* After it: back, and given splits at once. */
    e.now += DISP_BACK_MIN_MS;
    ck_assert_int_eq(disp_jobs_worker_back(&e.js, job, w1, e.now), 1);
    jw = disp_job_jw(job, w1);
    ck_assert_int_eq(jw->banned, 0);
    ck_assert_uint_eq(jw->nback, 1);
    ck_assert_uint_gt(jw_n(job, w1), 0);
    /* Not out: nothing to come back from. */
    ck_assert_int_eq(disp_jobs_worker_back(&e.js, job, w1, e.now), 0);
    /* Out again: the wait doubles. */
    ck_assert_int_eq(disp_jobs_worker_refused(&e.js, job, w1, why, e.now), 0);
    jw = disp_job_jw(job, w1);
    ck_assert_uint_eq(jw->nout, 2);
    ck_assert_int_eq(disp_jobs_worker_back(&e.js, job, w1, e.now + DISP_BACK_MIN_MS), 0);
    ck_assert_int_eq(disp_jobs_worker_back(&e.js, job, w1, e.now + 2 * DISP_BACK_MIN_MS), 1);
    fx_jobs_free(&e);
}
END_TEST

/* From a heartbeat's lists: back only when the job is known and not failed. */
START_TEST(test_back_from_lists)
{
    fx_jobs_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    disp_job_t *job = fx_jobs_submit(&e, SPEC, 50);
    char why[256];
    down_text(why, sizeof(why), job);
    ck_assert_int_eq(disp_jobs_worker_refused(&e.js, job, w1, why, e.now), 0);
    e.now += DISP_BACK_MIN_MS;
    uint64_t ids[1] = {job->id};
    disp_jobs_worker_back_all(&e.js, w1, ids, 1, ids, 1, e.now); /* still failed */
    ck_assert_int_eq(disp_job_jw(job, w1)->banned, 1);
    disp_jobs_worker_back_all(&e.js, w1, NULL, 0, NULL, 0, e.now); /* not known */
    ck_assert_int_eq(disp_job_jw(job, w1)->banned, 1);
    disp_jobs_worker_back_all(&e.js, w1, ids, 1, NULL, 0, e.now);
    ck_assert_int_eq(disp_job_jw(job, w1)->banned, 0);
    ck_assert_uint_gt(jw_n(job, w1), 0);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_other_refusal_for_good)
{
    fx_jobs_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    disp_job_t *job = fx_jobs_submit(&e, SPEC, 50);
    char why[128];
    snprintf(why, sizeof(why), "job %" PRIu64 ": fingerprint 8 != 7", job->id);
    ck_assert_int_eq(disp_jobs_worker_refused(&e.js, job, w1, why, e.now), 0);
    ck_assert_int_eq(disp_job_jw(job, w1)->down, 0);
    ck_assert_int_eq(disp_jobs_worker_back(&e.js, job, w1, e.now + DISP_BACK_MAX_MS * 10), 0);
    ck_assert_int_eq(disp_job_jw(job, w1)->banned, 1);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_flapping_capped)
{
    fx_jobs_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    disp_job_t *job = fx_jobs_submit(&e, SPEC, 50);
    char why[256];
    down_text(why, sizeof(why), job);
    int backs = 0;
    for (int i = 0; i < DISP_BACK_MAX_OUTS + 3; i++) {
        ck_assert_int_eq(disp_jobs_worker_refused(&e.js, job, w1, why, e.now), 0);
        e.now += DISP_BACK_MAX_MS;
        backs += disp_jobs_worker_back(&e.js, job, w1, e.now);
    }
    /* Out DISP_BACK_MAX_OUTS times at most: back one time fewer, then out for good. */
    ck_assert_int_eq(backs, DISP_BACK_MAX_OUTS - 1);
    ck_assert_uint_eq(disp_job_jw(job, w1)->nout, DISP_BACK_MAX_OUTS);
    ck_assert_int_eq(disp_job_jw(job, w1)->banned, 1);
    ck_assert_uint_eq(jw_n(job, w1), 0);
    fx_jobs_free(&e);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_CRIT);
    Suite *s = suite_create("dispatcher_back");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_failure_text);
    tcase_add_test(tc, test_delay_grows_capped);
    tcase_add_test(tc, test_back_after_delay);
    tcase_add_test(tc, test_back_from_lists);
    tcase_add_test(tc, test_other_refusal_for_good);
    tcase_add_test(tc, test_flapping_capped);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
