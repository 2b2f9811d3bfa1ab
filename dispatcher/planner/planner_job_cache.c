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

/* The live workers' measured read-back cost (their last windows, weighted
 * by hits); have 0 when none measured one. */
static void workers_cost(const disp_registry_t *reg, disp_pc_cost_t *ret)
{
    const disp_pc_cost_t *v[64];
    uint32_t n = 0;
    disp_pc_cost_t sum = {0};
    double w = 0.0;
    for (size_t i = 0; i < reg->n; i++) {
        const disp_worker_t *wk = reg->workers[i];
        if (wk->state != DISP_WORKER_LIVE || !wk->pc_read.cost.have) {
            continue;
        }
        v[n++] = &wk->pc_read.cost;
        if (n == sizeof(v) / sizeof(v[0])) {
            /* Bounded: fold the batch into a running mean. */
            disp_pc_cost_t m;
            disp_pc_cost_mean(v, n, &m);
            sum.entry_sec += m.entry_sec * m.hits;
            sum.byte_sec += m.byte_sec * m.hits;
            w += m.hits;
            n = 0;
        }
    }
    disp_pc_cost_t m = {0};
    disp_pc_cost_mean(v, n, &m);
    if (m.have) {
        sum.entry_sec += m.entry_sec * m.hits;
        sum.byte_sec += m.byte_sec * m.hits;
        w += m.hits;
    }
    ret->have = w > 0.0;
    ret->entry_sec = w > 0.0 ? sum.entry_sec / w : 0.0;
    ret->byte_sec = w > 0.0 ? sum.byte_sec / w : 0.0;
    ret->hits = w;
}

void disp_pjob_note_client_cache(disp_pjob_t *pj, const Sluice__CacheStats *m)
{
    disp_pc_job_t *c = &pj->cache;
    (void)disp_pc_hitwin_note(&c->client, m->hits, m->misses);
    disp_pc_sums_t s = {(double)m->hits, (double)m->bytes_read, (double)m->read_ns,
                        m->read_bytes_sq, m->read_bytes_ns};
    (void)disp_pc_costwin_set(&c->client_cost, &s);
}

void disp_pjob_cache(disp_pjob_t *pj, const disp_registry_t *reg, disp_plan_t *plan)
{
    disp_pc_job_t *c = &pj->cache;
    disp_pc_cost_t measured;
    workers_cost(reg, &measured);
    if (!c->decided) {
        c->in.measured = measured;
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
    /* Read back at the measured cost once there is one, whenever the
     * decision was made; the client's own figure for its own hits. */
    c->worker_read_measured = measured.have;
    c->worker_read_sec = measured.have ? disp_pc_cost_sec(&measured, c->d.stored_bytes)
                                       : c->d.read_sec;
    c->client_read_measured = c->client_cost.cost.have;
    c->client_read_sec = c->client_cost.cost.have
                             ? disp_pc_cost_sec(&c->client_cost.cost, c->d.stored_bytes)
                             : c->worker_read_sec;
    c->priced_rate = disp_pc_rate(c);
    disp_pc_price(&pj->input, c->in.prefix, c->priced_rate, c->worker_read_sec);
    c->client_priced_rate = disp_pc_client_rate(c);
    disp_pc_price_client(&pj->input, c->in.prefix, c->client_priced_rate, c->client_read_sec);
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
    /* The read-back cost: the decision's, and what the last plan priced
     * (measured by the workers and the client, or assumed). */
    jset(&b, o, "read_measured", json_boolean(c->d.measured));
    jset(&b, o, "worker_read_ms", num(c->worker_read_sec * 1e3));
    jset(&b, o, "worker_read_measured", json_boolean(c->worker_read_measured));
    jset(&b, o, "client_read_ms", num(c->client_read_sec * 1e3));
    jset(&b, o, "client_read_measured", json_boolean(c->client_read_measured));
    jset(&b, o, "client_lookups",
         json_integer((json_int_t)((c->client.hits + c->client.misses) & INT64_MAX)));
    jset(&b, o, "client_hit_rate", c->client.have_rate ? num(c->client.hit_rate) : json_null());
    jset(&b, o, "client_priced_hit_rate", num(c->client_priced_rate));
    jset(&b, o, "client_local_saved_ms", num(pj->input.local_cache_sec * 1e3));
    if (b.failed) {
        json_decref(o);
        return NULL;
    }
    return o;
}
