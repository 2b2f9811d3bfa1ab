/* planner_job: planning a job (planner_job.h): the plan from the planner's
 * input, the client's ReportRates taken in, and when to re-plan (workers
 * changed, a measured CPU budget, drift). Its inputs are
 * planner_job_inputs.c's, the live workers planner_job_live.c's, the cache
 * profile_cache.c's, the JSON planner_job_json.c's. Runs under the
 * dispatcher mutex; all peer-supplied numbers are cleaned (finite, >= 0)
 * and text is copied with disp_text_copy before it is stored. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dispatcher/planner/planner_job_impl.h"

/* The measured budget is far enough from the one in use to re-plan. */
static int budget_differs(const disp_pjob_t *pj)
{
    return pj->budget_measured > 0.0 && pj->client_budget > 0.0 &&
           fabs(pj->budget_measured - pj->client_budget) / pj->client_budget >
               DISP_REPLAN_BUDGET_DIFF;
}

int disp_pjob_fixed(const disp_pjob_t *pj)
{
    return pj->policy != SL_OFFLOAD_AUTO && pj->policy != SL_OFFLOAD_FASTFLOW;
}

/* A fixed plan (off, all, K:F) keeps its split and share: the model
 * diagnoses it (prediction, binding, workers needed) as it would its own. */
static void plan_fixed(disp_pjob_t *pj, disp_plan_t *plan)
{
    uint32_t k = plan->split <= pj->nunits ? plan->split : pj->nunits;
    if (disp_planner_evaluate(&pj->input, k, plan->local_share, &pj->result) != 0) {
        return; /* cannot happen: nunits was checked at creation */
    }
    const disp_pl_cand_t *c = &pj->result.cand[0];
    plan->predicted = c->predicted;
    snprintf(plan->binding, sizeof(plan->binding), "%s", disp_bind_name(c->binding));
    pj->plan_split = c->split;
    pj->plan_share = c->share;
    pj->plan_compress = plan->compress;
}

/* The what-if of every class of the plan's input: an auto or fastflow job
 * the best plan at each count, a fixed one its plan. */
static void plan_whatif(disp_pjob_t *pj)
{
    const disp_pl_cand_t *fixed = disp_pjob_fixed(pj) ? &pj->result.cand[0] : NULL;
    pj->nwhatif = 0;
    for (uint32_t c = 0; c < pj->input.nclasses && c < DISP_PL_MAX_CLASSES; c++) {
        if (disp_planner_whatif(&pj->input, c, fixed, &pj->whatif[pj->nwhatif]) == 0) {
            pj->nwhatif++;
        }
    }
}

void disp_pjob_plan(disp_pjob_t *pj, const disp_registry_t *reg, disp_plan_t *plan, int64_t now_ms,
                    const char *why)
{
    /* Once measured (and once it mattered), the client's measured budget
     * is the budget: every plan from then on takes the latest one. */
    if (pj->budget_measured > 0.0 && (pj->budget_from_measured || budget_differs(pj))) {
        pj->client_budget = pj->budget_measured;
        pj->budget_from_measured = 1;
    }
    disp_pjob_build_input(pj, reg, now_ms, &pj->input);
    disp_pjob_cache(pj, reg, plan);
    if (disp_pjob_fixed(pj)) {
        plan_fixed(pj, plan);
    } else if (disp_planner_plan(&pj->input, &pj->result) != 0 ||
               disp_planner_fastflow(&pj->input, &pj->ff) != 0) {
        /* Cannot happen: nunits was checked at creation. Keep the plan. */
        return;
    } else if (pj->policy == SL_OFFLOAD_FASTFLOW) {
        plan->split = pj->ff.split;
        plan->local_share = pj->ff.share;
        plan->predicted = pj->ff.predicted;
        snprintf(plan->binding, sizeof(plan->binding), "%s", disp_bind_name(pj->ff.binding));
        snprintf(plan->mode, sizeof(plan->mode), "fastflow");
        pj->plan_split = pj->ff.split;
        pj->plan_share = pj->ff.realized_share;
        pj->plan_compress = 0; /* FastFlow's algorithm has no codec */
        plan->compress = 0;
    } else {
        const disp_pl_cand_t *c = &pj->result.cand[pj->result.chosen];
        plan->split = c->split;
        plan->local_share = c->runtime_share; /* whole splits: what the model assumed */
        plan->predicted = c->predicted;
        snprintf(plan->binding, sizeof(plan->binding), "%s", disp_bind_name(c->binding));
        snprintf(plan->mode, sizeof(plan->mode), "auto");
        pj->plan_split = c->split;
        pj->plan_share = c->share;
        pj->plan_compress = c->compress;
        plan->compress = c->compress;
    }
    /* Why an auto/fastflow plan keeps everything local (the model's
     * reason also fits FastFlow's "no offloading"). */
    int local = !disp_pjob_fixed(pj) && plan->split == 0 && plan->local_share >= 1.0;
    snprintf(plan->local_reason, sizeof(plan->local_reason), "%s",
             local ? pj->result.local_reason : "");
    disp_pjob_live_set(reg, &pj->worker_sig, &pj->nlive);
    pj->planned_ms = now_ms;
    pj->drift_since_ms = 0;
    snprintf(pj->last_reason, sizeof(pj->last_reason), "%s", why);
    plan_whatif(pj);
}

const char *disp_pjob_class_key(const disp_pjob_t *pj, uint32_t c)
{
    return c < pj->nclasses ? pj->classes[c].key : "unprofiled";
}

void disp_pjob_rates(disp_pjob_t *pj, const Sluice__ReportRatesRequest *req, int64_t now_ms)
{
    pj->have_rates = 1;
    pj->rates_ms = now_ms;
    pj->measured_rate = disp_pj_fin(req->delivered_per_sec);
    /* Steady: the window delivered at least DISP_PCACHE_STEADY of the
     * job's recent rate (the first one: anything). */
    pj->steady = pj->measured_rate > 0.0 && pj->measured_rate >= DISP_PCACHE_STEADY * pj->rate_avg;
    pj->rate_avg = pj->rate_avg > 0.0 ? pj->rate_avg * (1.0 - DISP_PJ_RATE_AVG_WEIGHT) +
                                            pj->measured_rate * DISP_PJ_RATE_AVG_WEIGHT
                                      : pj->measured_rate;
    pj->measured_consumer = disp_pj_fin(req->consumer_rate);
    pj->measured_cpu_fraction = disp_pj_fin(req->cpu_fraction);
    pj->measured_wait_fraction = disp_pj_fin(req->wait_fraction);
    pj->measured_persec = fmin(disp_pj_fin(req->persec_cpu), DISP_PJ_MAX_BUDGET);
    pj->measured_overhead = fmin(disp_pj_fin(req->overhead_cpu_sec_per_sample),
                                 DISP_PJ_MAX_OVERHEAD_SEC);
    if (pj->measured_overhead > 0.0) {
        /* What the model already charged per sample under the plan that
         * was measured (pj->input is that plan's input); the rest is the
         * fixed per-sample overhead. */
        const disp_pl_input_t *in = &pj->input;
        uint32_t k = pj->plan_split <= pj->nunits ? pj->plan_split : pj->nunits;
        double f = pj->plan_share;
        double wire = in->bytes[k];
        double fixed = f * in->read_sec;
        if (pj->plan_compress && k > 0 && in->ratio[k] > DISP_PL_MIN_RATIO) {
            wire = in->bytes[k] / in->ratio[k];
            fixed += (1.0 - f) * in->decompress_sec[k];
        }
        double known = fixed + (1.0 - f) * in->recv_sec_per_byte * wire;
        pj->measured_sample_sec = fmax(pj->measured_overhead - known, 0.0);
        pj->have_sample_sec = 1;
        /* Less than the model charges: the receive cost per byte is too
         * high. It comes from a link probe of a fraction of a second, which
         * on a slow link under a CPU quota read 2.5-24 ns/byte on one
         * cluster while its jobs spent at most ~7. Fit it to what the job
         * spent, from a mostly remote plan only (a small remote share would
         * magnify the error), and never raise it this way: an overhead
         * above the model stays in the per-sample term. */
        if (pj->measured_overhead < known && f <= 1.0 - DISP_PJ_FIT_REMOTE_MIN && wire > 0.0) {
            double fit = (pj->measured_overhead - fixed) / ((1.0 - f) * wire);
            pj->recv_sec_per_byte = fmax(fit, DISP_PJ_MIN_RECV_SEC_PER_BYTE);
            pj->recv_fitted = 1;
        }
    }
    if (disp_pj_fin(req->cpu_budget) > 0.0 && !pj->budget_from_measured) {
        pj->client_budget = disp_pj_fin(req->cpu_budget);
    }
    /* A client that could not read its budget says what it measured. */
    double mb = fmin(disp_pj_fin(req->measured_cpu_budget), DISP_PJ_MAX_BUDGET);
    if (mb > 0.0) {
        pj->budget_measured = mb;
    }
    /* The client repeats its probe's figure; a fitted one replaces it. */
    if (disp_pj_fin(req->recv_cpu_sec_per_byte) > 0.0 && !pj->recv_fitted) {
        pj->recv_sec_per_byte = disp_pj_fin(req->recv_cpu_sec_per_byte);
    }
    /* Unit rows by name, so a peer cannot shift them onto other units. */
    memset(pj->measured_units, 0, sizeof(pj->measured_units));
    pj->measured_nunits = pj->nunits;
    for (size_t i = 0; i < req->n_stages; i++) {
        const Sluice__StageStat *s = req->stages[i];
        if (s == NULL || s->name == NULL) {
            continue;
        }
        for (uint32_t u = 0; u < pj->nunits; u++) {
            if (strcmp(s->name, pj->unit_names[u]) == 0) {
                disp_text_copy(pj->measured_units[u].name, sizeof(pj->measured_units[u].name),
                               s->name);
                double sec = disp_pj_fin(s->cpu_sec_per_sample);
                pj->measured_units[u].cpu_sec_per_sample = sec <= DISP_PJ_MAX_UNIT_SEC ? sec : 0.0;
                pj->measured_units[u].out_bytes_per_sample = disp_pj_fin(s->out_bytes_per_sample);
                pj->measured_units[u].samples = s->samples;
            }
        }
    }
}

double disp_pjob_predicted(const disp_pjob_t *pj)
{
    if (pj->policy == SL_OFFLOAD_FASTFLOW) {
        return pj->ff.predicted;
    }
    return pj->result.cand[pj->result.chosen].predicted;
}

int disp_pjob_steady(const disp_pjob_t *pj) { return pj->steady; }

int disp_pjob_replan_due(disp_pjob_t *pj, const disp_registry_t *reg, int64_t now_ms, char *why,
                         size_t whylen)
{
    uint64_t sig = 0;
    uint32_t n = 0;
    disp_pjob_live_set(reg, &sig, &n);
    if (sig != pj->worker_sig || n != pj->nlive) {
        snprintf(why, whylen, "workers changed (%u -> %u live)", pj->nlive, n);
        return 1;
    }
    /* A measured budget re-plans at once: the first plan of a client that
     * could not read its quota may keep far too much work local, and every
     * second of it costs (no warm-up, no drift window). */
    if (budget_differs(pj) && pj->have_rates &&
        now_ms - pj->rates_ms <= DISP_REPLAN_RATES_MAX_AGE_MS &&
        (pj->budget_replan_ms == 0 || now_ms - pj->budget_replan_ms >= DISP_REPLAN_BUDGET_MIN_MS)) {
        snprintf(why, whylen, "cpu budget measured: %.2f -> %.2f CPUs", pj->client_budget,
                 pj->budget_measured);
        return 3;
    }
    /* The prefix cache filled (or emptied): the workers' costs changed. */
    if (disp_pc_replan_due(&pj->cache, why, whylen)) {
        return 4;
    }
    double pred = disp_pjob_predicted(pj);
    int recent = pj->have_rates && now_ms - pj->rates_ms <= DISP_REPLAN_RATES_MAX_AGE_MS &&
                 pj->rates_ms - pj->planned_ms >= DISP_REPLAN_WARMUP_MS;
    if (!recent || pred <= 0.0) {
        pj->drift_since_ms = 0;
        return 0;
    }
    double dev = fabs(pj->measured_rate - pred) / pred;
    if (dev <= DISP_REPLAN_DRIFT) {
        pj->drift_since_ms = 0;
        return 0;
    }
    if (pj->drift_since_ms == 0) {
        pj->drift_since_ms = now_ms;
    }
    if (now_ms - pj->drift_since_ms < pj->drift_window_ms) {
        return 0;
    }
    snprintf(why, whylen, "drift: measured %.0f vs predicted %.0f samples/s for %lld ms",
             pj->measured_rate, pred, (long long)(now_ms - pj->drift_since_ms));
    return 2;
}

void disp_pjob_replanned(disp_pjob_t *pj, int kind, const disp_plan_t *before,
                         const disp_plan_t *after)
{
    int same = before->split == after->split && before->compress == after->compress &&
               fabs(before->local_share - after->local_share) < 0.02;
    if (kind == 2 && same) {
        pj->drift_window_ms = pj->drift_window_ms * 2 < DISP_REPLAN_DRIFT_MAX_MS
                                  ? pj->drift_window_ms * 2
                                  : DISP_REPLAN_DRIFT_MAX_MS;
    } else {
        pj->drift_window_ms = DISP_REPLAN_DRIFT_MS;
    }
    if (kind == 3) {
        pj->budget_replan_ms = pj->planned_ms;
    }
}
