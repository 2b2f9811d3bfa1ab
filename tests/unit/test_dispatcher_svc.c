/* test_dispatcher_svc: the RPC handlers of dispatcher/service/service.h
 * called as plain functions, without sockets, on a whole disp_t with a fake
 * clock: a job's first contact, acks and retries, refusal and close, lost
 * and stale assignments, leaving workers, submit errors, cost-cut splits
 * across a restart. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common/base/log.h"
#include "common/order/ranks.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/plan.h"
#include "dispatcher/core/registry.h"
#include "dispatcher/service/service.h"
#include "dispatcher/status/status.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_jobs.h"
#include "tests/unit/fixtures_disp.h"

#define SPEC_FMT                                                                                   \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"                  \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8},"             \
    " {\"op\": \"flip\"}, {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5],"                      \
    " \"std\": [0.2, 0.2, 0.2]}],"                                                                 \
    " \"batch_size\": 4, \"epochs\": %u, \"offload\": %s}"

/* ------------------------------------------------------------ service */

/* SubmitJob with sample costs, the way the client sends them. */
static int svc_submit_costs(disp_t *d, const char *spec, uint64_t n, float *costs, size_t ncosts,
                            uint64_t *ret_id, char *err, size_t errlen)
{
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = (char *)spec;
    req.num_samples = n;
    req.sample_costs = costs;
    req.n_sample_costs = ncosts;
    int code = sl_rpc_status_from_errno(disp_svc_submit_job(d, &req, &resp, &a, 1000, err, errlen));
    *ret_id = resp.job_id;
    disp_arena_free(&a);
    return code;
}

/* Cost-cut bounds survive a restart: the journal keeps the costs, so the
 * same split id names the same positions before and after (the client may
 * hold unsent acks). cost_splits 0 ignores costs but still refuses a wrong
 * length. */
START_TEST(test_svc_costs_journal)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/sl-h2costs-XXXXXX");
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, 3u, "\"all\"");
    const uint64_t n = 120;
    float *costs = fx_skewed_costs(n);
    char err[512] = "";
    uint64_t before[3][13];
    int had[3] = {0, 0, 0};
    uint64_t id = 0;
    for (int round = 0; round < 2; round++) {
        disp_t d;
        disp_config_t cfg;
        memset(&cfg, 0, sizeof(cfg));
        ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
        cfg.split_size = 10;
        ck_assert_int_eq(disp_init(&d, &cfg, 100, 1000), 0);
        ck_assert_msg(disp_jstate_open(&d, dir, 1000, err, sizeof(err)) == 0, "%s", err);
        if (round == 0) {
            ck_assert_int_eq(svc_submit_costs(&d, spec, n, costs, n - 1, &id, err, sizeof(err)),
                             SL_RPC_INVALID_ARGUMENT);
            ck_assert_ptr_nonnull(strstr(err, "sample_costs"));
            ck_assert_int_eq(svc_submit_costs(&d, spec, n, costs, n, &id, err, sizeof(err)),
                             SL_RPC_OK);
        }
        disp_job_t *job = disp_jobs_find(&d.jobs, id);
        ck_assert_ptr_nonnull(job);
        ck_assert_ptr_nonnull(job->costs);
        ck_assert_uint_eq(job->nsplits, 12);
        int compared = 0;
        for (uint32_t k = 0; k < job->nep; k++) {
            uint64_t e = job->ep[k].epoch;
            ck_assert_uint_lt(e, 3);
            ck_assert_ptr_nonnull(job->ep[k].bounds);
            compared += round == 1 && had[e];
            for (uint32_t i = 0; i <= job->nsplits; i++) {
                if (round == 0) {
                    before[e][i] = job->ep[k].bounds[i];
                } else if (had[e]) {
                    ck_assert_uint_eq(job->ep[k].bounds[i], before[e][i]);
                }
            }
            had[e] |= round == 0;
        }
        ck_assert_int_eq(compared, round == 1); /* epoch 0, live both times */
        fx_disp_destroy(&d);
    }
    /* cost_splits 0: the costs are checked, not used. */
    disp_t d;
    disp_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.cost_splits = 0;
    ck_assert_int_eq(disp_init(&d, &cfg, 100, 1000), 0);
    costs[7] = -2;
    ck_assert_int_eq(svc_submit_costs(&d, spec, n, costs, n, &id, err, sizeof(err)),
                     SL_RPC_INVALID_ARGUMENT);
    costs[7] = 1;
    ck_assert_int_eq(svc_submit_costs(&d, spec, n, costs, n, &id, err, sizeof(err)), SL_RPC_OK);
    ck_assert_ptr_null(disp_jobs_find(&d.jobs, id)->costs);
    fx_disp_destroy(&d);
    free(costs);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

typedef struct svc_env_s {
    disp_t d;
    int64_t now;
} svc_env_t;

static void svc_init(svc_env_t *s)
{
    disp_config_t cfg;
    char err[256];
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.split_size = 10;
    cfg.max_splits_per_worker = 2;
    cfg.max_jobs_per_client = 0; /* one client submits everything here */
    s->now = 50000;
    ck_assert_int_eq(disp_init(&s->d, &cfg, 100, s->now), 0);
}

static uint64_t svc_register(svc_env_t *s, const char *addr)
{
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    Sluice__RegisterWorkerResponse resp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.address = (char *)addr;
    req.threads = 2;
    ck_assert_int_eq(disp_svc_register_worker(&s->d, &req, &resp, &a, s->now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(resp.heartbeat_ms, 500);
    disp_arena_free(&a);
    return resp.worker_id;
}

static int svc_submit(svc_env_t *s, const char *spec, uint64_t n, uint64_t *ret_id, char *err,
                      size_t errlen)
{
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = (char *)spec;
    req.num_samples = n;
    req.source_fingerprint = 99;
    int code = sl_rpc_status_from_errno(
        disp_svc_submit_job(&s->d, &req, &resp, &a, s->now, err, errlen));
    if (code == SL_RPC_OK) {
        ck_assert_ptr_nonnull(resp.plan);
        *ret_id = resp.job_id;
    }
    disp_arena_free(&a);
    return code;
}

/* svc_init, one worker at 127.0.0.1:9 and one single-epoch "all" job of
 * n samples; returns the job id. */
static uint64_t svc_one_job(svc_env_t *s, uint64_t n, uint64_t *ret_worker)
{
    svc_init(s);
    char err[1024] = "";
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, 1u, "\"all\"");
    *ret_worker = svc_register(s, "127.0.0.1:9");
    uint64_t jid = 0;
    ck_assert_msg(svc_submit(s, spec, n, &jid, err, sizeof(err)) == SL_RPC_OK, "%s", err);
    return jid;
}

/* One heartbeat of worker wid knowing the nknown jobs in known. */
static void svc_heartbeat(svc_env_t *s, Sluice__HeartbeatRequest *hreq,
                          Sluice__HeartbeatResponse *ret, disp_arena_t *a)
{
    char err[1024] = "";
    Sluice__HeartbeatResponse init = SLUICE__HEARTBEAT_RESPONSE__INIT;
    *ret = init;
    ck_assert_msg(disp_svc_heartbeat(&s->d, hreq, ret, a, s->now, err, sizeof(err)) == SL_RPC_OK,
                  "%s", err);
}

static int svc_get_assignment(svc_env_t *s, uint64_t jid, Sluice__GetAssignmentResponse *ret,
                              disp_arena_t *a, char *err, size_t errlen)
{
    Sluice__GetAssignmentRequest greq = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    Sluice__GetAssignmentResponse init = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    greq.job_secret = (char *)FX_JOB_SECRET;
    greq.job_id = jid;
    *ret = init;
    return disp_svc_get_assignment(&s->d, &greq, ret, a, s->now, err, errlen);
}

/* The client sees the splits (and the worker) at once, before the worker
 * heard of them; the worker's first heartbeat brings the spec and both
 * assignments, its next (job known) nothing new. */
START_TEST(test_svc_first_contact)
{
    svc_env_t s;
    char err[1024] = "";
    uint64_t wid = 0;
    uint64_t jid = svc_one_job(&s, 35, &wid);
    disp_arena_t a = {0};
    Sluice__GetAssignmentResponse gresp;
    ck_assert_int_eq(svc_get_assignment(&s, jid, &gresp, &a, err, sizeof(err)), SL_RPC_OK);
    ck_assert_uint_eq(gresp.n_splits, 2);
    ck_assert_uint_eq(gresp.n_workers, 1);
    ck_assert_int_eq(gresp.finished, 0);
    ck_assert_str_eq(gresp.plan->mode, "all");
    disp_arena_free(&a);

    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp;
    hreq.worker_id = wid;
    svc_heartbeat(&s, &hreq, &hresp, &a);
    ck_assert_int_eq(hresp.known, 1);
    ck_assert_uint_eq(hresp.n_jobs, 1);
    ck_assert_uint_eq(hresp.jobs[0]->job_id, jid);
    ck_assert_uint_eq(hresp.jobs[0]->num_samples, 35);
    ck_assert_uint_eq(hresp.jobs[0]->source_fingerprint, 99);
    sl_spec_t parsed;
    ck_assert_int_eq(sl_spec_parse("hb", hresp.jobs[0]->spec_json, strlen(hresp.jobs[0]->spec_json),
                                   &parsed, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(hresp.n_assign, 2);
    ck_assert_uint_eq(hresp.assign[0]->split_id, 0);
    ck_assert_uint_eq(hresp.assign[0]->begin, 0);
    ck_assert_uint_eq(hresp.assign[0]->end, 10);
    ck_assert_uint_eq(hresp.assign[0]->stage_to, 3);
    ck_assert_uint_eq(hresp.assign[0]->worker_id, wid);
    ck_assert_uint_eq(hresp.assign[1]->split_id, 1);
    disp_arena_free(&a);

    uint64_t known[1] = {jid};
    hreq.n_known_jobs = 1;
    hreq.known_jobs = known;
    svc_heartbeat(&s, &hreq, &hresp, &a);
    ck_assert_uint_eq(hresp.n_jobs, 0);
    ck_assert_uint_eq(hresp.n_assign, 0);
    ck_assert_uint_eq(hresp.n_closed_jobs, 0);
    disp_arena_free(&a);

    /* GetAssignment lists both with their owner and the endpoint. */
    ck_assert_int_eq(svc_get_assignment(&s, jid, &gresp, &a, err, sizeof(err)), SL_RPC_OK);
    ck_assert_uint_eq(gresp.n_splits, 2);
    ck_assert_uint_eq(gresp.splits[0]->worker_id, wid);
    ck_assert_uint_eq(gresp.n_workers, 1);
    ck_assert_str_eq(gresp.workers[0]->address, "127.0.0.1:9");
    disp_arena_free(&a);
    fx_disp_destroy(&s.d);
}
END_TEST

/* svc_one_job whose worker has had its first heartbeat (both splits). */
static uint64_t svc_job_started(svc_env_t *s, uint64_t *ret_worker)
{
    uint64_t jid = svc_one_job(s, 35, ret_worker);
    disp_arena_t a = {0};
    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp;
    hreq.worker_id = *ret_worker;
    svc_heartbeat(s, &hreq, &hresp, &a);
    ck_assert_uint_eq(hresp.n_assign, 2);
    disp_arena_free(&a);
    return jid;
}

/* Ack with a retry of the other one: the retried split is revoked at the
 * worker and (only worker) handed back to it; status and metrics count
 * it, with the skip reason. */
START_TEST(test_svc_ack_retry)
{
    svc_env_t s;
    char err[1024] = "";
    uint64_t wid = 0;
    uint64_t jid = svc_job_started(&s, &wid);
    disp_arena_t a = {0};
    Sluice__AckSplitsRequest areq = SLUICE__ACK_SPLITS_REQUEST__INIT;
    areq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse aresp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    uint64_t ack[1] = {0};
    uint64_t retry[1] = {1};
    Sluice__SkipCount sk = SLUICE__SKIP_COUNT__INIT;
    Sluice__SkipCount *skp[1] = {&sk};
    sk.reason = "corrupt";
    sk.count = 2;
    areq.job_id = jid;
    areq.n_split_ids = 1;
    areq.split_ids = ack;
    areq.n_retry_split_ids = 1;
    areq.retry_split_ids = retry;
    areq.n_skipped = 1;
    areq.skipped = skp;
    ck_assert_int_eq(disp_svc_ack_splits(&s.d, &areq, &aresp, &a, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_int_eq(aresp.finished, 0);
    disp_arena_free(&a);
    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse h3;
    uint64_t known[1] = {jid};
    hreq.worker_id = wid;
    hreq.n_known_jobs = 1;
    hreq.known_jobs = known;
    svc_heartbeat(&s, &hreq, &h3, &a);
    ck_assert_uint_eq(h3.n_revoked_splits, 0); /* deprecated: no job id */
    ck_assert_uint_eq(h3.n_revoked, 1);
    ck_assert_uint_eq(h3.revoked[0]->job_id, jid);
    ck_assert_uint_eq(h3.revoked[0]->split_id, 1);
    ck_assert_uint_eq(h3.n_assign, 2); /* 1 again, and 2 */
    disp_arena_free(&a);

    size_t len = 0;
    char *js = disp_status_json(&s.d, s.now, &len);
    ck_assert_ptr_nonnull(js);
    ck_assert_ptr_nonnull(strstr(js, "\"corrupt\": 2"));
    ck_assert_ptr_nonnull(strstr(js, "\"train\""));
    free(js);
    char *m = disp_status_metrics(&s.d, s.now, &len);
    ck_assert_ptr_nonnull(strstr(m, "sluice_workers 1\n"));
    ck_assert_ptr_nonnull(strstr(m, "sluice_splits_acked_total 1\n"));
    ck_assert_ptr_nonnull(strstr(m, "sluice_splits_reassigned_total 1\n"));
    free(m);
    fx_disp_destroy(&s.d);
}
END_TEST

/* The worker refuses the job: it gets no more of it. CloseJob (twice:
 * idempotent); the worker is told through closed_jobs, also of a job it
 * knows and the dispatcher never had. */
START_TEST(test_svc_refuse_close)
{
    svc_env_t s;
    char err[1024] = "";
    uint64_t wid = 0;
    uint64_t jid = svc_job_started(&s, &wid);
    disp_arena_t a = {0};
    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp;
    uint64_t known[2] = {jid, 424242};
    uint64_t failed[1] = {jid};
    hreq.worker_id = wid;
    hreq.n_known_jobs = 1;
    hreq.known_jobs = known;
    hreq.n_failed_jobs = 1;
    hreq.failed_jobs = failed;
    hreq.failure = "source_fingerprint 5 != 99";
    svc_heartbeat(&s, &hreq, &hresp, &a);
    ck_assert_uint_eq(hresp.n_assign, 0);
    disp_arena_free(&a);
    hreq.n_failed_jobs = 0;

    Sluice__CloseJobRequest creq = SLUICE__CLOSE_JOB_REQUEST__INIT;
    creq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__CloseJobResponse cresp = SLUICE__CLOSE_JOB_RESPONSE__INIT;
    creq.job_id = jid;
    ck_assert_int_eq(disp_svc_close_job(&s.d, &creq, &cresp, &a, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_int_eq(disp_svc_close_job(&s.d, &creq, &cresp, &a, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    hreq.n_known_jobs = 2;
    svc_heartbeat(&s, &hreq, &hresp, &a);
    ck_assert_uint_eq(hresp.n_closed_jobs, 2);
    ck_assert_uint_eq(hresp.closed_jobs[0], jid);
    ck_assert_uint_eq(hresp.closed_jobs[1], 424242);
    disp_arena_free(&a);

    /* A closed job: NOT_FOUND, saying so. */
    Sluice__GetAssignmentResponse gresp;
    ck_assert_int_eq(svc_get_assignment(&s, jid, &gresp, &a, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "closed"));
    disp_arena_free(&a);
    fx_disp_destroy(&s.d);
}
END_TEST

/* An unknown job: NOT_FOUND from every job call; an unknown worker's
 * heartbeat: known = false. */
START_TEST(test_svc_unknown)
{
    svc_env_t s;
    char err[1024] = "";
    uint64_t wid = 0;
    (void)svc_job_started(&s, &wid);
    disp_arena_t a = {0};
    Sluice__AckSplitsRequest areq = SLUICE__ACK_SPLITS_REQUEST__INIT;
    Sluice__AckSplitsResponse aresp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    areq.job_secret = (char *)FX_JOB_SECRET;
    areq.job_id = 777;
    ck_assert_int_eq(disp_svc_ack_splits(&s.d, &areq, &aresp, &a, s.now, err, sizeof(err)),
                     -ENOENT);
    Sluice__ReportRatesRequest rreq = SLUICE__REPORT_RATES_REQUEST__INIT;
    rreq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__ReportRatesResponse rresp = SLUICE__REPORT_RATES_RESPONSE__INIT;
    rreq.job_id = 777;
    ck_assert_int_eq(disp_svc_report_rates(&s.d, &rreq, &rresp, &a, s.now, err, sizeof(err)),
                     -ENOENT);
    Sluice__CloseJobRequest creq = SLUICE__CLOSE_JOB_REQUEST__INIT;
    creq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__CloseJobResponse cresp = SLUICE__CLOSE_JOB_RESPONSE__INIT;
    creq.job_id = 777;
    ck_assert_int_eq(disp_svc_close_job(&s.d, &creq, &cresp, &a, s.now, err, sizeof(err)), -ENOENT);
    Sluice__GetAssignmentResponse gresp;
    ck_assert_int_eq(svc_get_assignment(&s, 777, &gresp, &a, err, sizeof(err)), -ENOENT);
    disp_arena_free(&a);

    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp;
    hreq.worker_id = wid + 5;
    svc_heartbeat(&s, &hreq, &hresp, &a);
    ck_assert_int_eq(hresp.known, 0);
    disp_arena_free(&a);
    fx_disp_destroy(&s.d);
}
END_TEST

/* A heartbeat reply that never reached the worker: the assignment returns
 * to the queue (and is revoked there) once the worker has failed to report
 * it for a few heartbeats -- here it goes straight back to the only worker,
 * in the same reply as its revocation; one the worker reports in progress
 * is never sent twice. */
START_TEST(test_svc_resend_lost_assignment)
{
    svc_env_t s;
    char err[1024] = "";
    uint64_t wid = 0;
    uint64_t jid = svc_one_job(&s, 20, &wid);
    disp_arena_t a = {0};
    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    hreq.worker_id = wid;
    Sluice__HeartbeatResponse r = SLUICE__HEARTBEAT_RESPONSE__INIT;
    ck_assert_int_eq(disp_svc_heartbeat(&s.d, &hreq, &r, &a, s.now, err, sizeof(err)), SL_RPC_OK);
    ck_assert_uint_eq(r.n_assign, 2); /* splits 0 and 1; this reply is "lost" */
    disp_arena_free(&a);
    /* The worker keeps reporting split 1 only (it got it some other way). */
    uint64_t known[1] = {jid};
    Sluice__SplitAssignment p1 = SLUICE__SPLIT_ASSIGNMENT__INIT;
    Sluice__SplitAssignment *pp[1] = {&p1};
    p1.job_id = jid;
    p1.split_id = 1;
    hreq.n_known_jobs = 1;
    hreq.known_jobs = known;
    hreq.n_in_progress = 1;
    hreq.in_progress = pp;
    size_t resent_at = 0;
    for (size_t beat = 1; beat <= DISP_RESEND_AFTER_HB + 1; beat++) {
        Sluice__HeartbeatResponse rr = SLUICE__HEARTBEAT_RESPONSE__INIT;
        ck_assert_int_eq(disp_svc_heartbeat(&s.d, &hreq, &rr, &a, s.now, err, sizeof(err)),
                         SL_RPC_OK);
        if (rr.n_assign > 0) {
            ck_assert_uint_eq(rr.n_assign, 1);
            ck_assert_uint_eq(rr.assign[0]->split_id, 0);
            ck_assert_uint_eq(rr.n_revoked, 1);
            ck_assert_uint_eq(rr.revoked[0]->split_id, 0);
            ck_assert_uint_eq(rr.revoked[0]->job_id, jid);
            ck_assert_uint_eq(resent_at, 0);
            resent_at = beat;
        }
        disp_arena_free(&a);
    }
    ck_assert_uint_eq(resent_at, DISP_RESEND_AFTER_HB + 1);
    disp_job_t *job = disp_jobs_find(&s.d.jobs, jid);
    ck_assert_uint_eq(job->reassigned_total, 1);
    /* The client keeps seeing both splits throughout. */
    Sluice__GetAssignmentRequest greq = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    greq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__GetAssignmentResponse g = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    greq.job_id = jid;
    ck_assert_int_eq(disp_svc_get_assignment(&s.d, &greq, &g, &a, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(g.n_splits, 2);
    disp_arena_free(&a);
    fx_disp_destroy(&s.d);
}
END_TEST

/* One heartbeat of worker w: in progress / sent lists of (job, split,
 * assignment id or 0 = any), terminated by a 0 job. */
static void svc_beat(svc_env_t *s, uint64_t w, const uint64_t (*prog)[3], const uint64_t (*sent)[3],
                     int leaving, Sluice__HeartbeatResponse *resp, disp_arena_t *a)
{
    Sluice__HeartbeatRequest req = SLUICE__HEARTBEAT_REQUEST__INIT;
    static Sluice__SplitAssignment pm[16], sm[16];
    static Sluice__SplitAssignment *pp[16], *sp[16];
    uint64_t known[8];
    size_t nknown = 0;
    req.version = SL_PROTOCOL_VERSION;
    req.worker_id = w;
    req.leaving = leaving;
    for (size_t i = 0; prog != NULL && prog[i][0] != 0; i++) {
        sluice__split_assignment__init(&pm[i]);
        pm[i].job_id = prog[i][0];
        pm[i].split_id = prog[i][1];
        pm[i].assignment = prog[i][2];
        pp[i] = &pm[i];
        req.n_in_progress = i + 1;
    }
    for (size_t i = 0; sent != NULL && sent[i][0] != 0; i++) {
        sluice__split_assignment__init(&sm[i]);
        sm[i].job_id = sent[i][0];
        sm[i].split_id = sent[i][1];
        sm[i].assignment = sent[i][2];
        sp[i] = &sm[i];
        req.n_sent = i + 1;
    }
    req.in_progress = pp;
    req.sent = sp;
    /* It holds the spec of every job (no JobSpec noise in replies). */
    for (size_t j = 0; j < s->d.jobs.n && nknown < 8; j++) {
        known[nknown++] = s->d.jobs.jobs[j]->id;
    }
    req.n_known_jobs = nknown;
    req.known_jobs = known;
    char err[256] = "";
    Sluice__HeartbeatResponse init = SLUICE__HEARTBEAT_RESPONSE__INIT;
    *resp = init;
    ck_assert_int_eq(disp_svc_heartbeat(&s->d, &req, resp, a, s->now, err, sizeof(err)), SL_RPC_OK);
}

/* Split ids repeat across jobs: progress, sent and revocations are matched
 * by (job, split); a split the worker stops reporting returns to the queue;
 * a delivered one stays for the client to acknowledge. */
START_TEST(test_svc_job_qualified_progress)
{
    svc_env_t s;
    svc_init(&s);
    char err[1024] = "";
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, 1u, "\"all\"");
    uint64_t w = svc_register(&s, "127.0.0.1:9");
    uint64_t ja = 0, jb = 0;
    ck_assert_int_eq(svc_submit(&s, spec, 40, &ja, err, sizeof(err)), SL_RPC_OK);
    ck_assert_int_eq(svc_submit(&s, spec, 40, &jb, err, sizeof(err)), SL_RPC_OK);
    disp_job_t *a = disp_jobs_find(&s.d.jobs, ja);
    disp_job_t *b = disp_jobs_find(&s.d.jobs, jb);
    disp_arena_t ar = {0};
    Sluice__HeartbeatResponse r;
    svc_beat(&s, w, NULL, NULL, 0, &r, &ar);
    ck_assert_uint_eq(r.n_assign, 4); /* splits 0 and 1 of both jobs */
    disp_arena_free(&ar);
    /* Both jobs' split 0 and 1 run; then job A's split 0 vanishes (its
     * stream broke) while B's split 0 is still reported: only A's returns. */
    const uint64_t all4[][3] = {{ja, 0}, {ja, 1}, {jb, 0}, {jb, 1}, {0, 0}};
    svc_beat(&s, w, all4, NULL, 0, &r, &ar);
    ck_assert_uint_eq(r.n_assign, 0);
    disp_arena_free(&ar);
    const uint64_t no_a0[][3] = {{ja, 1}, {jb, 0}, {jb, 1}, {0, 0}};
    svc_beat(&s, w, no_a0, NULL, 0, &r, &ar);
    ck_assert_uint_eq(r.n_revoked, 1);
    ck_assert_uint_eq(r.revoked[0]->job_id, ja);
    ck_assert_uint_eq(r.revoked[0]->split_id, 0);
    ck_assert_uint_eq(r.n_assign, 1); /* back to the only worker */
    ck_assert_uint_eq(r.assign[0]->job_id, ja);
    ck_assert_uint_eq(r.assign[0]->split_id, 0);
    ck_assert_uint_eq(a->reassigned_total, 1);
    ck_assert_uint_eq(b->reassigned_total, 0);
    disp_arena_free(&ar);
    /* B's split 1 was sent whole: it is delivered and stays assigned when
     * no longer reported; A's split 1 in B's place would not count. */
    const uint64_t prog2[][3] = {{ja, 0}, {ja, 1}, {jb, 0}, {0, 0}};
    const uint64_t sent2[][3] = {{jb, 1}, {0, 0}};
    svc_beat(&s, w, prog2, sent2, 0, &r, &ar);
    ck_assert_uint_eq(r.n_revoked, 0);
    /* Delivered holds nothing at the worker: B's next split comes in this
     * very reply (the early heartbeat's point), not after the ack. */
    ck_assert_uint_eq(r.n_assign, 1);
    ck_assert_uint_eq(r.assign[0]->job_id, jb);
    ck_assert_uint_eq(r.assign[0]->split_id, 2);
    disp_arena_free(&ar);
    const uint64_t prog3[][3] = {{ja, 0}, {ja, 1}, {jb, 0}, {jb, 2}, {0, 0}};
    svc_beat(&s, w, prog3, NULL, 0, &r, &ar);
    ck_assert_uint_eq(r.n_revoked, 0);
    ck_assert_uint_eq(b->reassigned_total, 0);
    disp_jw_t *jwb = disp_job_jw(b, w);
    ck_assert_uint_eq(jwb->n, 3);
    ck_assert_uint_eq(jwb->ids[1], 1);
    ck_assert_uint_eq(jwb->sent[1], DISP_AN_DELIVERED);
    ck_assert_uint_eq(jwb->ids[2], 2);
    disp_arena_free(&ar);

    /* An AckSplits retry for this worker's broken stream takes back every
     * split of the job it holds, delivered ones too; a retry naming a
     * split that has moved on is ignored. */
    Sluice__AckSplitsRequest areq = SLUICE__ACK_SPLITS_REQUEST__INIT;
    areq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse aresp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    uint64_t stale[1] = {0};
    areq.version = SL_PROTOCOL_VERSION;
    areq.job_id = jb;
    areq.retry_worker_id = w + 1000; /* not the owner: nothing moves */
    areq.n_retry_split_ids = 1;
    areq.retry_split_ids = stale;
    ck_assert_int_eq(disp_svc_ack_splits(&s.d, &areq, &aresp, &ar, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(b->reassigned_total, 0);
    areq.retry_worker_id = w;
    areq.n_retry_split_ids = 0;
    ck_assert_int_eq(disp_svc_ack_splits(&s.d, &areq, &aresp, &ar, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(b->reassigned_total, 3);
    ck_assert_uint_eq(a->reassigned_total, 1);
    disp_arena_free(&ar);
    svc_beat(&s, w, prog3, NULL, 0, &r, &ar);
    ck_assert_uint_eq(r.n_revoked, 3);
    for (size_t i = 0; i < r.n_revoked; i++) {
        ck_assert_uint_eq(r.revoked[i]->job_id, jb);
    }
    disp_arena_free(&ar);
    fx_disp_destroy(&s.d);
}
END_TEST

/* A report about an earlier hand-out of a split (sent on a stream that then
 * broke) must not count for the current hand-out: that one would be
 * stranded as "delivered" while the worker never got it. */
START_TEST(test_svc_stale_sent)
{
    svc_env_t s;
    char err[1024] = "";
    uint64_t w = 0;
    uint64_t jid = svc_one_job(&s, 20, &w);
    disp_job_t *job = disp_jobs_find(&s.d.jobs, jid);
    disp_arena_t ar = {0};
    Sluice__HeartbeatResponse r;
    svc_beat(&s, w, NULL, NULL, 0, &r, &ar);
    ck_assert_uint_eq(r.n_assign, 2);
    uint64_t a0 = r.assign[0]->assignment;
    uint64_t a1 = r.assign[1]->assignment;
    ck_assert_uint_ne(a0, 0);
    ck_assert_uint_ne(a0, a1);
    disp_arena_free(&ar);
    const uint64_t prog[][3] = {{jid, 0, a0}, {jid, 1, a1}, {0, 0, 0}};
    svc_beat(&s, w, prog, NULL, 0, &r, &ar);
    disp_arena_free(&ar);
    /* The client's stream broke: both return and go back to w (only worker). */
    Sluice__AckSplitsRequest areq = SLUICE__ACK_SPLITS_REQUEST__INIT;
    areq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse aresp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    areq.version = SL_PROTOCOL_VERSION;
    areq.job_id = jid;
    areq.retry_worker_id = w;
    ck_assert_int_eq(disp_svc_ack_splits(&s.d, &areq, &aresp, &ar, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&ar);
    ck_assert_uint_eq(job->reassigned_total, 2);
    /* The re-assignment goes out (and is lost); the worker keeps reporting
     * the first hand-out of split 0 as sent. It never counts: split 0 comes
     * back after DISP_RESEND_AFTER_HB heartbeats instead of being stranded. */
    svc_beat(&s, w, NULL, NULL, 0, &r, &ar);
    ck_assert_uint_eq(r.n_assign, 2);
    uint64_t b0 = r.assign[0]->split_id == 0 ? r.assign[0]->assignment : r.assign[1]->assignment;
    ck_assert_uint_ne(b0, a0);
    disp_arena_free(&ar);
    const uint64_t stale[][3] = {{jid, 0, a0}, {0, 0, 0}};
    const uint64_t prog1[][3] = {{jid, 1, 0}, {0, 0, 0}}; /* any hand-out of 1 */
    int back = 0;
    for (int beat = 0; beat < DISP_RESEND_AFTER_HB + 1 && !back; beat++) {
        svc_beat(&s, w, prog1, stale, 0, &r, &ar);
        for (size_t i = 0; i < r.n_revoked; i++) {
            back |= r.revoked[i]->split_id == 0;
        }
        disp_jw_t *jw = disp_job_jw(job, w);
        for (uint32_t k = 0; k < jw->n; k++) {
            ck_assert(jw->sent[k] != DISP_AN_DELIVERED);
        }
        disp_arena_free(&ar);
    }
    ck_assert_int_eq(back, 1);
    ck_assert_uint_eq(job->reassigned_total, 3);
    /* The current hand-out, reported sent, is delivered. */
    svc_beat(&s, w, prog1, NULL, 0, &r, &ar); /* the reply carries it */
    disp_arena_free(&ar);
    disp_jw_t *jw = disp_job_jw(job, w);
    ck_assert_uint_eq(jw->n, 2);
    uint32_t k0 = jw->ids[0] == 0 ? 0 : 1;
    const uint64_t cur[][3] = {{jid, 0, jw->aid[k0]}, {0, 0, 0}};
    svc_beat(&s, w, prog1, cur, 0, &r, &ar);
    disp_arena_free(&ar);
    jw = disp_job_jw(job, w);
    k0 = jw->ids[0] == 0 ? 0 : 1;
    ck_assert_uint_eq(jw->sent[k0], DISP_AN_DELIVERED);
    fx_disp_destroy(&s.d);
}
END_TEST

/* SIGTERM drain: a leaving worker gets nothing new, hands back what it
 * never started at once, and is forgotten when it reports nothing in
 * progress; what it delivered stays for the client's ack, and GetAssignment
 * no longer names it as an endpoint. */
START_TEST(test_svc_leaving)
{
    svc_env_t s;
    char err[1024] = "";
    uint64_t w1 = 0;
    uint64_t jid = svc_one_job(&s, 60, &w1);
    disp_job_t *job = disp_jobs_find(&s.d.jobs, jid);
    disp_arena_t ar = {0};
    Sluice__HeartbeatResponse r;
    svc_beat(&s, w1, NULL, NULL, 0, &r, &ar); /* gets 0 and 1 */
    disp_arena_free(&ar);
    const uint64_t p01[][3] = {{jid, 0}, {jid, 1}, {0, 0}};
    svc_beat(&s, w1, p01, NULL, 0, &r, &ar);
    disp_arena_free(&ar);
    /* Split 0 done and sent; a second worker joins. */
    const uint64_t p1[][3] = {{jid, 1}, {0, 0}};
    const uint64_t s0[][3] = {{jid, 0}, {0, 0}};
    svc_beat(&s, w1, p1, s0, 0, &r, &ar);
    disp_arena_free(&ar);
    uint64_t w2 = svc_register(&s, "127.0.0.1:10");
    ck_assert_uint_eq(disp_job_jw(job, w2)->n, 2); /* 2 and 3 */
    /* w1 starts leaving, still running 1. */
    svc_beat(&s, w1, p1, NULL, 1, &r, &ar);
    ck_assert_uint_eq(r.n_assign, 0);
    disp_arena_free(&ar);
    disp_worker_t *ww1 = disp_registry_find(&s.d.reg, w1);
    ck_assert_int_eq(ww1->state, DISP_WORKER_LIVE);
    ck_assert_int_eq(ww1->leaving, 1);
    /* Acks free room: the leaving worker gets none of it. */
    Sluice__AckSplitsRequest areq = SLUICE__ACK_SPLITS_REQUEST__INIT;
    areq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse aresp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    uint64_t acks[1] = {2};
    areq.version = SL_PROTOCOL_VERSION;
    areq.job_id = jid;
    areq.n_split_ids = 1;
    areq.split_ids = acks;
    ck_assert_int_eq(disp_svc_ack_splits(&s.d, &areq, &aresp, &ar, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&ar);
    ck_assert_uint_eq(disp_job_jw(job, w1)->n, 2);
    ck_assert_uint_eq(disp_job_jw(job, w2)->n, 2);
    /* The final heartbeat: nothing in progress (1 was dropped). 1 returns
     * at once (w2 is full: it waits at the front), 0 stays delivered. */
    svc_beat(&s, w1, NULL, NULL, 1, &r, &ar);
    disp_arena_free(&ar);
    ck_assert_int_eq(ww1->state, DISP_WORKER_LEFT);
    ck_assert_uint_eq(s.d.reg.nlive, 1);
    disp_jw_t *jw1 = disp_job_jw(job, w1);
    ck_assert_uint_eq(jw1->n, 1);
    ck_assert_uint_eq(jw1->ids[0], 0);
    uint64_t ep = 0, b = 0, e = 0;
    ck_assert_uint_eq(disp_job_split(job, 1, &ep, &b, &e)->state, DISP_SPLIT_PENDING);
    /* GetAssignment: split 0 still listed as w1's, but w1 is no endpoint. */
    Sluice__GetAssignmentRequest greq = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    greq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__GetAssignmentResponse g = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    greq.job_id = jid;
    ck_assert_int_eq(disp_svc_get_assignment(&s.d, &greq, &g, &ar, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(g.n_workers, 1);
    ck_assert_uint_eq(g.workers[0]->worker_id, w2);
    int listed0 = 0;
    for (size_t i = 0; i < g.n_splits; i++) {
        listed0 |= g.splits[i]->split_id == 0 && g.splits[i]->worker_id == w1;
    }
    ck_assert_int_eq(listed0, 1);
    disp_arena_free(&ar);
    /* Its heartbeat now: known = false. The client's ack of 0 is taken. */
    svc_beat(&s, w1, NULL, NULL, 1, &r, &ar);
    ck_assert_int_eq(r.known, 0);
    disp_arena_free(&ar);
    acks[0] = 0;
    ck_assert_int_eq(disp_svc_ack_splits(&s.d, &areq, &aresp, &ar, s.now, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&ar);
    ck_assert_uint_eq(disp_job_jw(job, w1)->n, 0);
    ck_assert_uint_eq(ww1->outstanding, 0);
    fx_disp_destroy(&s.d);
}
END_TEST

START_TEST(test_svc_submit_errors)
{
    svc_env_t s;
    svc_init(&s);
    char err[1024] = "";
    uint64_t id = 0;
    const char *bad = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"t\"},\n"
                      " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"flip\", \"p\": 2}]}";
    ck_assert_int_eq(svc_submit(&s, bad, 10, &id, err, sizeof(err)), SL_RPC_INVALID_ARGUMENT);
    sl_spec_t spec;
    char want[1024] = "";
    ck_assert_int_ne(sl_spec_parse("<rpc>", bad, strlen(bad), &spec, want, sizeof(want)), 0);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(svc_submit(&s, "not json", 10, &id, err, sizeof(err)),
                     SL_RPC_INVALID_ARGUMENT);
    char spec_ok[1024];
    snprintf(spec_ok, sizeof(spec_ok), SPEC_FMT, 1u, "\"all\"");
    ck_assert_int_eq(svc_submit(&s, spec_ok, 0, &id, err, sizeof(err)), SL_RPC_INVALID_ARGUMENT);
    for (int i = 0; i < 64; i++) {
        ck_assert_int_eq(svc_submit(&s, spec_ok, 10, &id, err, sizeof(err)), SL_RPC_OK);
    }
    ck_assert_int_eq(svc_submit(&s, spec_ok, 10, &id, err, sizeof(err)), SL_RPC_RESOURCE_EXHAUSTED);
    /* Multi-rank jobs (dispatcher/service/service_ranks.c) need a job name, and the
     * spec must carry the same rank and world size as the request. */
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    req.spec_json = spec_ok;
    req.num_samples = 10;
    req.world_size = 2;
    ck_assert_int_eq(disp_svc_submit_job(&s.d, &req, &resp, &a, s.now, err, sizeof(err)), -EINVAL);
    req.job_name = "j";
    ck_assert_int_eq(disp_svc_submit_job(&s.d, &req, &resp, &a, s.now, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "world_size"));
    req.rank = 2;
    ck_assert_int_eq(disp_svc_submit_job(&s.d, &req, &resp, &a, s.now, err, sizeof(err)), -EINVAL);
    disp_arena_free(&a);
    /* Register without an address. */
    Sluice__RegisterWorkerRequest rreq = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    Sluice__RegisterWorkerResponse rresp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    ck_assert_int_eq(disp_svc_register_worker(&s.d, &rreq, &rresp, &a, s.now, err, sizeof(err)),
                     -EINVAL);
    disp_arena_free(&a);
    fx_disp_destroy(&s.d);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_ERR);
    Suite *s = suite_create("dispatcher_svc");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_svc_costs_journal);
    tcase_add_test(tc, test_svc_first_contact);
    tcase_add_test(tc, test_svc_ack_retry);
    tcase_add_test(tc, test_svc_refuse_close);
    tcase_add_test(tc, test_svc_unknown);
    tcase_add_test(tc, test_svc_resend_lost_assignment);
    tcase_add_test(tc, test_svc_job_qualified_progress);
    tcase_add_test(tc, test_svc_stale_sent);
    tcase_add_test(tc, test_svc_leaving);
    tcase_add_test(tc, test_svc_submit_errors);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
