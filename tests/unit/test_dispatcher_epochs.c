/* test_dispatcher_epochs: how the dispatcher numbers a job's epochs and
 * tells its client where remote work goes, through the RPC handlers of
 * dispatcher/service/service.h called as plain functions (no sockets):
 *  - SubmitJobRequest.first_epoch: the job's epochs are first .. first +
 *    epochs - 1 in assignments and split ids, the job finishes after the
 *    last of them, /status counts its own epochs; bounds refused;
 *  - a journal restart keeps that numbering and the acks made in it;
 *  - a rank does not re-attach to its part of another epoch;
 *  - GetAssignmentResponse.fallback says why remote splits went to the
 *    client (every worker refused the job; no live worker). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "dispatcher/disp.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/service/service.h"
#include "dispatcher/status/status.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

/* 35 samples in splits of 10: 4 splits per epoch, ids epoch * 4 + i. */
#define SPEC_FMT                                                                             \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"     \
    " \"batch_size\": 4, \"epochs\": %u, \"offload\": \"%s\"%s}"
#define NSAMPLES 35
#define NSPLITS 4

static char g_dir[FX_TMPDIR_LEN];

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_dir), 0);
}

static void teardown(void) { fx_rmtree(g_dir); }

/* A dispatcher at now = 1000; journal: in g_dir. */
static void open_disp(disp_t *d, int journal)
{
    disp_config_t cfg;
    char err[512] = "";
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.split_size = 10;
    cfg.max_jobs_per_client = 0;
    ck_assert_int_eq(disp_init(d, &cfg, 100, 1000), 0);
    if (journal) {
        ck_assert_msg(disp_jstate_open(d, g_dir, 1000, err, sizeof(err)) == 0, "%s", err);
    }
}

typedef struct sub_s {
    unsigned epochs;
    const char *offload;
    uint64_t first_epoch;
    uint32_t rank, world_size; /* world_size 0: a single consumer */
} sub_t;

/* SubmitJob; returns the RPC code, the job id in *ret_id. */
static int submit(disp_t *d, const sub_t *s, int64_t now, uint64_t *ret_id, char *err,
                  size_t errlen)
{
    char rank[128] = "";
    if (s->world_size > 0) {
        snprintf(rank, sizeof(rank), ", \"world_size\": %u, \"rank\": %u", s->world_size,
                 s->rank);
    }
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, s->epochs, s->offload, rank);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = spec;
    req.spec_name = "e.json";
    req.num_samples = NSAMPLES;
    req.source_fingerprint = 9;
    req.first_epoch = s->first_epoch;
    req.world_size = s->world_size;
    req.rank = s->rank;
    req.job_name = s->world_size > 0 ? "ranked" : NULL;
    int code = disp_svc_submit_job(d, &req, &resp, &a, now, err, errlen);
    if (code == SL_RPC_OK) { /* echoed: a client checks it (older dispatchers answer 0) */
        ck_assert_uint_eq(resp.first_epoch, s->first_epoch);
    }
    *ret_id = resp.job_id;
    disp_arena_free(&a);
    return code;
}

static uint64_t submit_ok(disp_t *d, const sub_t *s)
{
    char err[512] = "";
    uint64_t id = 0;
    ck_assert_msg(submit(d, s, 1000, &id, err, sizeof(err)) == SL_RPC_OK, "%s", err);
    return id;
}

static void ack(disp_t *d, uint64_t job, const uint64_t *ids, size_t n)
{
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    req.split_ids = (uint64_t *)ids;
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

/* /status jobs[0] as JSON (json_decref the root: *ret_root). */
static json_t *status_job(disp_t *d, json_t **ret_root)
{
    size_t len = 0;
    char *text = disp_status_json(d, 1000, &len);
    ck_assert_ptr_nonnull(text);
    json_error_t je;
    *ret_root = json_loads(text, 0, &je);
    free(text);
    ck_assert_ptr_nonnull(*ret_root);
    json_t *job = json_array_get(json_object_get(*ret_root, "jobs"), 0);
    ck_assert_ptr_nonnull(job);
    return job;
}

START_TEST(test_epochs_numbered_from_first_epoch)
{
    disp_t d;
    open_disp(&d, 0);
    sub_t s = {.epochs = 2, .offload = "off", .first_epoch = 5};
    uint64_t id = submit_ok(&d, &s);
    json_t *root = NULL;
    json_t *job = status_job(&d, &root);
    ck_assert_int_eq(json_integer_value(json_object_get(job, "first_epoch")), 5);
    ck_assert_int_eq(json_integer_value(json_object_get(job, "epoch")), 5);
    json_t *prog = json_object_get(job, "progress");
    ck_assert_int_eq(json_integer_value(json_object_get(prog, "epochs")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(prog, "epochs_done")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(prog, "samples_done")), 0);
    json_decref(root);

    /* offload off: every split is the client's; epochs 5 then 6, ids
     * epoch * NSPLITS + i. */
    uint64_t ids[16], epochs[16];
    size_t n = 0;
    char fb[256];
    for (uint64_t e = 5; e <= 6; e++) {
        ck_assert_int_eq(fx_disp_client_splits(&d, id, 1000, ids, epochs, 16, &n, fb, sizeof(fb)), 0);
        ck_assert_str_eq(fb, ""); /* the plan's own local share: no fallback */
        size_t mine = 0;
        for (size_t i = 0; i < n; i++) {
            ck_assert_uint_ge(epochs[i], e);
            ck_assert_uint_le(epochs[i], 6);
            ck_assert_uint_eq(ids[i] / NSPLITS, epochs[i]);
            if (epochs[i] == e) {
                ids[mine++] = ids[i];
            }
        }
        ck_assert_uint_eq(mine, NSPLITS);
        ack(&d, id, ids, mine);
        if (e == 5) {
            job = status_job(&d, &root);
            prog = json_object_get(job, "progress");
            ck_assert_int_eq(json_integer_value(json_object_get(prog, "epochs_done")), 1);
            ck_assert_int_eq(json_integer_value(json_object_get(prog, "samples_done")),
                             NSAMPLES);
            json_decref(root);
        }
    }
    ck_assert_int_eq(fx_disp_client_splits(&d, id, 1000, ids, epochs, 16, &n, fb, sizeof(fb)), 1);
    ck_assert_uint_eq(n, 0);
    fx_disp_destroy(&d);
}
END_TEST

START_TEST(test_first_epoch_bounds)
{
    disp_t d;
    open_disp(&d, 0);
    char err[512] = "";
    uint64_t id = 0;
    /* Epoch numbers stay below 2^32 (split ids are epoch * nsplits + i). */
    sub_t s = {.epochs = 3, .offload = "off", .first_epoch = (1ull << 32) - 2};
    ck_assert_int_eq(sl_rpc_status_from_errno(submit(&d, &s, 1000, &id, err, sizeof(err))),
                     SL_RPC_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err, "first_epoch") != NULL, "%s", err);
    s.first_epoch = UINT64_MAX; /* would wrap around */
    ck_assert_int_eq(sl_rpc_status_from_errno(submit(&d, &s, 1000, &id, err, sizeof(err))),
                     SL_RPC_INVALID_ARGUMENT);
    s.first_epoch = (1ull << 32) - 3;
    ck_assert_msg(submit(&d, &s, 1000, &id, err, sizeof(err)) == SL_RPC_OK, "%s", err);
    ck_assert_int_eq(state_of(&d, id, s.first_epoch * NSPLITS), DISP_SPLIT_ASSIGNED);
    fx_disp_destroy(&d);
}
END_TEST

START_TEST(test_first_epoch_survives_restart)
{
    disp_t d;
    open_disp(&d, 1);
    sub_t s = {.epochs = 3, .offload = "off", .first_epoch = 5};
    uint64_t id = submit_ok(&d, &s);
    uint64_t acked[] = {20, 21, 22, 23, 25}; /* epoch 5 done, split 1 of epoch 6 */
    ack(&d, id, acked, 5);
    fx_disp_destroy(&d);

    open_disp(&d, 1);
    disp_job_t *job = disp_jobs_find(&d.jobs, id);
    ck_assert_ptr_nonnull(job);
    ck_assert_uint_eq(job->first_epoch, 5);
    ck_assert_int_eq(state_of(&d, id, 20), -1);               /* epoch 5: done */
    ck_assert_int_eq(state_of(&d, id, 25), DISP_SPLIT_ACKED); /* kept */
    ck_assert_int_eq(state_of(&d, id, 24), DISP_SPLIT_PENDING);
    ck_assert_int_eq(state_of(&d, id, 28), DISP_SPLIT_PENDING); /* epoch 7 live */
    ck_assert_int_eq(state_of(&d, id, 32), -1);                 /* no epoch 8 */
    fx_disp_destroy(&d);
}
END_TEST

START_TEST(test_rank_not_reattached_across_epochs)
{
    disp_t d;
    open_disp(&d, 0);
    char err[512] = "";
    uint64_t id = 0;
    sub_t s = {.epochs = 1, .offload = "off", .first_epoch = 0, .rank = 0, .world_size = 2};
    uint64_t first = submit_ok(&d, &s);
    /* The same rank, the next epoch, while its part of epoch 0 is open. */
    s.first_epoch = 1;
    ck_assert_int_eq(sl_rpc_status_from_errno(submit(&d, &s, 1000, &id, err, sizeof(err))),
                     SL_RPC_FAILED_PRECONDITION);
    ck_assert_msg(strstr(err, "first_epoch") != NULL, "%s", err);
    /* The same epoch again: its restarted process re-attaches. */
    s.first_epoch = 0;
    ck_assert_msg(submit(&d, &s, 1000, &id, err, sizeof(err)) == SL_RPC_OK, "%s", err);
    ck_assert_uint_eq(id, first);
    fx_disp_destroy(&d);
}
END_TEST

START_TEST(test_fallback_reason)
{
    disp_t d;
    open_disp(&d, 0);
    uint64_t wid = fx_disp_register(&d, "127.0.0.1:9", 2, 0, 1000);
    sub_t s = {.epochs = 1, .offload = "all"};
    uint64_t id = submit_ok(&d, &s);
    uint64_t ids[16], epochs[16];
    size_t n = 0;
    char fb[256];
    (void)fx_disp_client_splits(&d, id, 1000, ids, epochs, 16, &n, fb, sizeof(fb));
    ck_assert_uint_eq(n, 0); /* the worker's */
    ck_assert_str_eq(fb, "");

    /* The only worker refuses the job: its splits go to the client, and the
     * client hears why. */
    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    uint64_t failed[1] = {id};
    hreq.version = SL_PROTOCOL_VERSION;
    hreq.worker_id = wid;
    hreq.n_failed_jobs = 1;
    hreq.failed_jobs = failed;
    hreq.failure = "cannot open source: No such file or directory";
    ck_assert_int_eq(disp_svc_heartbeat(&d, &hreq, &hresp, &a, 1000, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
    (void)fx_disp_client_splits(&d, id, 1000, ids, epochs, 16, &n, fb, sizeof(fb));
    ck_assert_uint_eq(n, NSPLITS);
    ck_assert_msg(strstr(fb, "every live worker refused the job") != NULL, "%s", fb);
    ck_assert_msg(strstr(fb, "No such file or directory") != NULL, "%s", fb);
    json_t *root = NULL;
    json_t *job = status_job(&d, &root);
    ck_assert_str_eq(json_string_value(json_object_get(job, "fallback")), fb);
    json_decref(root);
    fx_disp_destroy(&d);

    /* No worker at all, for a whole worker timeout. */
    open_disp(&d, 0);
    id = submit_ok(&d, &s);
    int64_t later = 1000 + d.jobs.lim.worker_timeout_ms + 1;
    (void)fx_disp_client_splits(&d, id, later, ids, epochs, 16, &n, fb, sizeof(fb));
    ck_assert_uint_eq(n, NSPLITS);
    ck_assert_msg(strstr(fb, "no live worker for") != NULL, "%s", fb);
    fx_disp_destroy(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dispatcher_epochs");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_epochs_numbered_from_first_epoch);
    tcase_add_test(tc, test_first_epoch_bounds);
    tcase_add_test(tc, test_first_epoch_survives_restart);
    tcase_add_test(tc, test_rank_not_reattached_across_epochs);
    tcase_add_test(tc, test_fallback_reason);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
