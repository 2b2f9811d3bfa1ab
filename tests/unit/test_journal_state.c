/* dispatcher/journal/journal_state: the job table survives a restart through the
 * journal: same ids, acked splits, live epochs; duplicates of records the
 * snapshot already holds change nothing; closed jobs stay closed, whether
 * the client closed them or timed out; auto jobs keep their planner (the
 * prediction and re-planning work after a restart); ranks keep their job
 * name and re-attach; a journal written before those fields existed still
 * loads; new ids never collide with replayed ones; a failed sync fails the
 * RPCs it covered and the next snapshot makes the journal whole. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/disp.h"
#include "dispatcher/journal/journal.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"
#include "tests/unit/fixtures_planner.h"

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

/* SubmitJob of SPEC3; returns the gRPC code, the job id in *ret_id. */
static int submit_rc(disp_t *d, uint64_t *ret_id)
{
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = SPEC3;
    req.spec_name = "s.json";
    req.num_samples = 35; /* 4 splits per epoch */
    int rc = disp_svc_submit_job(d, &req, &resp, &a, 1000, err, sizeof(err));
    disp_arena_free(&a);
    *ret_id = resp.job_id;
    return rc;
}

/* A packed spec: 35 samples, 4 a pack, one pack a step: 140 positions, so 14
 * splits an epoch where 35 samples alone would make 4. */
#define SPEC_PACKED                                                                                \
    "{\"source\": {\"type\": \"jsonl\", \"path\": \"m.jsonl\", \"seed\": 1},"                      \
    " \"stages\": [], \"batch_size\": 4, \"epochs\": 3, \"offload\": \"off\","                     \
    " \"batching\": {\"mode\": \"packed\", \"token_budget\": 100}}"

static uint64_t submit_spec(disp_t *d, const char *spec)
{
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = (char *)spec;
    req.spec_name = "s.json";
    req.num_samples = 35;
    ck_assert_msg(disp_svc_submit_job(d, &req, &resp, &a, 1000, err, sizeof(err)) == SL_RPC_OK,
                  "%s", err);
    disp_arena_free(&a);
    return resp.job_id;
}

static uint64_t submit(disp_t *d)
{
    uint64_t id = 0;
    ck_assert_int_eq(submit_rc(d, &id), SL_RPC_OK);
    return id;
}

static int ack_rc(disp_t *d, uint64_t job, uint64_t *ids, size_t n)
{
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    req.split_ids = ids;
    req.n_split_ids = n;
    int rc = disp_svc_ack_splits(d, &req, &resp, &a, 1000, err, sizeof(err));
    disp_arena_free(&a);
    return rc;
}

static void ack(disp_t *d, uint64_t job, uint64_t *ids, size_t n)
{
    ck_assert_int_eq(ack_rc(d, job, ids, n), SL_RPC_OK);
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
    fx_disp_destroy(&d);

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
        fx_disp_destroy(&d);
    }

    open_disp(&d, 100);
    uint64_t id2 = submit(&d);
    ck_assert_uint_ne(id2, id);
    Sluice__CloseJobRequest creq = SLUICE__CLOSE_JOB_REQUEST__INIT;
    creq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__CloseJobResponse cresp = SLUICE__CLOSE_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    creq.version = SL_PROTOCOL_VERSION;
    creq.job_id = id;
    ck_assert_int_eq(disp_svc_close_job(&d, &creq, &cresp, &a, 1000, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
    fx_disp_destroy(&d);

    open_disp(&d, 100);
    ck_assert_ptr_null(disp_jobs_find(&d.jobs, id));
    ck_assert_ptr_nonnull(disp_jobs_find(&d.jobs, id2));
    fx_disp_destroy(&d);
}
END_TEST

/* Split ids count splits over the job's positions, which a packed (or a
 * rank's, or a mix's) epoch has more or fewer of than samples: the replay
 * must cut epochs as the job did, or acks land in the wrong epoch (here:
 * the job came back finished after one epoch). */
START_TEST(test_positions_not_samples)
{
    disp_t d;
    open_disp(&d, 100);
    uint64_t id = submit_spec(&d, SPEC_PACKED);
    disp_job_t *job = disp_jobs_find(&d.jobs, id);
    ck_assert_uint_eq(job->nsplits, 14);
    uint64_t ids[15];
    for (uint64_t i = 0; i < 14; i++) {
        ids[i] = i; /* epoch 0, whole */
    }
    ids[14] = 15; /* epoch 1, split 1 */
    ack(&d, id, ids, 15);
    fx_disp_destroy(&d);

    open_disp(&d, 100);
    job = disp_jobs_find(&d.jobs, id);
    ck_assert_ptr_nonnull(job);
    ck_assert_int_eq(job->state, DISP_JOB_ACTIVE);
    ck_assert_int_eq(state_of(&d, id, 0), -1); /* epoch 0 done */
    ck_assert_int_eq(state_of(&d, id, 15), DISP_SPLIT_ACKED);
    ck_assert_int_eq(state_of(&d, id, 14), DISP_SPLIT_PENDING);
    ck_assert_int_eq(state_of(&d, id, 16), DISP_SPLIT_PENDING);
    fx_disp_destroy(&d);
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
    fx_disp_destroy(&d);
    open_disp(&d, 100);
    ck_assert_int_eq(disp_jobs_find(&d.jobs, id)->state, DISP_JOB_FINISHED);
    fx_disp_destroy(&d);
}
END_TEST

/* ------------------------------------------------------------ client timeout */

START_TEST(test_expired_job_stays_closed)
{
    disp_t d;
    open_disp(&d, 100);
    uint64_t id = submit(&d);
    uint64_t keep = submit(&d);
    int64_t late = 1000 + d.jobs.lim.client_timeout_ms;
    disp_jobs_find(&d.jobs, keep)->last_client_ms = late; /* its client is alive */
    ck_assert_uint_eq(disp_jobs_expire(&d.jobs, late), 1);
    ck_assert_int_eq(disp_jobs_find(&d.jobs, id)->state, DISP_JOB_CLOSED);
    fx_disp_destroy(&d);

    open_disp(&d, 100);
    ck_assert_ptr_null(disp_jobs_find(&d.jobs, id)); /* not back as open */
    ck_assert_ptr_nonnull(disp_jobs_find(&d.jobs, keep));
    fx_disp_destroy(&d);
}
END_TEST

static int failing_hook(void *ctx, const disp_job_t *job, const char *reason)
{
    (void)ctx;
    (void)job;
    (void)reason;
    return -EIO;
}

/* A close that cannot be made durable does not happen: the job stays open
 * and the next pass tries again. */
START_TEST(test_expire_waits_for_journal)
{
    disp_t d;
    open_disp(&d, 100);
    uint64_t id = submit(&d);
    ck_assert_ptr_nonnull(d.jobs.expire_hook); /* installed by disp_jstate_open */
    void *ctx = d.jobs.expire_hook_ctx;
    int (*hook)(void *, const disp_job_t *, const char *) = d.jobs.expire_hook;
    d.jobs.expire_hook = failing_hook;
    int64_t late = 1000 + d.jobs.lim.client_timeout_ms;
    ck_assert_uint_eq(disp_jobs_expire(&d.jobs, late), 0);
    ck_assert_int_eq(disp_jobs_find(&d.jobs, id)->state, DISP_JOB_ACTIVE);
    d.jobs.expire_hook = hook;
    d.jobs.expire_hook_ctx = ctx;
    ck_assert_uint_eq(disp_jobs_expire(&d.jobs, late + 1), 1);
    fx_disp_destroy(&d);
    open_disp(&d, 100);
    ck_assert_ptr_null(disp_jobs_find(&d.jobs, id));
    fx_disp_destroy(&d);
}
END_TEST

/* ------------------------------------------------------------ group commit */

static int fail_syncs(void *ctx, int fd, uint64_t upto)
{
    (void)fd;
    (void)upto;
    int *n = ctx;
    return (*n)-- > 0 ? -EIO : 0;
}

/* A failed sync fails the RPCs it covered as a failed append did (ack:
 * UNAVAILABLE; submit: the job is dropped), and every RPC after it, a
 * retried ack that writes nothing new included, until the next tick's
 * snapshot has made the state in memory durable. */
START_TEST(test_sync_failure_fails_rpcs)
{
    disp_t d;
    open_disp(&d, 100);
    uint64_t id = submit(&d);
    int fails = 1;
    disp_journal_set_sync(d.journal, fail_syncs, &fails);
    uint64_t ids[] = {0, 1};
    ck_assert_int_eq(sl_rpc_status_from_errno(ack_rc(&d, id, ids, 2)), SL_RPC_UNAVAILABLE);
    ck_assert_int_eq(state_of(&d, id, 0), DISP_SPLIT_ACKED); /* applied, not answered */
    ck_assert_int_eq(sl_rpc_status_from_errno(ack_rc(&d, id, ids, 2)), SL_RPC_UNAVAILABLE);
    uint64_t gone = 0;
    ck_assert_int_eq(sl_rpc_status_from_errno(submit_rc(&d, &gone)), SL_RPC_UNAVAILABLE);
    ck_assert_uint_eq(d.jobs.nopen, 1); /* it was made, and dropped */
    ck_assert_uint_eq(d.jobs.n, 2);

    disp_tick(&d, 1100);
    ck_assert_int_eq(disp_journal_broken(d.journal), 0);
    ck_assert_int_eq(ack_rc(&d, id, ids, 2), SL_RPC_OK);
    uint64_t more[] = {2};
    ck_assert_int_eq(ack_rc(&d, id, more, 1), SL_RPC_OK);
    fx_disp_destroy(&d);

    open_disp(&d, 100);
    ck_assert_int_eq(state_of(&d, id, 1), DISP_SPLIT_ACKED);
    ck_assert_int_eq(state_of(&d, id, 2), DISP_SPLIT_ACKED);
    ck_assert_int_eq(state_of(&d, id, 3), DISP_SPLIT_PENDING);
    ck_assert_uint_eq(d.jobs.n, 1); /* not the dropped one */
    fx_disp_destroy(&d);
}
END_TEST

/* ------------------------------------------------------------ planner state */

static uint64_t submit_auto(disp_t *d, fx_pin_t *pin)
{
    Sluice__SubmitJobRequest req;
    fx_pin_request(pin, &req);
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_msg(disp_svc_submit_job(d, &req, &resp, &a, 1000, err, sizeof(err)) == SL_RPC_OK,
                  "%s", err);
    disp_arena_free(&a);
    return resp.job_id;
}

static double status_predicted(const disp_job_t *job)
{
    json_t *j = disp_planner_status_json(job);
    ck_assert_ptr_nonnull(j);
    json_t *p = json_object_get(j, "plan");
    ck_assert_ptr_nonnull(p);
    double v = json_number_value(json_object_get(p, "predicted_samples_per_sec"));
    json_decref(j);
    return v;
}

START_TEST(test_planner_state_restored)
{
    disp_t d;
    open_disp(&d, 100);
    uint64_t w1 = fx_disp_register(&d, "127.0.0.1:9", 2, 0, 1000);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    pin.in.client_machine_id = "machine-a";
    pin.in.client_cpu_set = "0-1,4";
    /* A slow client link and the codec's numbers: the plan compresses
     * (docs/planner.md "Compression"), and keeps doing so after restarts. */
    double ratio[4] = {1.0, 2.5, 2.5, 1.6};
    double zsec[4] = {0.0, 1e-5, 1e-5, 4e-5};
    pin.in.client_bandwidth = 9600;
    pin.in.n_codec_ratio = 4;
    pin.in.codec_ratio = ratio;
    pin.in.n_codec_compress_sec_per_sample = 4;
    pin.in.codec_compress_sec_per_sample = zsec;
    pin.in.n_codec_decompress_sec_per_sample = 4;
    pin.in.codec_decompress_sec_per_sample = zsec;
    uint64_t id = submit_auto(&d, &pin);
    uint64_t w2 = fx_disp_register(&d, "127.0.0.1:10", 2, 0, 1100);
    disp_planner_tick(&d, 1200); /* a worker joined: plan v2 */
    disp_job_t *job = disp_jobs_find(&d.jobs, id);
    ck_assert_uint_eq(job->plan.version, 2);
    disp_plan_t v2 = job->plan;
    ck_assert_int_eq(v2.compress, 1);
    double pred2 = status_predicted(job);
    ck_assert(pred2 > 0);
    fx_disp_destroy(&d);

    /* Round 0 replays the log (JournalJob + JournalPlan), round 1 the
     * snapshot round 0 compacted into. */
    for (int round = 0; round < 2; round++) {
        open_disp(&d, 100);
        job = disp_jobs_find(&d.jobs, id);
        ck_assert_ptr_nonnull(job);
        ck_assert_uint_eq(job->plan.version, 2 + (uint32_t)round);
        ck_assert_int_eq(job->plan.compress, 1);
        ck_assert_ptr_nonnull(job->planner); /* was lost before */
        ck_assert_double_eq_tol(job->planner->codec_ratio[1], 2.5, 1e-12);
        ck_assert_double_eq_tol(job->planner->input.ratio[1], 2.5, 1e-12);
        ck_assert_uint_eq(job->planner->replans, 1 + (uint32_t)round);
        /* The prediction of the plan the job has, from the input behind it
         * (two live workers), not from the empty registry of a restart. */
        uint32_t nworkers = 0;
        for (uint32_t c = 0; c < job->planner->input.nclasses; c++) {
            nworkers += job->planner->input.classes[c].workers;
        }
        ck_assert_uint_eq(nworkers, 2);
        ck_assert_double_eq_tol(status_predicted(job), pred2, 1e-9 * pred2);
        ck_assert_double_eq_tol(job->planner->client_budget, 2.0, 1e-12);
        /* The client's machine, so re-plans still count shared CPUs once. */
        ck_assert_str_eq(job->planner->client_machine, "machine-a");
        ck_assert_int_eq(job->planner->client_has_cpus, 1);
        ck_assert_uint_eq(sl_cpuset_count(&job->planner->client_cpus), 3);
        /* Re-planning works: the workers re-register with their ids and the
         * job re-plans against them, to the same plan it had. */
        ck_assert_uint_eq(fx_disp_register(&d, "127.0.0.1:9", 2, w1, 2000), w1);
        ck_assert_uint_eq(fx_disp_register(&d, "127.0.0.1:10", 2, w2, 2000), w2);
        disp_planner_tick(&d, 2100);
        ck_assert_uint_eq(job->plan.version, 3 + (uint32_t)round);
        ck_assert_uint_eq(job->plan.split, v2.split);
        ck_assert_double_eq_tol(job->plan.local_share, v2.local_share, 1e-9);
        ck_assert_int_eq(job->plan.compress, 1);
        fx_disp_destroy(&d);
    }
}
END_TEST

/* A client that could not read its CPU budget: the budget it measured,
 * once a plan took it, is the job's budget after restarts too (the
 * journaled PlannerInputs carry it as measured), and the client's nominal
 * one in later reports does not replace it. */
START_TEST(test_planner_budget_restored)
{
    disp_t d;
    open_disp(&d, 100);
    uint64_t w1 = fx_disp_register(&d, "127.0.0.1:9", 2, 0, 1000);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    pin.in.client_cpu_budget_source = "unknown";
    uint64_t id = submit_auto(&d, &pin);
    disp_job_t *job = disp_jobs_find(&d.jobs, id);
    ck_assert_ptr_nonnull(job);
    Sluice__ReportRatesRequest r = SLUICE__REPORT_RATES_REQUEST__INIT;
    r.cpu_budget = 2;
    r.measured_cpu_budget = 0.5;
    disp_planner_on_rates(&d, job, &r, 1500);
    disp_planner_tick(&d, 1600); /* the budget re-plan: v2 */
    ck_assert_uint_eq(job->plan.version, 2);
    ck_assert_double_eq_tol(job->planner->input.client_cores, 0.5, 1e-12);
    fx_disp_destroy(&d);
    for (int round = 0; round < 2; round++) {
        open_disp(&d, 100);
        job = disp_jobs_find(&d.jobs, id);
        ck_assert_ptr_nonnull(job);
        ck_assert_ptr_nonnull(job->planner);
        ck_assert_str_eq(job->planner->budget_source, "unknown");
        ck_assert_int_eq(job->planner->budget_from_measured, 1);
        ck_assert_double_eq_tol(job->planner->client_budget, 0.5, 1e-12);
        disp_planner_on_rates(&d, job, &r, 2000);
        ck_assert_double_eq_tol(job->planner->client_budget, 0.5, 1e-12);
        fx_disp_destroy(&d);
    }
}
END_TEST

/* A record in the layout written before the planner and group fields
 * existed (the old code path: those fields absent), and broken planner
 * state: the job loads either way, without what it cannot use. */
static void append_job(disp_journal_t *j, uint64_t id, const char *spec,
                       Sluice__JournalPlanner *planner)
{
    Sluice__JournalJob m = SLUICE__JOURNAL_JOB__INIT;
    Sluice__Plan pm = SLUICE__PLAN__INIT;
    pm.split = 1;
    pm.local_share = 0.5;
    pm.mode = "auto";
    pm.version = 1;
    pm.binding = "worker_cpu";
    m.job_id = id;
    m.spec_json = (char *)spec;
    m.spec_name = "old.json";
    m.client_id = "c";
    m.num_samples = 200;
    m.fingerprint = 99;
    m.split_size = 10;
    m.plan = &pm;
    m.plan_nunits = 3;
    m.planner = planner;
    uint8_t buf[8192];
    size_t len = protobuf_c_message_get_packed_size(&m.base);
    ck_assert_uint_le(len, sizeof(buf));
    protobuf_c_message_pack(&m.base, buf);
    ck_assert_int_eq(disp_journal_append(j, DISP_JREC_JOB, buf, len, NULL), 0);
}

/* A job record whose splits_per_epoch is over the dispatcher's limit (a
 * damaged or foreign journal): refused at open, never a job whose split ids
 * overflow. The same record within the limit loads. */
START_TEST(test_splits_per_epoch_over_limit)
{
    for (int over = 1; over >= 0; over--) {
        char err[512] = "";
        disp_journal_t *j = NULL;
        ck_assert_int_eq(disp_journal_open(dir, &j, err, sizeof(err)), 0);
        Sluice__JournalJob m = SLUICE__JOURNAL_JOB__INIT;
        m.job_id = 11 + (uint64_t)over;
        m.spec_json = (char *)FX_PIN_SPEC;
        m.spec_name = "big.json";
        m.client_id = "c";
        m.num_samples = 200;
        m.split_size = 10;
        m.splits_per_epoch = over ? DISP_MAX_SPLITS_PER_EPOCH + 1ull : 20;
        uint8_t buf[4096];
        size_t len = protobuf_c_message_get_packed_size(&m.base);
        ck_assert_uint_le(len, sizeof(buf));
        protobuf_c_message_pack(&m.base, buf);
        ck_assert_int_eq(disp_journal_append(j, DISP_JREC_JOB, buf, len, NULL), 0);
        disp_journal_close(j);

        disp_t d;
        disp_config_t cfg;
        memset(&cfg, 0, sizeof(cfg));
        ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
        cfg.split_size = 10;
        ck_assert_int_eq(disp_init(&d, &cfg, 100, 1000), 0);
        int rc = disp_jstate_open(&d, dir, 1000, err, sizeof(err));
        if (over) {
            ck_assert_msg(rc < 0, "an over-limit splits_per_epoch loaded");
            ck_assert_msg(err[0] != '\0', "refused without a message");
            disp_destroy(&d);
            teardown(); /* a fresh journal directory for the next record */
            setup();
            continue;
        }
        ck_assert_msg(rc == 0, "%s", err);
        disp_job_t *job = disp_jobs_find(&d.jobs, 11);
        ck_assert_ptr_nonnull(job);
        ck_assert_uint_eq(job->nsplits, 20);
        fx_disp_destroy(&d);
    }
}
END_TEST

START_TEST(test_old_journal_loads)
{
    char err[512] = "";
    disp_journal_t *j = NULL;
    ck_assert_int_eq(disp_journal_open(dir, &j, err, sizeof(err)), 0);
    append_job(j, 7, FX_PIN_SPEC, NULL); /* the old layout */
    Sluice__JournalPlan pm = SLUICE__JOURNAL_PLAN__INIT;
    Sluice__Plan plan = SLUICE__PLAN__INIT;
    plan.split = 2;
    plan.local_share = 0.25;
    plan.mode = "auto";
    plan.version = 2;
    plan.binding = "client_cpu";
    pm.job_id = 7;
    pm.plan = &plan;
    pm.plan_nunits = 3;
    uint8_t buf[256];
    size_t len = protobuf_c_message_get_packed_size(&pm.base);
    protobuf_c_message_pack(&pm.base, buf);
    ck_assert_int_eq(disp_journal_append(j, DISP_JREC_PLAN, buf, len, NULL), 0);

    /* Broken planner state: a client profile that does not fit the
     * pipeline (1 unit of 3), and a planner input of the wrong size. */
    fx_pin_t bad;
    fx_pin_init(&bad, 1);
    bad.client.n_units = 1;
    Sluice__JournalPlanner jp = SLUICE__JOURNAL_PLANNER__INIT;
    jp.inputs = &bad.in;
    append_job(j, 8, FX_PIN_SPEC, &jp);
    fx_pin_t good;
    fx_pin_init(&good, 1);
    Sluice__JournalPlanner jp2 = SLUICE__JOURNAL_PLANNER__INIT;
    Sluice__JournalPlannerInput in = SLUICE__JOURNAL_PLANNER_INPUT__INIT;
    double two[2] = {1, 2};
    in.n_unit_sec = 2;
    in.unit_sec = two;
    jp2.inputs = &good.in;
    jp2.input = &in;
    append_job(j, 9, FX_PIN_SPEC, &jp2);
    disp_journal_close(j);

    disp_t d;
    open_disp(&d, 100);
    disp_job_t *job = disp_jobs_find(&d.jobs, 7);
    ck_assert_ptr_nonnull(job);
    ck_assert_uint_eq(job->plan.version, 2);
    ck_assert_uint_eq(job->plan.split, 2);
    ck_assert_ptr_null(job->planner); /* nothing recorded: as before */
    ck_assert_str_eq(job->group, "");
    job = disp_jobs_find(&d.jobs, 8);
    ck_assert_ptr_nonnull(job);
    ck_assert_ptr_null(job->planner);
    job = disp_jobs_find(&d.jobs, 9);
    ck_assert_ptr_nonnull(job);
    ck_assert_ptr_nonnull(job->planner); /* the inputs were fine ... */
    ck_assert_uint_eq(job->planner->input.nunits, 3); /* ... the input was recomputed */
    ck_assert_uint_eq(job->plan.version, 1);
    fx_disp_destroy(&d);
}
END_TEST

/* ------------------------------------------------------------ ranks */

#define RSPEC                                                                                \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"     \
    " \"batch_size\": 4, \"epochs\": 2, \"offload\": \"off\", \"world_size\": 2, \"rank\": %u}"

static uint64_t submit_rank(disp_t *d, const char *name, uint32_t rank, int *ret_resumed,
                            uint64_t *ret_resume_epoch)
{
    char spec[512];
    snprintf(spec, sizeof(spec), RSPEC, rank);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = spec;
    req.num_samples = 40;
    req.source_fingerprint = 5;
    req.job_name = (char *)name;
    req.rank = rank;
    req.world_size = 2;
    ck_assert_msg(disp_svc_submit_job(d, &req, &resp, &a, 1000, err, sizeof(err)) == SL_RPC_OK,
                  "%s", err);
    *ret_resumed = resp.resumed;
    *ret_resume_epoch = resp.resume_epoch;
    disp_arena_free(&a);
    return resp.job_id;
}

START_TEST(test_rank_reattaches_after_restart)
{
    disp_t d;
    int resumed = -1;
    uint64_t ep = 0;
    open_disp(&d, 100);
    uint64_t r0 = submit_rank(&d, "train", 0, &resumed, &ep);
    ck_assert_int_eq(resumed, 0);
    uint64_t r1 = submit_rank(&d, "train", 1, &resumed, &ep);
    ck_assert_uint_ne(r0, r1);
    uint64_t ids[] = {0, 1}; /* rank 0's share: 20 positions, 2 splits: epoch 0 done */
    ack(&d, r0, ids, 2);
    fx_disp_destroy(&d);

    for (int round = 0; round < 2; round++) { /* the log, then the snapshot */
        open_disp(&d, 100);
        disp_job_t *job = disp_jobs_find(&d.jobs, r0);
        ck_assert_ptr_nonnull(job);
        ck_assert_str_eq(job->group, "train");
        ck_assert_uint_eq(job->rank, 0);
        ck_assert_uint_eq(job->world_size, 2);
        ck_assert_uint_eq(job->positions, 20);
        ck_assert_str_eq(disp_jobs_find(&d.jobs, r1)->group, "train");
        /* The restarted rank finds its part, and where to resume. */
        ck_assert_uint_eq(submit_rank(&d, "train", 0, &resumed, &ep), r0);
        ck_assert_int_eq(resumed, 1);
        ck_assert_uint_eq(ep, 1);
        ck_assert_uint_eq(submit_rank(&d, "train", 1, &resumed, &ep), r1);
        ck_assert_int_eq(resumed, 1);
        ck_assert_uint_eq(ep, 0);
        fx_disp_destroy(&d);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("journal_state");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_restart_keeps_jobs);
    tcase_add_test(tc, test_positions_not_samples);
    tcase_add_test(tc, test_finished_job_stays_finished);
    tcase_add_test(tc, test_expired_job_stays_closed);
    tcase_add_test(tc, test_expire_waits_for_journal);
    tcase_add_test(tc, test_sync_failure_fails_rpcs);
    tcase_add_test(tc, test_planner_state_restored);
    tcase_add_test(tc, test_planner_budget_restored);
    tcase_add_test(tc, test_old_journal_loads);
    tcase_add_test(tc, test_splits_per_epoch_over_limit);
    tcase_add_test(tc, test_rank_reattaches_after_restart);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
