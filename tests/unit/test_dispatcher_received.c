/* Multi-rank acknowledgement on consumption at the dispatcher
 * (dispatcher/core/jobs.h disp_jobs_received, docs/protocol.md): a split the
 * client reports received leaves its owner's slot but is not done; the ack
 * makes it done; a rank that re-attaches gets its received splits back.
 * Broken reports (unknown ids, ids of an epoch not live, of another job,
 * repeated, of PENDING or ACKED splits, too many) change nothing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/core/registry.h"
#include "dispatcher/service/service.h"
#include "dispatcher/service/service_ranks.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_jobs.h"
#include "tests/unit/fixtures_disp.h"

#define SPEC_FMT                                                                             \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"     \
    " \"batch_size\": 4, \"epochs\": 1, \"offload\": %s%s}"

static const disp_limits_t LIM = {
    .split_size = 10,
    .max_splits_per_worker = 2,
    .max_client_splits = 2,
    .max_jobs = 4,
    .worker_timeout_ms = 1000,
    .client_timeout_ms = 5000,
};

typedef fx_jobs_t env_t;

static void env_init(env_t *e)
{
    sl_log_set_level(LOG_CRIT);
    fx_jobs_init(e, &LIM);
}

static disp_job_t *submit(env_t *e, uint64_t n, const char *offload)
{
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, offload, "");
    return fx_jobs_submit(e, spec, n);
}

static int state_of(disp_job_t *job, uint64_t id)
{
    disp_split_t *s = disp_job_split(job, id, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(s);
    return s->state;
}

static int held_by(disp_job_t *job, uint64_t wid, uint64_t id)
{
    disp_jw_t *jw = disp_job_jw(job, wid);
    for (uint32_t k = 0; jw != NULL && k < jw->n; k++) {
        if (jw->ids[k] == id) {
            return 1;
        }
    }
    return 0;
}

START_TEST(test_received_frees_worker_slot)
{
    env_t e;
    env_init(&e);
    uint64_t w = fx_jobs_add_worker(&e, "a:1");
    disp_job_t *job = submit(&e, 100, "\"all\""); /* 10 splits, 2 at the worker */
    disp_job_t *other = submit(&e, 200, "\"all\"");
    ck_assert(held_by(job, w, 0) && held_by(job, w, 1));
    ck_assert_int_eq(state_of(job, 2), DISP_SPLIT_PENDING);

    uint64_t r0 = 0;
    ck_assert_uint_eq(disp_jobs_received(&e.js, job, &r0, 1, e.now), 1);
    ck_assert_int_eq(state_of(job, 0), DISP_SPLIT_RECEIVED);
    ck_assert(!held_by(job, w, 0));
    ck_assert(held_by(job, w, 2)); /* the freed slot went to the next split */
    uint64_t p = 0, a = 0, k = 0, r = 0;
    disp_job_counts(job, &p, &a, &k, &r);
    ck_assert_uint_eq(k, 0); /* not done */
    ck_assert_uint_eq(r, 1); /* and not assigned to anyone */
    ck_assert_uint_eq(a, 2);
    ck_assert_uint_eq(p, 7);
    ck_assert_uint_eq(job->acked_total, 0);
    /* Revoked at the worker (it had not reported the split sent). */
    disp_jw_t *jw = disp_job_jw(job, w);
    ck_assert_uint_eq(jw->nrevoked, 1);
    ck_assert_uint_eq(jw->revoked[0], 0);

    /* Broken reports: repeated, unknown (an epoch that does not exist), a
     * PENDING split, an id only the other job has: nothing changes. */
    uint64_t bad[] = {0, 0, 999999, 9, 15};
    ck_assert_uint_eq(disp_jobs_received(&e.js, job, bad, 5, e.now), 0);
    ck_assert_int_eq(state_of(job, 9), DISP_SPLIT_PENDING);
    ck_assert_int_eq(state_of(other, 15), DISP_SPLIT_PENDING);
    ck_assert_int_eq(state_of(job, 0), DISP_SPLIT_RECEIVED);

    /* The ack makes it done; received after the ack changes nothing. */
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &r0, 1, e.now), 1);
    ck_assert_int_eq(state_of(job, 0), DISP_SPLIT_ACKED);
    disp_job_counts(job, &p, &a, &k, &r);
    ck_assert_uint_eq(k, 1);
    ck_assert_uint_eq(r, 0);
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &r0, 1, e.now), 0);
    ck_assert_uint_eq(disp_jobs_received(&e.js, job, &r0, 1, e.now), 0);
    ck_assert_int_eq(state_of(job, 0), DISP_SPLIT_ACKED);

    /* Ack every split (received or not) in any order: finished, each once. */
    for (uint64_t id = 1; id < 10; id++) {
        size_t want = state_of(job, id) == DISP_SPLIT_ASSIGNED;
        ck_assert_uint_eq(disp_jobs_received(&e.js, job, &id, 1, e.now), want);
    }
    for (uint64_t id = 9; id >= 1; id--) {
        ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &id, 1, e.now), 1);
    }
    ck_assert_int_eq(job->state, DISP_JOB_FINISHED);
    ck_assert_uint_eq(job->acked_total, 10);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_received_frees_client_slot)
{
    env_t e;
    env_init(&e);
    disp_job_t *job = submit(&e, 100, "\"off\""); /* every split the client's own */
    ck_assert_uint_eq(job->nclient, LIM.max_client_splits);
    ck_assert_int_eq(state_of(job, 2), DISP_SPLIT_PENDING);
    uint64_t ids[] = {0, 1};
    ck_assert_uint_eq(disp_jobs_received(&e.js, job, ids, 2, e.now), 2);
    ck_assert_uint_eq(job->nclient, LIM.max_client_splits);
    ck_assert_int_eq(state_of(job, 2), DISP_SPLIT_ASSIGNED);
    ck_assert_int_eq(state_of(job, 3), DISP_SPLIT_ASSIGNED);
    ck_assert_int_eq(state_of(job, 0), DISP_SPLIT_RECEIVED);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_requeue_received)
{
    env_t e;
    env_init(&e);
    uint64_t w = fx_jobs_add_worker(&e, "a:1");
    disp_job_t *job = submit(&e, 100, "\"all\"");
    uint64_t ids[] = {0, 1};
    ck_assert_uint_eq(disp_jobs_received(&e.js, job, ids, 2, e.now), 2);
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, ids, 1, e.now), 1); /* 0 delivered */
    /* Held now: 2, 3. The process dies; its successor re-attaches. */
    uint64_t p = 0, a = 0, k = 0, r = 0;
    disp_job_counts(job, &p, &a, &k, &r);
    ck_assert_uint_eq(r, 1);
    ck_assert_uint_eq(disp_jobs_requeue_received(&e.js, job, e.now), 1);
    disp_job_counts(job, &p, &a, &k, &r);
    ck_assert_uint_eq(r, 0);
    ck_assert_int_eq(state_of(job, 0), DISP_SPLIT_ACKED);
    ck_assert_int_ne(state_of(job, 1), DISP_SPLIT_RECEIVED);
    ck_assert_uint_eq(disp_jobs_requeue_received(&e.js, job, e.now), 0);
    /* Split 1 went to the front: the next free slot takes it. */
    uint64_t two = 2;
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &two, 1, e.now), 1);
    ck_assert(held_by(job, w, 1));
    fx_jobs_free(&e);
}
END_TEST

/* ------------------------------------------------------------ service */

static void svc_init(disp_t *d)
{
    disp_config_t cfg;
    char err[256];
    sl_log_set_level(LOG_CRIT);
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.split_size = 10;
    cfg.max_splits_per_worker = 2;
    cfg.max_jobs_per_client = 0;
    ck_assert_int_eq(disp_init(d, &cfg, 100, 50000), 0);
}

static int svc_rank(disp_t *d, uint32_t rank, uint64_t *ret_id, int *ret_resumed)
{
    char spec[1024], err[256] = "";
    char extra[64];
    snprintf(extra, sizeof(extra), ", \"world_size\": 2, \"rank\": %u", rank);
    snprintf(spec, sizeof(spec), SPEC_FMT, "\"all\"", extra);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = spec;
    req.num_samples = 200; /* 100 per rank: 10 splits */
    req.source_fingerprint = 99;
    req.job_name = "r";
    req.rank = rank;
    req.world_size = 2;
    int code = disp_svc_submit_rank(d, &req, &resp, &a, 50000, err, sizeof(err));
    ck_assert_msg(code == SL_RPC_OK, "%s", err);
    *ret_id = resp.job_id;
    *ret_resumed = resp.resumed;
    disp_arena_free(&a);
    return code;
}

static int svc_ack(disp_t *d, uint64_t job_id, uint64_t *acks, size_t nacks, uint64_t *recv,
                   size_t nrecv)
{
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job_id;
    req.split_ids = acks;
    req.n_split_ids = nacks;
    req.received_split_ids = recv;
    req.n_received_split_ids = nrecv;
    int code = sl_rpc_status_from_errno(disp_svc_ack_splits(d, &req, &resp, &a, 50000, err,
                                                            sizeof(err)));
    disp_arena_free(&a);
    return code;
}

START_TEST(test_svc_received_and_rank_restart)
{
    disp_t d;
    svc_init(&d);
    disp_worker_t *w = NULL;
    int is_new = 0;
    ck_assert_int_eq(disp_registry_register(&d.reg, "a:1", "h", 4, 0, 50000, &w, &is_new), 0);
    uint64_t id0 = 0, id1 = 0;
    int resumed = 0;
    svc_rank(&d, 0, &id0, &resumed);
    svc_rank(&d, 1, &id1, &resumed);
    ck_assert_uint_ne(id0, id1);
    disp_job_t *j0 = disp_jobs_find(&d.jobs, id0);
    disp_job_t *j1 = disp_jobs_find(&d.jobs, id1);

    /* Acked and received in one call: the ack wins. Split 1 received. */
    uint64_t acks[] = {0};
    uint64_t recv[] = {0, 1, 1, 77777};
    ck_assert_int_eq(svc_ack(&d, id0, acks, 1, recv, 4), SL_RPC_OK);
    ck_assert_int_eq(state_of(j0, 0), DISP_SPLIT_ACKED);
    ck_assert_int_eq(state_of(j0, 1), DISP_SPLIT_RECEIVED);
    ck_assert_int_eq(state_of(j1, 1), DISP_SPLIT_ASSIGNED); /* the other rank's: untouched */
    /* Unknown job; too many ids. */
    ck_assert_int_eq(svc_ack(&d, 123456, NULL, 0, recv, 1), SL_RPC_NOT_FOUND);
    size_t big = DISP_MAX_IDS_PER_CALL + 1;
    uint64_t *many = calloc(big, sizeof(*many));
    ck_assert_ptr_nonnull(many);
    ck_assert_int_eq(svc_ack(&d, id0, NULL, 0, many, big), SL_RPC_INVALID_ARGUMENT);
    free(many);
    ck_assert_int_eq(state_of(j0, 0), DISP_SPLIT_ACKED);

    /* Rank 0 restarts: split 0 stays done, split 1 comes back. */
    uint64_t again = 0;
    svc_rank(&d, 0, &again, &resumed);
    ck_assert_uint_eq(again, id0);
    ck_assert_int_eq(resumed, 1);
    ck_assert_int_eq(state_of(j0, 0), DISP_SPLIT_ACKED);
    int s1 = state_of(j0, 1);
    ck_assert(s1 == DISP_SPLIT_PENDING || s1 == DISP_SPLIT_ASSIGNED);
    fx_disp_destroy(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dispatcher_received");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_received_frees_worker_slot);
    tcase_add_test(tc, test_received_frees_client_slot);
    tcase_add_test(tc, test_requeue_received);
    tcase_add_test(tc, test_svc_received_and_rank_restart);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
