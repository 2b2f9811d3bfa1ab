/* planner_job_cache: a job's prefix cache decision and pricing
 * (planner_cache.h) against its planner state: the decision made from the
 * first plan's input and the live workers' cache budgets, kept, and the
 * measured hit rate charged on every plan's input. Runs under the
 * dispatcher mutex. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dispatcher/planner/planner_job_impl.h"
#include "dispatcher/status/json_doc.h"

/* Computing the prefix per sample on the workers: the largest profiled
 * class with live workers (the client's costs when none). */
static double prefix_compute_sec(const disp_pjob_t *pj, const disp_pl_input_t *in)
{
    uint32_t n = pj->cache.in.prefix < in->nunits ? pj->cache.in.prefix : in->nunits;
    const double *unit = in->unit_sec;
    double read = in->read_sec;
    uint32_t most = 0;
    for (uint32_t c = 0; c < in->nclasses && c < DISP_PL_MAX_CLASSES; c++) {
        const disp_pl_class_t *k = &in->classes[c];
        if (k->profiled && k->workers > most) {
            most = k->workers;
            unit = k->unit_sec;
            read = k->read_sec;
        }
    }
    double sec = read;
    for (uint32_t u = 0; u < n; u++) {
        sec += unit[u];
    }
    return sec;
}

static double workers_budget(const disp_registry_t *reg)
{
    double sum = 0.0;
    for (size_t i = 0; i < reg->n; i++) {
        const disp_worker_t *w = reg->workers[i];
        if (w->state == DISP_WORKER_LIVE && !w->leaving) {
            sum += (double)w->cache_bytes;
        }
    }
    return sum;
}

void disp_pjob_cache(disp_pjob_t *pj, const disp_registry_t *reg, disp_plan_t *plan)
{
    disp_pc_job_t *c = &pj->cache;
    if (!c->decided) {
        const disp_pl_input_t *in = &pj->input;
        uint32_t k = c->in.prefix <= in->nunits ? c->in.prefix : in->nunits;
        c->in.compute_sec = prefix_compute_sec(pj, in);
        c->in.out_bytes = in->bytes[k];
        c->in.ratio = in->ratio[k];
        c->in.decompress_sec = in->decompress_sec[k];
        c->in.budget = workers_budget(reg);
        disp_pc_decide(&c->in, &c->d);
        if (plan->cache_reason[0] != '\0') {
            /* A restored job keeps the decision its workers got. */
            c->d.on = !plan->cache_off;
            snprintf(c->d.why, sizeof(c->d.why), "%s", plan->cache_reason);
        }
        c->decided = 1;
    }
    c->priced_rate = disp_pc_rate(c);
    disp_pc_price(&pj->input, c->in.prefix, c->priced_rate, c->d.read_sec);
    plan->cache_off = !c->d.on;
    snprintf(plan->cache_reason, sizeof(plan->cache_reason), "%s", c->d.why);
}

/* Infinity and NaN are not JSON: null. */
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *disp_pjob_cache_json(const disp_pjob_t *pj)
{
    const disp_pc_job_t *c = &pj->cache;
    jb_t b = {0};
    json_t *o = json_object();
    jset(&b, o, "decision", json_string(!c->decided ? "undecided" : c->d.on ? "on" : "off"));
    jset(&b, o, "reason", json_string(c->d.why));
    jset(&b, o, "prefix_units", json_integer(c->in.prefix));
    jset(&b, o, "spec_off", json_boolean(c->in.spec_off));
    jset(&b, o, "epochs", json_integer(c->in.epochs));
    jset(&b, o, "seen_before", json_boolean(c->in.seen));
    jset(&b, o, "compute_ms_per_sample", num(c->in.compute_sec * 1e3));
    jset(&b, o, "read_ms_per_sample", num(c->d.read_sec * 1e3));
    jset(&b, o, "stored_bytes_per_sample", num(c->d.stored_bytes));
    jset(&b, o, "total_bytes", num(c->d.total_bytes));
    jset(&b, o, "budget_bytes", c->in.budget > 0.0 ? num(c->in.budget) : json_null());
    jset(&b, o, "fit", num(c->d.fit));
    jset(&b, o, "lookups", json_integer((json_int_t)((c->hits + c->misses) & INT64_MAX)));
    jset(&b, o, "hit_rate", c->have_rate ? num(c->hit_rate) : json_null());
    jset(&b, o, "priced_hit_rate", num(c->priced_rate));
    if (b.failed) {
        json_decref(o);
        return NULL;
    }
    return o;
}
