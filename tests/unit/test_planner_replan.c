/* test_planner_replan: what a running job's reports change in the
 * dispatcher's planner (dispatcher/planner/planner_job.h): its rates feed the
 * profile cache the next job starts from, drift re-plans, measured costs and
 * consumer rates enter the next plan, stale reports give way, a peer's
 * HostProfile is cleaned, and a budget the client could not read is
 * measured. The fixture is fixtures_planner.h's pinned inputs (FX_PIN_SPEC). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <jansson.h>

#include "client/lib/profile.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/planner/first_plan.h"
#include "dispatcher/planner/link_cache.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures_planner.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

/* SubmitJob of FX_PIN_SPEC with pin's inputs at now: the dispatcher's job. */
static disp_job_t *submit_pinned(disp_t *d, fx_pin_t *pin, int64_t now)
{
    Sluice__SubmitJobRequest req;
    fx_pin_request(pin, &req);
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    uint64_t jid = resp.job_id;
    disp_arena_free(&a);
    pthread_mutex_lock(&d->mu);
    disp_job_t *job = disp_jobs_find(&d->jobs, jid);
    pthread_mutex_unlock(&d->mu);
    ck_assert_ptr_nonnull(job);
    return job;
}

/* A running job's rate reports feed the cached profile the next job's
 * client gets from GetPlanContext: the steady per-sample overhead, not a
 * stalled window's, not a peer's NaN or infinity. */
START_TEST(test_rates_feed_profile_cache)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    fx_pin_t pin;
    fx_pin_init(&pin, fx_disp_register(d, "127.0.0.1:9", 2, 0, now));
    disp_job_t *job = submit_pinned(d, &pin, now);
    int64_t t = now + 400;
    disp_arena_t a = {0};
    char err[1024] = "";
    Sluice__PlanContextRequest creq = SLUICE__PLAN_CONTEXT_REQUEST__INIT;
    creq.spec_hash = 42;

    /* A report's per-sample overhead goes into the cached client profile,
     * and GetPlanContext hands it to the next job's client. */
    Sluice__ReportRatesRequest rr = SLUICE__REPORT_RATES_REQUEST__INIT;
    rr.job_secret = (char *)FX_JOB_SECRET;
    rr.overhead_cpu_sec_per_sample = 1e-3;
    rr.delivered_per_sec = 0.3 * job->plan.predicted; /* slow, but steady */
    pthread_mutex_lock(&d->mu);
    disp_planner_on_rates(d, job, &rr, t);
    ck_assert(job->planner->have_sample_sec);
    double fixed = job->planner->measured_sample_sec;
    ck_assert(fixed > 0.5e-3 && fixed <= 1e-3);
    /* A stalled window (a batch held open, nothing delivered) reports far
     * more overhead per sample; the job re-plans with it, the cache keeps
     * the steady figure for the next job. */
    Sluice__ReportRatesRequest stall = rr;
    stall.overhead_cpu_sec_per_sample = 5e-3;
    stall.delivered_per_sec = 0.4 * rr.delivered_per_sec;
    disp_planner_on_rates(d, job, &stall, t);
    ck_assert(job->planner->measured_sample_sec > 4e-3);
    ck_assert(!disp_pjob_steady(job->planner));
    /* A peer's nonsense rate is no window at all: not steady, and the
     * average it is judged against stays a number. */
    stall.delivered_per_sec = NAN;
    disp_planner_on_rates(d, job, &stall, t);
    ck_assert(!disp_pjob_steady(job->planner));
    ck_assert(isfinite(job->planner->rate_avg));
    stall.delivered_per_sec = INFINITY;
    disp_planner_on_rates(d, job, &stall, t);
    ck_assert(!disp_pjob_steady(job->planner));
    ck_assert(isfinite(job->planner->rate_avg));
    pthread_mutex_unlock(&d->mu);
    Sluice__PlanContextResponse cresp = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &cresp, &a, t, err, sizeof(err)),
                     SL_RPC_OK);
    int seen = 0;
    for (size_t i = 0; i < cresp.n_cached; i++) {
        if (strcmp(cresp.cached[i]->host, "client test") == 0) {
            NEAR(cresp.cached[i]->sample_overhead_sec, fixed, 1e-15);
            /* The cost model too: a fixed-plan job's client sizes splits by it. */
            const double coef[SL_COST_NPARAM] = FX_PIN_COEF;
            ck_assert_uint_eq(cresp.cached[i]->n_cost_model_coef, SL_COST_NPARAM);
            for (int k = 0; k < SL_COST_NPARAM; k++) {
                NEAR(cresp.cached[i]->cost_model_coef[k], coef[k], 0.0);
            }
            seen = 1;
        } else {
            NEAR(cresp.cached[i]->sample_overhead_sec, 0.0, 0.0); /* workers: none */
        }
    }
    ck_assert(seen);
    disp_arena_free(&a);

    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* Unit costs a running job measured under load replace the cached client
 * profile's for the next job: only units matched by name, with enough
 * samples and a sane cost; the workers' profiles are untouched. */
START_TEST(test_unit_costs_feed_profile_cache)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    fx_pin_t pin;
    fx_pin_init(&pin, fx_disp_register(d, "127.0.0.1:9", 2, 0, now));
    disp_job_t *job = submit_pinned(d, &pin, now);
    int64_t t = now + 400;
    disp_arena_t a = {0};
    char err[1024] = "";
    Sluice__PlanContextRequest creq = SLUICE__PLAN_CONTEXT_REQUEST__INIT;
    creq.spec_hash = 42;

    /* Unit costs the job measured under load replace the cached client
     * profile's: only units matched by name with enough samples. */
    Sluice__StageStat st[4];
    Sluice__StageStat *pst[4] = {&st[0], &st[1], &st[2], &st[3]};
    const char *sn[4] = {"decode_jpeg+center_crop", "flip", "no such unit", "normalize"};
    const uint64_t ss[4] = {DISP_PCACHE_MIN_UNIT_SAMPLES, DISP_PCACHE_MIN_UNIT_SAMPLES - 1, 500,
                            500};
    const double sc[4] = {13e-3, 13e-3, 13e-3, 1e3}; /* the last: no unit costs 1000 s */
    for (int u = 0; u < 4; u++) {
        sluice__stage_stat__init(&st[u]);
        st[u].name = (char *)sn[u];
        st[u].cpu_sec_per_sample = sc[u];
        st[u].samples = ss[u];
    }
    Sluice__ReportRatesRequest rr = SLUICE__REPORT_RATES_REQUEST__INIT;
    rr.job_secret = (char *)FX_JOB_SECRET;
    rr.overhead_cpu_sec_per_sample = 1e-3;
    rr.delivered_per_sec = 0.3 * job->plan.predicted;
    rr.n_stages = 4;
    rr.stages = pst;
    pthread_mutex_lock(&d->mu);
    disp_planner_on_rates(d, job, &rr, t + 1);
    pthread_mutex_unlock(&d->mu);
    Sluice__PlanContextResponse cresp2 = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &cresp2, &a, t + 1, err, sizeof(err)),
                     SL_RPC_OK);
    int seen = 0;
    for (size_t i = 0; i < cresp2.n_cached; i++) {
        const Sluice__HostProfile *hp = cresp2.cached[i];
        ck_assert_uint_eq(hp->n_units, 3);
        if (strcmp(hp->host, "client test") == 0) {
            NEAR(hp->units[0]->cpu_sec_per_sample, 13e-3, 1e-15);   /* measured */
            NEAR(hp->units[1]->cpu_sec_per_sample, 0.01e-3, 1e-15); /* too few samples */
            NEAR(hp->units[2]->cpu_sec_per_sample, 0.05e-3, 1e-15); /* absurd; unknown name */
            seen = 1;
        } else {
            NEAR(hp->units[0]->cpu_sec_per_sample, 10e-3, 1e-15); /* workers: untouched */
        }
    }
    ck_assert(seen);
    disp_arena_free(&a);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* A planner job for FX_PIN_SPEC with pin's inputs, planned at now; source
 * and measured: the client's CPU budget as it reports it (NULL, 0: as pinned). */
static disp_pjob_t *pinned_pjob(disp_t *d, fx_pin_t *pin, const char *source, double measured,
                                disp_plan_t *plan, int64_t now)
{
    sl_spec_t *spec = malloc(sizeof(*spec));
    char err[512];
    ck_assert_ptr_nonnull(spec);
    ck_assert_int_eq(sl_spec_parse("t", FX_PIN_SPEC, strlen(FX_PIN_SPEC), spec, err, sizeof(err)),
                     0);
    pin->in.client_cpu_budget_source = (char *)source;
    pin->in.client_cpu_budget_measured = measured;
    if (measured > 0) {
        pin->in.client_cpu_budget = measured; /* as the client sends it */
    }
    disp_pjob_t *pj = NULL;
    ck_assert_int_eq(disp_pjob_new(&pin->in, spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    ck_assert_int_eq(disp_plan_compute(spec, plan, err, sizeof(err)), 0);
    disp_pjob_plan(pj, &d->reg, plan, now, "submit");
    sl_spec_clear(spec);
    free(spec);
    return pj;
}

/* The drift tests' start: a dispatcher at DRIFT_T0 with one worker, the
 * pinned job planned (over 300 samples/s predicted), and a rate report of
 * half that prediction from its client. */
#define DRIFT_T0 50000
static disp_pjob_t *drift_pjob(disp_t **d, fx_pin_t *pin, disp_plan_t *plan,
                               Sluice__ReportRatesRequest *r)
{
    *d = fx_disp_new(DRIFT_T0);
    fx_pin_init(pin, fx_disp_register(*d, "127.0.0.1:9", 2, 0, DRIFT_T0));
    disp_pjob_t *pj = pinned_pjob(*d, pin, NULL, 0, plan, DRIFT_T0);
    ck_assert(plan->predicted > 300);
    sluice__report_rates_request__init(r);
    r->job_secret = (char *)FX_JOB_SECRET;
    r->delivered_per_sec = plan->predicted * 0.5;
    return pj;
}

/* Drift: counted from 3 s after the plan, due after 10 s of > 15 %. */
START_TEST(test_drift)
{
    int64_t now = DRIFT_T0;
    disp_t *d = NULL;
    fx_pin_t pin;
    disp_plan_t plan;
    Sluice__ReportRatesRequest r;
    disp_pjob_t *pj = drift_pjob(&d, &pin, &plan, &r);
    double pred = plan.predicted;
    char why[160];
    /* Within the warm-up: nothing. */
    disp_pjob_rates(pj, &r, now + 1000);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    /* Drifting from 3.5 s on; not yet 10 s of it at 13 s. */
    for (int64_t t = now + 3500; t <= now + 13000; t += 500) {
        disp_pjob_rates(pj, &r, t);
        ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, t, why, sizeof(why)), 0);
    }
    /* A good report in between restarts the count. */
    r.delivered_per_sec = pred * 0.9;
    disp_pjob_rates(pj, &r, now + 13200);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 13200, why, sizeof(why)), 0);
    r.delivered_per_sec = pred * 0.5;
    int64_t t = now + 13500;
    for (; t < now + 23500; t += 500) {
        disp_pjob_rates(pj, &r, t);
        ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, t, why, sizeof(why)), 0);
    }
    disp_pjob_rates(pj, &r, t);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, t, why, sizeof(why)), 2);
    ck_assert(strstr(why, "drift") != NULL);

    disp_pjob_free(pj);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* The measured consumer rate, the client's unit costs and its overhead feed
 * the next plan (the overhead net of what the model already charges, the
 * per-byte receive cost fitted to it, peers' nonsense bounded); a re-plan
 * that changes nothing doubles the drift window. */
START_TEST(test_drift_measured_costs)
{
    int64_t now = DRIFT_T0;
    disp_t *d = NULL;
    fx_pin_t pin;
    disp_plan_t plan;
    Sluice__ReportRatesRequest r;
    disp_pjob_t *pj = drift_pjob(&d, &pin, &plan, &r);
    char why[160];
    int64_t t = now + 24000;
    /* Re-plan with what was measured: a consumer at 100/s binds. */
    r.consumer_rate = 100;
    Sluice__StageStat st = SLUICE__STAGE_STAT__INIT;
    Sluice__StageStat *pst = &st;
    st.name = "normalize";
    st.cpu_sec_per_sample = 0.5e-3; /* 10x the profile */
    st.samples = 500;
    r.n_stages = 1;
    r.stages = &pst;
    /* The client's measured overhead per sample, minus what the model
     * already charges under the plan measured (read for the local share,
     * per-byte receive for the rest), becomes sample_sec. */
    uint32_t k0 = pj->plan_split;
    double f0 = pj->plan_share;
    double known = f0 * pj->input.read_sec +
                   (1.0 - f0) * pj->input.recv_sec_per_byte * pj->input.bytes[k0];
    r.overhead_cpu_sec_per_sample = known + 0.2e-3;
    disp_pjob_rates(pj, &r, t);
    disp_plan_t before = plan;
    const disp_plan_t orig = plan;
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    NEAR(pj->input.sample_sec, 0.2e-3, 1e-12);
    /* Below what the model counts: no overhead, never negative. */
    pj->plan_split = 0; /* as if K = 0, F = 0 was measured: 100 KB at 1 ns/B */
    pj->plan_share = 0.0;
    r.overhead_cpu_sec_per_sample = 0.5 * 100e3 * 1e-9;
    r.recv_cpu_sec_per_byte = pj->input.recv_sec_per_byte; /* the client repeats its probe's */
    disp_pjob_rates(pj, &r, t);
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    NEAR(pj->input.sample_sec, 0.0, 0.0);
    /* ... and the per-byte receive cost is fitted to it: the job received
     * 100 KB a sample on 50 us, 0.5 ns/B, and the client's repeated probe
     * figure does not undo that. */
    ck_assert(pj->recv_fitted);
    NEAR(pj->recv_sec_per_byte, 0.5e-9, 1e-18);
    NEAR(pj->input.recv_sec_per_byte, 0.5e-9, 1e-18);
    /* Once the plan charges the fitted cost, the same overhead fits it
     * again: no drift downwards. */
    pj->plan_split = 0;
    pj->plan_share = 0.0;
    disp_pjob_rates(pj, &r, t);
    NEAR(pj->recv_sec_per_byte, 0.5e-9, 1e-18);
    /* Never below a copy's worth, even when the overhead is all but 0. */
    r.overhead_cpu_sec_per_sample = 1e-9;
    disp_pjob_rates(pj, &r, t);
    NEAR(pj->recv_sec_per_byte, DISP_PJ_MIN_RECV_SEC_PER_BYTE, 1e-18);
    /* Not from a mostly local plan: 30 % received would magnify any error
     * of the local part sevenfold into the per-byte cost. */
    pj->recv_fitted = 0;
    pj->recv_sec_per_byte = 1e-9;
    pj->input.recv_sec_per_byte = 1e-9;
    pj->plan_share = 0.7;
    r.overhead_cpu_sec_per_sample = 1e-12;
    r.recv_cpu_sec_per_byte = 1e-9;
    disp_pjob_rates(pj, &r, t);
    ck_assert(!pj->recv_fitted);
    NEAR(pj->recv_sec_per_byte, 1e-9, 0.0);
    pj->plan_share = 0.0;
    /* A peer's NaN or absurd value: ignored or bounded. */
    r.overhead_cpu_sec_per_sample = NAN;
    disp_pjob_rates(pj, &r, t);
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    NEAR(pj->input.sample_sec, 0.0, 0.0);
    r.overhead_cpu_sec_per_sample = 1e300;
    disp_pjob_rates(pj, &r, t);
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    ck_assert(pj->input.sample_sec <= 1.0);
    r.overhead_cpu_sec_per_sample = 1e-12; /* 0 would mean "unknown": the last one stays */
    disp_pjob_rates(pj, &r, t);
    before = orig;
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    ck_assert(fabs(pj->input.unit_sec[2] - 0.5e-3) < 1e-12);
    ck_assert(fabs(pj->input.consumer_rate - 100) < 1e-9);
    ck_assert(fabs(plan.predicted - 100) < 1e-9);
    ck_assert_str_eq(plan.binding, "consumer");
    disp_pjob_replanned(pj, 2, &before, &plan);
    ck_assert_int_eq(pj->drift_window_ms, DISP_REPLAN_DRIFT_MS); /* it changed: reset */
    disp_pjob_replanned(pj, 2, &plan, &plan);
    ck_assert_int_eq(pj->drift_window_ms, 2 * DISP_REPLAN_DRIFT_MS); /* nothing changed */
    disp_pjob_replanned(pj, 1, &plan, &plan);
    ck_assert_int_eq(pj->drift_window_ms, DISP_REPLAN_DRIFT_MS);

    disp_pjob_free(pj);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* Stale reports give way to the cached client profile's overhead; a
 * worker joining is due at once and counts at the largest class's speed. */
START_TEST(test_drift_stale_and_join)
{
    int64_t now = DRIFT_T0;
    disp_t *d = NULL;
    fx_pin_t pin;
    disp_plan_t plan;
    Sluice__ReportRatesRequest r;
    disp_pjob_t *pj = drift_pjob(&d, &pin, &plan, &r);
    char why[160];
    int64_t t = now + 24000;
    r.overhead_cpu_sec_per_sample = 1e-3;
    disp_pjob_rates(pj, &r, t);
    pj->client.overhead_sec = 0.1e-3;
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    ck_assert(pj->input.sample_sec > 0.5e-3); /* the fresh report's */
    /* Stale reports: the cached client profile's overhead stands in. */
    disp_pjob_plan(pj, &d->reg, &plan, t + DISP_REPLAN_RATES_MAX_AGE_MS + 1, why);
    NEAR(pj->input.sample_sec, 0.1e-3, 1e-15);

    /* A worker joining is due at once. */
    (void)fx_disp_register(d, "127.0.0.1:10", 2, 0, t);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, t, why, sizeof(why)), 1);
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    /* It is not in the client's classes: it counts at the largest class's speed. */
    ck_assert_uint_eq(pj->input.nclasses, 2);
    ck_assert_uint_eq(pj->input.classes[1].workers, 1);
    ck_assert(fabs(pj->input.classes[1].unit_sec[0] - 10e-3) < 1e-12);
    disp_pjob_free(pj);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* A client's HostProfile is cleaned like every number a peer sends: its
 * overhead bounded, its cost model exactly SL_COST_NPARAM finite
 * coefficients or none. */
START_TEST(test_hprof_clean)
{
    fx_pin_t pin;
    fx_pin_init(&pin, 1);
    /* A client's HostProfile overhead is cleaned like every number. */
    disp_hprof_t hp;
    pin.client.sample_overhead_sec = NAN;
    disp_hprof_from_pb(&pin.client, &hp);
    NEAR(hp.overhead_sec, 0.0, 0.0);
    pin.client.sample_overhead_sec = -3;
    disp_hprof_from_pb(&pin.client, &hp);
    NEAR(hp.overhead_sec, 0.0, 0.0);
    pin.client.sample_overhead_sec = 1e9;
    disp_hprof_from_pb(&pin.client, &hp);
    ck_assert(hp.overhead_sec <= 1.0);
    pin.client.sample_overhead_sec = 0;
    /* And its cost model: exactly SL_COST_NPARAM finite coefficients, else
     * none (an older peer's 4 included). */
    disp_hprof_from_pb(&pin.client, &hp);
    ck_assert_uint_eq(hp.ncoef, SL_COST_NPARAM);
    pin.client.n_cost_model_coef = 4;
    disp_hprof_from_pb(&pin.client, &hp);
    ck_assert_uint_eq(hp.ncoef, 0);
    pin.client.n_cost_model_coef = SL_COST_NPARAM;
    pin.coef[2] = NAN;
    disp_hprof_from_pb(&pin.client, &hp);
    ck_assert_uint_eq(hp.ncoef, 0);
    pin.coef[2] = 8e-3;
}
END_TEST

/* A client that could not read its CPU budget (source "unknown") reports
 * what it measured (ReportRates.measured_cpu_budget): more than 25 % off
 * the plan's budget re-plans at once -- no warm-up, no drift window --, the
 * plans use it from then on (the client's ReportRates.cpu_budget no longer
 * overwrites it), at most once per DISP_REPLAN_BUDGET_MIN_MS. A client
 * with a readable cgroup sends 0: nothing changes. */
static const char *budget_json(const disp_pjob_t *pj, const char *key, char *buf, size_t len)
{
    json_t *j = disp_pjob_json(pj, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *v = json_object_get(json_object_get(j, "inputs"), key);
    if (json_is_string(v)) {
        snprintf(buf, len, "%s", json_string_value(v));
    } else if (json_is_number(v)) {
        snprintf(buf, len, "%.3f", json_number_value(v));
    } else {
        snprintf(buf, len, "%s", json_is_null(v) ? "null" : "?");
    }
    json_decref(j);
    return buf;
}

START_TEST(test_budget_measured)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    disp_plan_t plan;
    char why[160];
    char buf[64];
    disp_pjob_t *pj = pinned_pjob(d, &pin, "unknown", 0, &plan, now);
    NEAR(pj->input.client_cores, 2.0, 0.0);
    double share2 = plan.local_share;
    ck_assert(share2 > 0.2);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_source", buf, sizeof(buf)), "unknown");
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_measured", buf, sizeof(buf)), "null");
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_from", buf, sizeof(buf)), "client");

    Sluice__ReportRatesRequest r = SLUICE__REPORT_RATES_REQUEST__INIT;
    r.job_secret = (char *)FX_JOB_SECRET;
    r.delivered_per_sec = plan.predicted;
    r.cpu_budget = 2;
    /* Not measured, or within 25 %: nothing. */
    disp_pjob_rates(pj, &r, now + 1000);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    r.measured_cpu_budget = 2.4;
    disp_pjob_rates(pj, &r, now + 1000);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    /* A quarter of a CPU, 1.1 s into the job: due now. */
    r.measured_cpu_budget = 0.25;
    disp_pjob_rates(pj, &r, now + 1100);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1100, why, sizeof(why)), 3);
    ck_assert_msg(strstr(why, "cpu budget measured: 2.00 -> 0.25") != NULL, "%s", why);
    disp_plan_t before = plan;
    disp_pjob_plan(pj, &d->reg, &plan, now + 1100, why);
    disp_pjob_replanned(pj, 3, &before, &plan);
    NEAR(pj->input.client_cores, 0.25, 1e-12);
    ck_assert_msg(plan.local_share < share2, "share %.3f -> %.3f", share2, plan.local_share);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_from", buf, sizeof(buf)), "measured");
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_measured", buf, sizeof(buf)), "0.250");
    /* The client keeps sending its nominal 2: the measured one stays. */
    r.measured_cpu_budget = 0.28;
    disp_pjob_rates(pj, &r, now + 2100);
    NEAR(pj->client_budget, 0.25, 1e-12);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 2100, why, sizeof(why)), 0);
    /* Any later plan takes the latest measurement. */
    disp_pjob_plan(pj, &d->reg, &plan, now + 2100, "drift");
    NEAR(pj->input.client_cores, 0.28, 1e-12);
    /* Twice as much, but within DISP_REPLAN_BUDGET_MIN_MS of the last
     * budget re-plan: not yet; then due. */
    r.measured_cpu_budget = 0.6;
    disp_pjob_rates(pj, &r, now + 2500);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 2500, why, sizeof(why)), 0);
    disp_pjob_rates(pj, &r, now + 1100 + DISP_REPLAN_BUDGET_MIN_MS);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1100 + DISP_REPLAN_BUDGET_MIN_MS, why,
                                          sizeof(why)),
                     3);
    /* Nonsense is not believed. */
    r.measured_cpu_budget = NAN;
    disp_pjob_rates(pj, &r, now + 4000);
    NEAR(pj->budget_measured, 0.6, 1e-12);
    r.measured_cpu_budget = 1e300;
    disp_pjob_rates(pj, &r, now + 4000);
    ck_assert(pj->budget_measured <= DISP_PJ_MAX_BUDGET);
    disp_pjob_free(pj);

    /* The profile pass's estimate came with the inputs: already in use. */
    pj = pinned_pjob(d, &pin, "unknown", 0.3, &plan, now);
    NEAR(pj->input.client_cores, 0.3, 1e-12);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_from", buf, sizeof(buf)), "measured");
    r.cpu_budget = 0.3;
    r.measured_cpu_budget = 0.32;
    disp_pjob_rates(pj, &r, now + 1000);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    disp_pjob_free(pj);

    /* A readable cgroup: the client measures nothing (0), its budget
     * reports set the budget as before, and no budget re-plan happens. */
    pin.in.client_cpu_budget = 2;
    pj = pinned_pjob(d, &pin, "cgroup", 0, &plan, now);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_source", buf, sizeof(buf)), "cgroup");
    r.cpu_budget = 1.5;
    r.measured_cpu_budget = 0;
    disp_pjob_rates(pj, &r, now + 1000);
    NEAR(pj->client_budget, 1.5, 0.0);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    disp_pjob_free(pj);
    /* An older client: no source at all. */
    pj = pinned_pjob(d, &pin, NULL, 0, &plan, now);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_source", buf, sizeof(buf)), "null");
    disp_pjob_free(pj);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_WARNING);
    Suite *s = suite_create("planner_replan");
    TCase *td = tcase_create("replan");
    tcase_set_timeout(td, 60);
    tcase_add_test(td, test_rates_feed_profile_cache);
    tcase_add_test(td, test_unit_costs_feed_profile_cache);
    tcase_add_test(td, test_drift);
    tcase_add_test(td, test_drift_measured_costs);
    tcase_add_test(td, test_drift_stale_and_join);
    tcase_add_test(td, test_hprof_clean);
    tcase_add_test(td, test_budget_measured);
    suite_add_tcase(s, td);
    return fx_run_suite(s, 0);
}
