/* Job capabilities in the dispatcher (docs/protocol.md "Job capabilities"):
 * SubmitJob answers a secret; every job RPC without it (or with another)
 * is PERMISSION_DENIED and changes nothing; workers get its hash, never the
 * secret; ranks join a job by name only with its secret; the journal keeps
 * the hash (not the secret) across a restart. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/jobcap.h"
#include "common/rpc/rpc.h"
#include "dispatcher/disp.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

#define SPEC                                                                                 \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"     \
    " \"batch_size\": 4, \"epochs\": 2, \"offload\": \"all\"%s}"

/* The tenant the helpers below call as ("" = the cluster token). */
static const char *g_tenant = "";

static void as_tenant(disp_arena_t *a)
{
    snprintf(a->tenant, sizeof(a->tenant), "%s", g_tenant);
}

static void open_disp(disp_t *d, const char *jdir)
{
    disp_config_t cfg;
    char err[512] = "";
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.split_size = 10;
    cfg.max_jobs_per_client = 0;
    ck_assert_int_eq(disp_init(d, &cfg, 100, 1000), 0);
    if (jdir != NULL) {
        ck_assert_msg(disp_jstate_open(d, jdir, 1000, err, sizeof(err)) == 0, "%s", err);
    }
}

/* SubmitJob; the answered secret into secret (SL_JOBCAP_MAX + 1 bytes).
 * Returns the gRPC code. */
static int submit(disp_t *d, const char *given, uint32_t world, uint32_t rank, const char *name,
                  uint64_t *ret_id, char *secret)
{
    char spec[1024];
    char extra[96] = "";
    if (world > 1) {
        snprintf(extra, sizeof(extra), ", \"world_size\": %u, \"rank\": %u", world, rank);
    }
    snprintf(spec, sizeof(spec), SPEC, extra);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    as_tenant(&a);
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = spec;
    req.num_samples = 40;
    req.world_size = world;
    req.rank = rank;
    req.job_name = (char *)name;
    req.job_secret = (char *)given;
    int code = sl_rpc_status_from_errno(disp_svc_submit_job(d, &req, &resp, &a, 1000, err,
                                                            sizeof(err)));
    if (code == SL_RPC_OK) {
        *ret_id = resp.job_id;
        ck_assert_ptr_nonnull(resp.job_secret);
        snprintf(secret, SL_JOBCAP_MAX + 1, "%s", resp.job_secret);
    }
    disp_arena_free(&a);
    return code;
}

static int assign(disp_t *d, uint64_t id, const char *secret)
{
    Sluice__GetAssignmentRequest req = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    Sluice__GetAssignmentResponse resp = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    as_tenant(&a);
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = id;
    req.job_secret = (char *)secret;
    int rc = disp_svc_get_assignment(d, &req, &resp, &a, 1000, err, sizeof(err));
    if (sl_rpc_status_from_errno(rc) == SL_RPC_PERMISSION_DENIED) {
        /* A refusal names the job id and nothing else about it. */
        ck_assert_ptr_null(strstr(err, "closed"));
    }
    disp_arena_free(&a);
    return sl_rpc_status_from_errno(rc);
}

static int ack(disp_t *d, uint64_t id, const char *secret)
{
    uint64_t ids[] = {0, 1, 2, 3};
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    as_tenant(&a);
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = id;
    req.job_secret = (char *)secret;
    req.n_split_ids = 4;
    req.split_ids = ids;
    int rc = disp_svc_ack_splits(d, &req, &resp, &a, 1000, err, sizeof(err));
    disp_arena_free(&a);
    return sl_rpc_status_from_errno(rc);
}

static int rates(disp_t *d, uint64_t id, const char *secret)
{
    Sluice__ReportRatesRequest req = SLUICE__REPORT_RATES_REQUEST__INIT;
    Sluice__ReportRatesResponse resp = SLUICE__REPORT_RATES_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    as_tenant(&a);
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = id;
    req.job_secret = (char *)secret;
    req.delivered_per_sec = 5;
    int rc = disp_svc_report_rates(d, &req, &resp, &a, 1000, err, sizeof(err));
    disp_arena_free(&a);
    return sl_rpc_status_from_errno(rc);
}

static int close_job(disp_t *d, uint64_t id, const char *secret)
{
    Sluice__CloseJobRequest req = SLUICE__CLOSE_JOB_REQUEST__INIT;
    Sluice__CloseJobResponse resp = SLUICE__CLOSE_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    as_tenant(&a);
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = id;
    req.job_secret = (char *)secret;
    int rc = disp_svc_close_job(d, &req, &resp, &a, 1000, err, sizeof(err));
    disp_arena_free(&a);
    return sl_rpc_status_from_errno(rc);
}

START_TEST(test_every_job_rpc_needs_the_secret)
{
    disp_t d;
    open_disp(&d, NULL);
    (void)fx_disp_register(&d, "127.0.0.1:9", 2, 0, 1000);
    uint64_t id = 0;
    char secret[SL_JOBCAP_MAX + 1];
    ck_assert_int_eq(submit(&d, NULL, 1, 0, NULL, &id, secret), SL_RPC_OK);
    ck_assert_uint_eq(strlen(secret), 32); /* drawn: 128 bits */
    disp_job_t *job = disp_jobs_find(&d.jobs, id);
    ck_assert(job->has_cap);
    const char *bad[] = {NULL, "", "wrong-secret-0123456789", FX_JOB_SECRET};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(assign(&d, id, bad[i]), SL_RPC_PERMISSION_DENIED);
        ck_assert_int_eq(ack(&d, id, bad[i]), SL_RPC_PERMISSION_DENIED);
        ck_assert_int_eq(rates(&d, id, bad[i]), SL_RPC_PERMISSION_DENIED);
        ck_assert_int_eq(close_job(&d, id, bad[i]), SL_RPC_PERMISSION_DENIED);
    }
    /* Nothing changed: not closed, nothing acknowledged, no rates. */
    ck_assert_int_ne(job->state, DISP_JOB_CLOSED);
    ck_assert_uint_eq(job->acked_total, 0);
    ck_assert_int_eq(job->rates.have, 0);
    /* The owner: accepted. */
    ck_assert_int_eq(assign(&d, id, secret), SL_RPC_OK);
    ck_assert_int_eq(rates(&d, id, secret), SL_RPC_OK);
    ck_assert_int_eq(close_job(&d, id, secret), SL_RPC_OK);
    /* A closed job refuses a stranger the same way (its state is not told). */
    ck_assert_int_eq(assign(&d, id, "wrong-secret-0123456789"), SL_RPC_PERMISSION_DENIED);
    ck_assert_int_eq(assign(&d, id, secret), SL_RPC_NOT_FOUND);
    fx_disp_destroy(&d);
}
END_TEST

START_TEST(test_workers_get_the_hash)
{
    disp_t d;
    open_disp(&d, NULL);
    uint64_t wid = fx_disp_register(&d, "127.0.0.1:9", 2, 0, 1000);
    uint64_t id = 0;
    char secret[SL_JOBCAP_MAX + 1];
    ck_assert_int_eq(submit(&d, "client-chosen-secret-0123", 1, 0, NULL, &id, secret),
                     SL_RPC_OK);
    ck_assert_str_eq(secret, "client-chosen-secret-0123");
    Sluice__HeartbeatRequest req = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse resp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    as_tenant(&a);
    req.version = SL_PROTOCOL_VERSION;
    req.worker_id = wid;
    ck_assert_int_eq(disp_svc_heartbeat(&d, &req, &resp, &a, 1100, err, sizeof(err)), 0);
    ck_assert_uint_eq(resp.n_jobs, 1);
    ck_assert_uint_eq(resp.jobs[0]->secret_sha256.len, SL_JOBCAP_HASH);
    ck_assert(sl_jobcap_check(resp.jobs[0]->secret_sha256.data, secret));
    /* Nowhere in the message: the secret itself. */
    size_t n = protobuf_c_message_get_packed_size(&resp.base);
    uint8_t *buf = malloc(n);
    ck_assert_ptr_nonnull(buf);
    protobuf_c_message_pack(&resp.base, buf);
    ck_assert_ptr_null(memmem(buf, n, secret, strlen(secret)));
    free(buf);
    disp_arena_free(&a);
    /* A malformed client-chosen secret is refused. */
    ck_assert_int_eq(submit(&d, "short", 1, 0, NULL, &id, secret), SL_RPC_INVALID_ARGUMENT);
    fx_disp_destroy(&d);
}
END_TEST

START_TEST(test_ranks_join_with_the_secret)
{
    disp_t d;
    open_disp(&d, NULL);
    (void)fx_disp_register(&d, "127.0.0.1:9", 2, 0, 1000);
    const char *team = "team-shared-secret-0123";
    uint64_t r0 = 0, r1 = 0, x = 0;
    char s0[SL_JOBCAP_MAX + 1], s1[SL_JOBCAP_MAX + 1];
    /* Without a secret a rank cannot even start a job by name. */
    ck_assert_int_eq(submit(&d, NULL, 2, 0, "shared", &x, s0), SL_RPC_PERMISSION_DENIED);
    ck_assert_int_eq(submit(&d, team, 2, 0, "shared", &r0, s0), SL_RPC_OK);
    ck_assert_str_eq(s0, team);
    /* A stranger who knows the name: refused as a new rank and as rank 0. */
    ck_assert_int_eq(submit(&d, "stranger-secret-0123456", 2, 1, "shared", &x, s1),
                     SL_RPC_PERMISSION_DENIED);
    ck_assert_int_eq(submit(&d, "stranger-secret-0123456", 2, 0, "shared", &x, s1),
                     SL_RPC_PERMISSION_DENIED);
    ck_assert_uint_eq(d.jobs.nopen, 1);
    /* The team's rank 1 joins; rank 0 re-attaches with the secret. */
    ck_assert_int_eq(submit(&d, team, 2, 1, "shared", &r1, s1), SL_RPC_OK);
    ck_assert_uint_ne(r1, r0);
    ck_assert_int_eq(submit(&d, team, 2, 0, "shared", &x, s0), SL_RPC_OK);
    ck_assert_uint_eq(x, r0);
    ck_assert_str_eq(s0, team);
    ck_assert_int_eq(assign(&d, r1, team), SL_RPC_OK);
    fx_disp_destroy(&d);
}
END_TEST

START_TEST(test_journal_keeps_the_hash)
{
    char dir[FX_TMPDIR_LEN];
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    disp_t d;
    open_disp(&d, dir);
    uint64_t id = 0;
    char secret[SL_JOBCAP_MAX + 1];
    ck_assert_int_eq(submit(&d, NULL, 1, 0, NULL, &id, secret), SL_RPC_OK);
    fx_disp_destroy(&d);
    /* On disk: not the secret. */
    char cmd[FX_TMPDIR_LEN + SL_JOBCAP_MAX + 64];
    snprintf(cmd, sizeof(cmd), "cat '%s'/* | grep -q -a -F '%s'", dir, secret);
    ck_assert_int_ne(system(cmd), 0);
    open_disp(&d, dir);
    ck_assert_int_eq(assign(&d, id, "wrong-secret-0123456789"), SL_RPC_PERMISSION_DENIED);
    ck_assert_int_eq(ack(&d, id, NULL), SL_RPC_PERMISSION_DENIED);
    ck_assert_int_eq(assign(&d, id, secret), SL_RPC_OK);
    fx_disp_destroy(&d);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_tenants_own_their_jobs)
{
    disp_t d;
    open_disp(&d, NULL);
    uint64_t wid = fx_disp_register(&d, "127.0.0.1:9", 2, 0, 1000);
    char err[512];
    ck_assert_int_eq(sl_tenants_parse("t", "team-a token-a-0123456789abcdef max_jobs=1 "
                                           "max_buffered_mb=3\n"
                                           "team-b token-b-0123456789abcdef\n",
                                      &d.tenants, err, sizeof(err)),
                     0);
    uint64_t a1 = 0, x = 0;
    char sa[SL_JOBCAP_MAX + 1], sx[SL_JOBCAP_MAX + 1];
    g_tenant = "team-a";
    ck_assert_int_eq(submit(&d, NULL, 1, 0, NULL, &a1, sa), SL_RPC_OK);
    ck_assert_str_eq(disp_jobs_find(&d.jobs, a1)->tenant, "team-a");
    /* At its cap (max_jobs=1): refused; team B is not. */
    ck_assert_int_eq(submit(&d, NULL, 1, 0, NULL, &x, sx), SL_RPC_RESOURCE_EXHAUSTED);
    g_tenant = "team-b";
    ck_assert_int_eq(submit(&d, NULL, 1, 0, NULL, &x, sx), SL_RPC_OK);
    /* Team B holding team A's secret still cannot act on A's job, nor the
     * cluster token (a job belongs to its tenant). */
    ck_assert_int_eq(assign(&d, a1, sa), SL_RPC_PERMISSION_DENIED);
    ck_assert_int_eq(close_job(&d, a1, sa), SL_RPC_PERMISSION_DENIED);
    g_tenant = "";
    ck_assert_int_eq(assign(&d, a1, sa), SL_RPC_PERMISSION_DENIED);
    g_tenant = "team-a";
    ck_assert_int_eq(assign(&d, a1, sa), SL_RPC_OK);
    /* A team's token is not a worker's. */
    Sluice__HeartbeatRequest req = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse resp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    disp_arena_t a = {0};
    req.version = SL_PROTOCOL_VERSION;
    req.worker_id = wid;
    as_tenant(&a);
    ck_assert_int_eq(sl_rpc_status_from_errno(
                         disp_svc_heartbeat(&d, &req, &resp, &a, 1100, err, sizeof(err))),
                     SL_RPC_PERMISSION_DENIED);
    /* The worker learns team A's buffer bound with the job. */
    memset(&a, 0, sizeof(a));
    ck_assert_int_eq(disp_svc_heartbeat(&d, &req, &resp, &a, 1100, err, sizeof(err)), 0);
    int seen = 0;
    for (size_t i = 0; i < resp.n_jobs; i++) {
        if (resp.jobs[i]->job_id == a1) {
            ck_assert_uint_eq(resp.jobs[i]->max_buffered_bytes, 3u << 20);
            seen = 1;
        } else {
            ck_assert_uint_eq(resp.jobs[i]->max_buffered_bytes, 0);
        }
    }
    ck_assert(seen);
    disp_arena_free(&a);
    g_tenant = "";
    fx_disp_destroy(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dispatcher_caps");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_every_job_rpc_needs_the_secret);
    tcase_add_test(tc, test_workers_get_the_hash);
    tcase_add_test(tc, test_ranks_join_with_the_secret);
    tcase_add_test(tc, test_journal_keeps_the_hash);
    tcase_add_test(tc, test_tenants_own_their_jobs);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
