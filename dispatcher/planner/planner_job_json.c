/* planner_job_json: a job's planner state as JSON -- its inputs, profiles,
 * candidates and the FastFlow result -- for /status and `sluice plan`
 * (planner_job.h disp_pjob_json). Runs under the dispatcher mutex. */
#include <math.h>

#include "dispatcher/planner/first_plan.h"
#include "dispatcher/planner/planner_job_impl.h"
#include "dispatcher/planner/planner_machines.h"
#include "dispatcher/planner/planner_mix.h"
#include "dispatcher/status/json_doc.h"

/* Infinity ("no limit") and NaN are not JSON: null. */
static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Text we stored came through disp_text_copy (printable ASCII). */
static json_t *jstr(const char *s) { return json_string(s != NULL ? s : ""); }

static json_t *units_json(jb_t *b, const disp_hprof_t *p)
{
    json_t *a = json_array();
    for (uint32_t u = 0; u < p->nunits; u++) {
        json_t *o = json_object();
        jset(b, o, "name", jstr(p->units[u].name));
        jset(b, o, "cpu_ms_per_sample", jnum(p->units[u].cpu_sec_per_sample * 1e3));
        jset(b, o, "out_bytes_per_sample", jnum(p->units[u].out_bytes_per_sample));
        jpush(b, a, o);
    }
    return a;
}

static json_t *profile_json(jb_t *b, const disp_hprof_t *p)
{
    json_t *o = json_object();
    jset(b, o, "host", jstr(p->host));
    jset(b, o, "samples", json_integer((json_int_t)(p->samples > INT64_MAX ? 0 : p->samples)));
    jset(b, o, "seconds", jnum(p->seconds));
    jset(b, o, "read_ms_per_sample", jnum(p->read_sec * 1e3));
    jset(b, o, "encoded_bytes_per_sample", jnum(p->encoded_bytes));
    jset(b, o, "cost_model_error", p->model_error > 0.0 ? jnum(p->model_error) : json_null());
    jset(b, o, "size_cost_error", p->size_error > 0.0 ? jnum(p->size_error) : json_null());
    /* seconds = c0 + c1 KB + c2 MPix + c3 progressive MPix + c4 text KB + c5 images
     * (costmodel.h) */
    json_t *coef = p->ncoef > 0 ? json_array() : json_null();
    for (uint32_t k = 0; k < p->ncoef; k++) {
        jpush(b, coef, jnum(p->coef[k]));
    }
    jset(b, o, "cost_model_coef", coef);
    if (p->overhead_sec > 0.0) {
        jset(b, o, "sample_overhead_ms", jnum(p->overhead_sec * 1e3));
    }
    jset(b, o, "units", units_json(b, p));
    return o;
}

static json_t *cand_json(jb_t *b, const disp_pl_cand_t *c)
{
    json_t *o = json_object();
    if (c->off) {
        jset(b, o, "label", json_string("off"));
    }
    jset(b, o, "split", json_integer(c->split));
    jset(b, o, "local_share", jnum(c->share));
    jset(b, o, "runtime_share", jnum(c->runtime_share));
    jset(b, o, "predicted_samples_per_sec", jnum(c->predicted));
    jset(b, o, "binding", json_string(disp_bind_name(c->binding)));
    jset(b, o, "client_limit", jnum(c->terms.client));
    jset(b, o, "worker_limit", jnum(c->terms.worker));
    jset(b, o, "network_limit", jnum(c->terms.network));
    jset(b, o, "compress", json_boolean(c->compress));
    return o;
}

static json_t *ff_json(jb_t *b, const disp_ff_result_t *f)
{
    json_t *o = json_object();
    jset(b, o, "gthp", jnum(f->gthp));
    jset(b, o, "lthp", jnum(f->lthp));
    jset(b, o, "pcycle_ms", jnum(f->pcycle * 1e3));
    jset(b, o, "dcycle_ms", jnum(f->dcycle * 1e3));
    json_t *cands = json_array();
    for (int i = 0; i < DISP_FF__COUNT; i++) {
        const disp_ff_cand_t *c = &f->cand[i];
        json_t *x = json_object();
        jset(b, x, "name", json_string(disp_ff_cand_name((disp_ff_cand_e)i)));
        jset(b, x, "applicable", json_boolean(c->applicable));
        jset(b, x, "split", json_integer(c->split));
        jset(b, x, "rthp", jnum(c->rthp));
        jset(b, x, "cycles_ms", jnum(c->cycles * 1e3));
        jset(b, x, "score", jnum(c->score));
        jpush(b, cands, x);
    }
    jset(b, o, "candidates", cands);
    jset(b, o, "chosen", f->chosen >= 0 ? json_string(disp_ff_cand_name(f->chosen)) : json_null());
    jset(b, o, "ratio_local", jnum(f->ratio_local));
    jset(b, o, "split", json_integer(f->split));
    jset(b, o, "local_share", jnum(f->share));
    jset(b, o, "realized_share", jnum(f->realized_share));
    jset(b, o, "predicted_samples_per_sec", jnum(f->predicted));
    jset(b, o, "binding", json_string(disp_bind_name(f->binding)));
    jset(b, o, "reason", jstr(f->reason));
    return o;
}

static json_t *inputs_json(jb_t *b, const disp_pjob_t *pj)
{
    const disp_pl_input_t *in = &pj->input;
    json_t *o = json_object();
    jset(b, o, "spec_hash", json_integer((json_int_t)(pj->spec_hash & 0x1fffffffffffffULL)));
    jset(b, o, "client_cpu_budget", jnum(in->client_cores));
    /* "cgroup", "affinity" or "unknown" (the client could not read one and
     * measures), null for an older client; the latest measurement; and
     * whether the plan took its budget from it ("measured") or from the
     * client's reading ("client"). */
    jset(b, o, "client_cpu_budget_source",
         pj->budget_source[0] != '\0' ? jstr(pj->budget_source) : json_null());
    jset(b, o, "client_cpu_budget_measured",
         pj->budget_measured > 0.0 ? jnum(pj->budget_measured) : json_null());
    jset(b, o, "client_cpu_budget_from",
         json_string(pj->budget_from_measured ? "measured" : "client"));
    jset(b, o, "recv_ns_per_byte", jnum(in->recv_sec_per_byte * 1e9));
    jset(b, o, "sample_overhead_ms", jnum(in->sample_sec * 1e3));
    /* The client's overhead is another spec's measured on this host (the
     * first plan of a spec new here). */
    jset(b, o, "sample_overhead_prior", json_boolean(pj->overhead_prior));
    /* Where the charged overhead came from (first_plan.h), the host prior
     * whether charged or not, and the client's profiled figure. */
    jset(b, o, "sample_overhead_source",
         json_string(disp_ovh_src_name(pj->have_sample_sec ? DISP_OVH_MEASURED
                                                           : (disp_ovh_src_e)pj->overhead_src)));
    jset(b, o, "sample_overhead_prior_ms",
         pj->overhead_prior_sec > 0.0 ? jnum(pj->overhead_prior_sec * 1e3) : json_null());
    jset(b, o, "sample_overhead_profiled_ms",
         pj->overhead_profiled_sec > 0.0 ? jnum(pj->overhead_profiled_sec * 1e3) : json_null());
    /* The client's per-second cost (first_plan.h): what this plan takes
     * off the budget, and the host's figure found whether charged or not. */
    jset(b, o, "client_persec_cpu", jnum(in->client_persec_cpu));
    jset(b, o, "client_persec_host", pj->persec_host > 0.0 ? jnum(pj->persec_host) : json_null());
    jset(b, o, "consumer_rate", in->consumer_rate > 0.0 ? jnum(in->consumer_rate) : json_null());
    jset(b, o, "client_bandwidth",
         in->client_bandwidth > 0.0 ? jnum(in->client_bandwidth) : json_null());
    /* Whether the link figures came from the client's probes of an earlier
     * job (the dispatcher's link cache) rather than this job's. */
    jset(b, o, "links_cached", json_boolean(pj->links_cached));
    /* Before the rank share: what the client measured for its node. */
    jset(b, o, "node_cpu_budget", jnum(pj->client_budget));
    jset(b, o, "node_bandwidth",
         pj->client_bandwidth > 0.0 ? jnum(pj->client_bandwidth) : json_null());
    jset(b, o, "node_ranks", json_integer(pj->node_ranks > 1 ? pj->node_ranks : 1));
    jset(b, o, "world_size", json_integer(pj->world > 1 ? pj->world : 1));
    json_t *steps = json_array();
    for (uint32_t j = 0; j <= in->nsteps && in->nsteps > 0; j++) {
        jpush(b, steps, jnum(in->step_share[j]));
    }
    jset(b, o, "share_steps", steps);
    json_t *bytes = json_array();
    for (uint32_t k = 0; k <= in->nunits; k++) {
        jpush(b, bytes, jnum(in->bytes[k]));
    }
    jset(b, o, "bytes_per_sample_at_split", bytes);
    /* The wire codec per boundary (0 = not measured: never compressed). */
    json_t *ratio = json_array();
    json_t *zms = json_array();
    json_t *uzms = json_array();
    for (uint32_t k = 0; k <= in->nunits; k++) {
        jpush(b, ratio, jnum(in->ratio[k]));
        jpush(b, zms, jnum(in->compress_sec[k] * 1e3));
        jpush(b, uzms, jnum(in->decompress_sec[k] * 1e3));
    }
    jset(b, o, "codec_ratio_at_split", ratio);
    jset(b, o, "codec_compress_ms_at_split", zms);
    jset(b, o, "codec_decompress_ms_at_split", uzms);
    json_t *cms = json_array();
    for (uint32_t u = 0; u < in->nunits; u++) {
        jpush(b, cms, jnum(in->unit_sec[u] * 1e3));
    }
    jset(b, o, "client_unit_ms", cms);
    jset(b, o, "client_profile", profile_json(b, &pj->client));
    json_t *classes = json_array();
    for (uint32_t c = 0; c < in->nclasses; c++) {
        const disp_pl_class_t *k = &in->classes[c];
        json_t *x = json_object();
        jset(b, x, "key", jstr(c < pj->nclasses ? pj->classes[c].key : "(joined later)"));
        jset(b, x, "workers", json_integer(k->workers));
        jset(b, x, "cores", jnum(k->cores));
        jset(b, x, "bandwidth_bytes_per_sec",
             k->bandwidth > 0.0 ? jnum(k->bandwidth) : json_null());
        jset(b, x, "profiled", json_boolean(k->profiled));
        json_t *ums = json_array();
        for (uint32_t u = 0; u < in->nunits; u++) {
            jpush(b, ums, jnum((k->profiled ? k->unit_sec[u] : in->unit_sec[u]) * 1e3));
        }
        jset(b, x, "unit_ms", ums);
        if (c < pj->nclasses && pj->classes[c].profiled) {
            jset(b, x, "profile", profile_json(b, &pj->classes[c].prof));
        }
        jpush(b, classes, x);
    }
    jset(b, o, "classes", classes);
    /* Which hosts share a machine (planner_machines.h). */
    jset(b, o, "shared_machines", disp_pm_json(in));
    return o;
}

const char *disp_pjob_policy_name(const disp_pjob_t *pj)
{
    switch (pj->policy) {
    case SL_OFFLOAD_AUTO:
        return "auto";
    case SL_OFFLOAD_FASTFLOW:
        return "fastflow";
    default:
        return "fixed"; /* off, all, K:F: the plan's mode says which */
    }
}

/* The what-if per class (planner.h disp_planner_whatif). */
static json_t *whatif_json(jb_t *b, const disp_pjob_t *pj)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < pj->nwhatif; i++) {
        const disp_wi_curve_t *w = &pj->whatif[i];
        json_t *o = json_object();
        jset(b, o, "class", jstr(disp_pjob_class_key(pj, w->cls)));
        jset(b, o, "workers", json_integer(w->workers));
        jset(b, o, "wanted", json_integer(w->wanted));
        jset(b, o, "wanted_samples_per_sec", jnum(w->wanted_rate));
        jset(b, o, "wanted_binding", jstr(disp_bind_name(w->wanted_binding)));
        jset(b, o, "ingress_bytes_per_sec", w->ingress > 0.0 ? jnum(w->ingress) : json_null());
        jset(b, o, "ingress_assumed", json_boolean(w->ingress_assumed));
        json_t *pts = json_array();
        for (uint32_t k = 0; k < w->npoints; k++) {
            json_t *p = json_object();
            jset(b, p, "delta", json_integer(w->p[k].delta));
            jset(b, p, "workers", json_integer(w->p[k].workers));
            jset(b, p, "predicted_samples_per_sec", jnum(w->p[k].predicted));
            jset(b, p, "binding", jstr(disp_bind_name(w->p[k].binding)));
            jpush(b, pts, p);
        }
        jset(b, o, "curve", pts);
        jpush(b, a, o);
    }
    return a;
}

json_t *disp_pjob_json(const disp_pjob_t *pj, const disp_plan_t *plan)
{
    if (pj == NULL) {
        return NULL;
    }
    jb_t b = {0};
    json_t *o = json_object();
    jset(&b, o, "policy", json_string(disp_pjob_policy_name(pj)));
    json_t *names = json_array();
    for (uint32_t u = 0; u < pj->nunits; u++) {
        jpush(&b, names, jstr(pj->unit_names[u]));
    }
    jset(&b, o, "units", names);
    jset(&b, o, "inputs", inputs_json(&b, pj));
    json_t *cands = json_array();
    for (uint32_t i = 0; i < pj->result.ncand; i++) {
        jpush(&b, cands, cand_json(&b, &pj->result.cand[i]));
    }
    jset(&b, o, "candidates", cands);
    jset(&b, o, "chosen", json_integer(pj->result.chosen));
    jset(&b, o, "reason", jstr(pj->result.reason));
    jset(&b, o, "local_samples_per_sec", jnum(pj->result.local_rate));
    jset(&b, o, "workers_needed", json_integer(pj->result.workers_needed));
    jset(&b, o, "workers_needed_on_new_machines", json_boolean(pj->result.hint_new_machines));
    jset(&b, o, "hint_estimated", json_boolean(pj->result.hint_estimated));
    jset(&b, o, "lifted_samples_per_sec",
         pj->result.workers_needed > 0 ? jnum(pj->result.lifted_rate) : json_null());
    jset(&b, o, "fastflow", ff_json(&b, &pj->ff));
    jset(&b, o, "whatif", whatif_json(&b, pj));
    jset(&b, o, "cache", disp_pjob_cache_json(pj)); /* the prefix cache (planner_cache.h) */
    if (pj->mix != NULL) { /* per-source costs and the weights used (planner_mix.h) */
        jset(&b, o, "mix", disp_pjob_mix_json(pj));
    }
    if (plan != NULL) {
        json_t *p = json_object();
        jset(&b, p, "mode", jstr(plan->mode));
        jset(&b, p, "split", json_integer(plan->split));
        jset(&b, p, "local_share", jnum(plan->local_share));
        jset(&b, p, "predicted_samples_per_sec", jnum(plan->predicted));
        jset(&b, p, "binding", jstr(plan->binding));
        jset(&b, p, "version", json_integer(plan->version));
        jset(&b, p, "cache_off", json_boolean(plan->cache_off));
        jset(&b, o, "plan", p);
    }
    json_t *m = json_object();
    jset(&b, m, "delivered_per_sec", pj->have_rates ? jnum(pj->measured_rate) : json_null());
    jset(&b, m, "consumer_rate",
         pj->measured_consumer > 0.0 ? jnum(pj->measured_consumer) : json_null());
    jset(&b, m, "cpu_fraction", pj->have_rates ? jnum(pj->measured_cpu_fraction) : json_null());
    jset(&b, m, "wait_fraction", pj->have_rates ? jnum(pj->measured_wait_fraction) : json_null());
    jset(&b, m, "overhead_ms_per_sample",
         pj->measured_overhead > 0.0 ? jnum(pj->measured_overhead * 1e3) : json_null());
    jset(&b, m, "persec_cpu", pj->measured_persec > 0.0 ? jnum(pj->measured_persec) : json_null());
    double pred = disp_pjob_predicted(pj);
    jset(&b, m, "drift",
         pj->have_rates && pred > 0.0 ? jnum((pj->measured_rate - pred) / pred) : json_null());
    jset(&b, o, "measured", m);
    jset(&b, o, "replans", json_integer(pj->replans));
    jset(&b, o, "last_reason", jstr(pj->last_reason));
    if (b.failed) {
        json_decref(o);
        return NULL;
    }
    return o;
}
