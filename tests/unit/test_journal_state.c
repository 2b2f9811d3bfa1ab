/* dispatcher/journal_state: the job table survives a restart through the
 * journal: same ids, acked splits, live epochs; duplicates of records the
 * snapshot already holds change nothing; closed jobs stay closed; new ids
 * never collide with replayed ones. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/disp.h"
#include "dispatcher/journal_state.h"
#include "dispatcher/service.h"
#include "tests/unit/fixtures.h"

#define SPEC3                                                                                \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"     \
    " \"batch_size\": 4, \"epochs\": 3, \"offload\": \"off\"}"

static char dir[256];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/sl-jstate-XXXXXX");
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void open_disp(disp_t *d, uint64_t seed)
{
    disp_config_t cfg;
    char err[512] = "";
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.split_size = 10;
    ck_assert_int_eq(disp_init(d, &cfg, seed, 1000), 0);
    ck_assert_msg(disp_jstate_open(d, dir, 1000, err, sizeof(err)) == 0, "%s", err);
}

static uint64_t submit(disp_t *d)
{
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = SPEC3;
    req.spec_name = "s.json";
    req.num_samples = 35; /* 4 splits per epoch */
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &resp, &a, 1000, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
    return resp.job_id;
}

static void ack(disp_t *d, uint64_t job, uint64_t *ids, size_t n)
{
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    req.split_ids = ids;
    req.n_split_ids = n;
    ck_assert_int_eq(disp_svc_ack_splits(d, &req, &resp, &a, 1000, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
}

static int state_of(disp_t *d, uint64_t job, uint64_t split)
{
    disp_split_t *s = disp_job_split(disp_jobs_find(&d->jobs, job), split, NULL, NULL, NULL);
    return s == NULL ? -1 : s->state;
}

START_TEST(test_restart_keeps_jobs)
{
    disp_t d;
    open_disp(&d, 100);
    uint64_t id = submit(&d);
    uint64_t ids[] = {0, 1, 2, 3, 5};
    ack(&d, id, ids, 5); /* epoch 0 done, split 1 of epoch 1 acked */
    disp_destroy(&d);

    /* Same seed on purpose: replayed ids must still not be handed out again. */
    for (int round = 0; round < 2; round++) {
        open_disp(&d, 100);
        disp_job_t *job = disp_jobs_find(&d.jobs, id);
        ck_assert_ptr_nonnull(job);
        ck_assert_int_eq(job->state, DISP_JOB_ACTIVE);
        ck_assert_int_eq(state_of(&d, id, 0), -1); /* epoch 0 is done, not live */
        ck_assert_int_eq(state_of(&d, id, 5), DISP_SPLIT_ACKED);
        ck_assert_int_eq(state_of(&d, id, 4), DISP_SPLIT_PENDING);
        ck_assert_int_eq(state_of(&d, id, 8), DISP_SPLIT_PENDING); /* epoch 2 live too */
        ck_assert_uint_gt(d.jobs.next_id, id);
        /* A repeated record (as after a crash mid-compaction) is a no-op. */
        ck_assert_int_eq(disp_jstate_submitted(&d, job), 0);
        disp_destroy(&d);
    }

    open_disp(&d, 100);
    uint64_t id2 = submit(&d);
    ck_assert_uint_ne(id2, id);
    Sluice__CloseJobRequest creq = SLUICE__CLOSE_JOB_REQUEST__INIT;
    Sluice__CloseJobResponse cresp = SLUICE__CLOSE_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    creq.version = SL_PROTOCOL_VERSION;
    creq.job_id = id;
    ck_assert_int_eq(disp_svc_close_job(&d, &creq, &cresp, &a, 1000, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
    disp_destroy(&d);

    open_disp(&d, 100);
    ck_assert_ptr_null(disp_jobs_find(&d.jobs, id));
    ck_assert_ptr_nonnull(disp_jobs_find(&d.jobs, id2));
    disp_destroy(&d);
}
END_TEST

START_TEST(test_finished_job_stays_finished)
{
    disp_t d;
    open_disp(&d, 100);
    uint64_t id = submit(&d);
    for (uint64_t e = 0; e < 3; e++) {
        uint64_t ids[4] = {e * 4, e * 4 + 1, e * 4 + 2, e * 4 + 3};
        ack(&d, id, ids, 4);
    }
    ck_assert_int_eq(disp_jobs_find(&d.jobs, id)->state, DISP_JOB_FINISHED);
    disp_destroy(&d);
    open_disp(&d, 100);
    ck_assert_int_eq(disp_jobs_find(&d.jobs, id)->state, DISP_JOB_FINISHED);
    disp_destroy(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("journal_state");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_restart_keeps_jobs);
    tcase_add_test(tc, test_finished_job_stays_finished);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
