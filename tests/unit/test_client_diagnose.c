/* test_client_diagnose: client/lib/diagnose.c -- the account of where a
 * job stands that `sluice bench`'s watchdog prints before giving up. A job
 * opened in local mode is made to look remote (tests/unit/fixtures_client.h), its
 * split table, pending local splits, queue and fetchers set by hand; the
 * account must name each of them. A lock held by another thread is
 * reported within the bound instead of hanging the watchdog, and a short
 * buffer is cut, not overrun. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/diagnose.h"
#include "client/lib/sluice.h"
#include "common/base/clock.h"
#include "common/base/log.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_client.h"

static char g_root[FX_TMPDIR_LEN];
static char g_spec[FX_TMPDIR_LEN + 32];

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_decode_job_files(g_root, 4, 32, 24, g_spec, sizeof(g_spec)), 0);
}

static void teardown(void) { fx_rmtree(g_root); }

static sluice_job_t *open_local(void)
{
    sluice_options_t opts = {.data_root = g_root, .threads = 1};
    sluice_job_t *job = NULL;
    char err[512];
    ck_assert_msg(sluice_open(g_spec, &opts, &job, err, sizeof(err)) == 0, "%s", err);
    return job;
}

#define HAS(buf, what)                                                                             \
    ck_assert_msg(strstr((buf), (what)) != NULL, "no \"%s\" in: %s", (what), (buf))

START_TEST(test_local_job)
{
    sluice_job_t *job = open_local();
    char buf[4096];
    ck_assert_int_eq(cl_job_diagnose(job, buf, sizeof(buf)), 0);
    HAS(buf, "consumer: 0 pumps");
    HAS(buf, "local mode");
    ck_assert_int_eq(cl_job_pump(job), 0);
    ck_assert_int_eq(cl_job_diagnose(job, buf, sizeof(buf)), 0);
    HAS(buf, "consumer: 1 pumps, the last 0.0 s ago");
    sluice_close(job);
}
END_TEST

/* Enters v in the split table (job->mu held). */
static void set_split(sluice_job_t *job, cl_split_t v)
{
    cl_split_t *s = cl_split_add(job, v.id);
    ck_assert_ptr_nonnull(s);
    *s = v;
}

/* A remote job with state set as the control and fetch threads would. */
static sluice_job_t *open_remote(void)
{
    char err[512];
    sluice_job_t *job = fx_remote_job_open(g_spec, g_root, 1, err, sizeof(err));
    ck_assert_msg(job != NULL, "%s", err);
    pthread_mutex_lock(&job->mu);
    set_split(job, (cl_split_t){.id = 37, .epoch = 2, .begin = 925, .end = 950, .owner = 0,
                                .next = 940, .done = 12, .state = CL_SPLIT_OPEN});
    uint64_t id = 37;
    ck_assert_int_eq(sl_ring_push_back(&job->local_pending, &id), 0);
    set_split(job, (cl_split_t){.id = 40, .epoch = 2, .begin = 1000, .end = 1025, .owner = 7,
                                .done = 3, .state = CL_SPLIT_OPEN});
    set_split(job, (cl_split_t){.id = 41, .epoch = 2, .begin = 1025, .end = 1050, .owner = 7,
                                .done = 25, .state = CL_SPLIT_ACKED});
    ck_assert_int_eq(cl_ids_push(&job->acks, 41), 0);
    job->fetch.fetchers[0] = (cl_fetcher_t){.job = job,
                                            .worker_id = 7,
                                            .started = 1,
                                            .state = CL_FETCH_RUNNING,
                                            .credits_owed = 2};
    job->fetch.fetchers[1] =
        (cl_fetcher_t){.job = job, .worker_id = 8, .started = 1, .state = CL_FETCH_BROKEN};
    snprintf(job->fetch.fetchers[1].error, sizeof(job->fetch.fetchers[1].error),
             "connection refused");
    cl_msg_t *m = calloc(1, sizeof(*m));
    ck_assert_ptr_nonnull(m);
    job->fetch.in_head = job->fetch.in_tail = m;
    pthread_mutex_unlock(&job->mu);
    return job;
}

START_TEST(test_remote_job)
{
    sluice_job_t *job = open_remote();
    char buf[4096];
    ck_assert_int_eq(cl_job_diagnose(job, buf, sizeof(buf)), 0);
    HAS(buf, "1 received messages queued");
    HAS(buf, "1 local splits waiting to start");
    HAS(buf, "1 the client's, 1 workers', 0 owner unknown");
    HAS(buf, "1 acknowledgements queued (1 ids)");
    HAS(buf, " 37: epoch 2 [925, 950) next 940 done 12 open;");
    HAS(buf, " worker 7's 40: epoch 2 [1000, 1025) done 3 open;");
    ck_assert_msg(strstr(buf, " 41: ") == NULL, "an acknowledged split listed: %s", buf);
    HAS(buf, "worker 7 running (2 credits owed)");
    HAS(buf, "worker 8 broken (0 credits owed: connection refused)");
    /* The client's own splits come before the workers'. */
    ck_assert(strstr(buf, " 37: ") < strstr(buf, " 40: "));
    fx_remote_job_close(job);
}
END_TEST

typedef struct {
    sluice_job_t *job;
    int rc;
    double seconds;
    char buf[512];
} diag_run_t;

static void *diagnose_thread(void *arg)
{
    diag_run_t *r = arg;
    double t0 = sl_mono_sec();
    r->rc = cl_job_diagnose(r->job, r->buf, sizeof(r->buf));
    r->seconds = sl_mono_sec() - t0;
    return NULL;
}

START_TEST(test_lock_held)
{
    sluice_job_t *job = open_local();
    diag_run_t r = {.job = job};
    pthread_t th;
    pthread_mutex_lock(&job->mu); /* a thread stuck holding the job's lock */
    ck_assert_int_eq(pthread_create(&th, NULL, diagnose_thread, &r), 0);
    pthread_join(th, NULL);
    pthread_mutex_unlock(&job->mu);
    ck_assert_int_eq(r.rc, -ETIMEDOUT);
    HAS(r.buf, "held for over 1000 ms");
    /* Bounded: timeout(1) in run-unit.sh would be the only other end. */
    ck_assert_msg(r.seconds >= 0.9 && r.seconds < 30.0, "waited %.2f s", r.seconds);
    sluice_close(job);
}
END_TEST

START_TEST(test_short_buffer)
{
    sluice_job_t *job = open_remote();
    char buf[40];
    memset(buf, 'x', sizeof(buf));
    ck_assert_int_eq(cl_job_diagnose(job, buf, 24), 0);
    ck_assert_uint_eq(strlen(buf), 23);
    ck_assert_int_eq(buf[24], 'x'); /* nothing written past len */
    ck_assert_int_eq(cl_job_diagnose(job, buf, 0), 0);
    fx_remote_job_close(job);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_diagnose");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_local_job);
    tcase_add_test(tc, test_remote_job);
    tcase_add_test(tc, test_lock_held);
    tcase_add_test(tc, test_short_buffer);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
