/* planner_job: see planner_job.h. Runs under the dispatcher mutex; all
 * peer-supplied numbers are cleaned (finite, >= 0) and text is copied with
 * disp_text_copy before it is stored. */
#include "dispatcher/status/json_doc.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/planner/planner_machines.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/engine/pipeline.h"

/* Measured per-unit costs replace profiled ones only past this many samples. */
#define DISP_PJ_MIN_MEASURED 20
/* A client claiming more overhead per sample than this is not believed
 * (it could only starve its own job; the bound keeps the arithmetic sane). */
#define DISP_PJ_MAX_OVERHEAD_SEC 1.0
#define DISP_PJ_MAX_UNIT_SEC 60.0 /* a measured unit cost above this is nonsense */

static double fin(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

/* ------------------------------------------------------------ cache */

disp_pcache_t *disp_pcache_new(void) { return calloc(1, sizeof(disp_pcache_t)); }

void disp_pcache_free(disp_pcache_t *c) { free(c); }

static int fresh(const disp_pcache_entry_t *e, int64_t now_ms)
{
    return e->used && now_ms - e->stored_ms < DISP_PCACHE_TTL_MS;
}

void disp_pcache_put(disp_pcache_t *c, uint64_t spec_hash, const disp_hprof_t *p,
                     int64_t now_ms)
{
    if (c == NULL || p->host[0] == '\0' || p->samples == 0) {
        return;
    }
    disp_pcache_entry_t *match = NULL;
    disp_pcache_entry_t *victim = NULL; /* a free slot, else the least recently used */
    for (size_t i = 0; i < DISP_PCACHE_MAX && match == NULL; i++) {
        disp_pcache_entry_t *e = &c->e[i];
        if (e->used && e->spec_hash == spec_hash && strcmp(e->prof.host, p->host) == 0) {
            match = e;
        } else if (!e->used) {
            if (victim == NULL || victim->used) {
                victim = e;
            }
        } else if (victim == NULL || (victim->used && e->used_ms < victim->used_ms)) {
            victim = e;
        }
    }
    disp_pcache_entry_t *slot = match != NULL ? match : victim;
    slot->used = 1;
    slot->spec_hash = spec_hash;
    slot->stored_ms = now_ms;
    slot->used_ms = now_ms;
    slot->prof = *p;
}

/* The cached profile of (spec, host); store keeps one per pair. */
static disp_pcache_entry_t *pcache_find(disp_pcache_t *c, uint64_t spec_hash, const char *host)
{
    for (size_t i = 0; c != NULL && i < DISP_PCACHE_MAX; i++) {
        disp_pcache_entry_t *e = &c->e[i];
        if (e->used && e->spec_hash == spec_hash && strcmp(e->prof.host, host) == 0) {
            return e;
        }
    }
    return NULL;
}

void disp_pcache_note_overhead(disp_pcache_t *c, uint64_t spec_hash, const char *host,
                               double overhead_sec)
{
    disp_pcache_entry_t *e = pcache_find(c, spec_hash, host);
    if (e != NULL) {
        e->prof.overhead_sec = overhead_sec;
    }
}

void disp_pcache_note_units(disp_pcache_t *c, uint64_t spec_hash, const char *host,
                            const disp_stage_stat_t *units, uint32_t n)
{
    disp_pcache_entry_t *e = pcache_find(c, spec_hash, host);
    for (uint32_t u = 0; e != NULL && u < n && u < e->prof.nunits && u < DISP_PL_MAX_UNITS; u++) {
        const disp_stage_stat_t *m = &units[u];
        if (m->samples >= DISP_PCACHE_MIN_UNIT_SAMPLES && m->cpu_sec_per_sample > 0.0 &&
            strcmp(m->name, e->prof.units[u].name) == 0) {
            e->prof.units[u].cpu_sec_per_sample = m->cpu_sec_per_sample;
        }
    }
}

size_t disp_pcache_list(disp_pcache_t *c, uint64_t spec_hash, int64_t now_ms,
                        const disp_hprof_t **ret, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; c != NULL && i < DISP_PCACHE_MAX && n < max; i++) {
        disp_pcache_entry_t *e = &c->e[i];
        if (fresh(e, now_ms) && e->spec_hash == spec_hash) {
            e->used_ms = now_ms;
            ret[n++] = &e->prof;
        }
    }
    if (c != NULL) {
        if (n > 0) {
            c->hits++;
        } else {
            c->misses++;
        }
    }
    return n;
}

/* ------------------------------------------------------------ inputs */

void disp_hprof_from_pb(const Sluice__HostProfile *m, disp_hprof_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (m == NULL) {
        return;
    }
    disp_text_copy(ret->host, sizeof(ret->host), m->host);
    for (size_t u = 0; u < m->n_units && u < DISP_PL_MAX_UNITS; u++) {
        const Sluice__StageStat *s = m->units[u];
        if (s == NULL) {
            continue;
        }
        disp_text_copy(ret->units[u].name, sizeof(ret->units[u].name), s->name);
        ret->units[u].cpu_sec_per_sample = fin(s->cpu_sec_per_sample);
        ret->units[u].out_bytes_per_sample = fin(s->out_bytes_per_sample);
        ret->units[u].samples = s->samples;
        ret->nunits = (uint32_t)u + 1;
    }
    ret->read_sec = fin(m->read_cpu_sec_per_sample);
    ret->encoded_bytes = fin(m->encoded_bytes_per_sample);
    ret->samples = m->samples;
    ret->seconds = fin(m->seconds);
    ret->model_error = fin(m->cost_model_error);
    ret->size_error = fin(m->size_cost_error);
    if (m->n_cost_model_coef == DISP_PJ_COST_COEF) {
        ret->ncoef = DISP_PJ_COST_COEF;
        for (size_t i = 0; i < DISP_PJ_COST_COEF; i++) {
            if (!isfinite(m->cost_model_coef[i])) {
                ret->ncoef = 0; /* a broken model is no model */
            }
            ret->coef[i] = m->cost_model_coef[i];
        }
    }
    ret->overhead_sec = fmin(fin(m->sample_overhead_sec), DISP_PJ_MAX_OVERHEAD_SEC);
}

/* A profile fits the pipeline when it has a row per unit, by name. */
static int fits(const disp_pjob_t *pj, const disp_hprof_t *p)
{
    if (p->nunits != pj->nunits || p->samples == 0) {
        return 0;
    }
    for (uint32_t u = 0; u < pj->nunits; u++) {
        if (strcmp(p->units[u].name, pj->unit_names[u]) != 0) {
            return 0;
        }
    }
    return 1;
}

/* The client's codec numbers, one per boundary 0..nunits. Anything else
 * (an older client: none; a broken one: another count) leaves them 0, and
 * the planner never compresses. The planner cleans the values. */
static void codec_from_pb(disp_pjob_t *pj, const Sluice__PlannerInputs *in)
{
    size_t n = (size_t)pj->nunits + 1;
    if (in->n_codec_ratio != n || in->n_codec_compress_sec_per_sample != n ||
        in->n_codec_decompress_sec_per_sample != n) {
        return;
    }
    for (size_t k = 0; k < n; k++) {
        pj->codec_ratio[k] = fin(in->codec_ratio[k]);
        pj->codec_compress[k] = fin(in->codec_compress_sec_per_sample[k]);
        pj->codec_decompress[k] = fin(in->codec_decompress_sec_per_sample[k]);
    }
}

int disp_pjob_new(const Sluice__PlannerInputs *in, const sl_spec_t *spec, sl_offload_e policy,
                  disp_pjob_t **ret, char *err, size_t errlen)
{
    sl_pipeline_t *pipe = NULL;
    int rc = sl_pipeline_new(spec, 0, &pipe, err, errlen);
    if (rc != 0) {
        return rc;
    }
    disp_pjob_t *pj = calloc(1, sizeof(*pj));
    if (pj == NULL) {
        sl_pipeline_free(pipe);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    pj->policy = policy;
    pj->nunits = sl_pipeline_nunits(pipe);
    for (uint32_t u = 0; u < pj->nunits && u < DISP_PL_MAX_UNITS; u++) {
        snprintf(pj->unit_names[u], sizeof(pj->unit_names[u]), "%s",
                 sl_pipeline_unit_name(pipe, u));
    }
    sl_pipeline_free(pipe);
    if (pj->nunits == 0 || pj->nunits > DISP_PL_MAX_UNITS) {
        uint32_t n = pj->nunits;
        free(pj);
        return sl_err(err, errlen, -EINVAL, "planner: the pipeline has %u units", n);
    }
    pj->spec_hash = in->spec_hash;
    pj->drift_window_ms = DISP_REPLAN_DRIFT_MS;
    disp_hprof_from_pb(in->client, &pj->client);
    if (!fits(pj, &pj->client)) {
        uint32_t n = pj->client.nunits;
        uint32_t want = pj->nunits;
        free(pj);
        return sl_err(err, errlen, -EINVAL,
                      "planner: the client's profile has %u units, the pipeline %u (or the "
                      "names differ, or no sample could be profiled)",
                      n, want);
    }
    pj->client_budget = fin(in->client_cpu_budget);
    disp_text_copy(pj->budget_source, sizeof(pj->budget_source), in->client_cpu_budget_source);
    /* The profile pass's estimate is already the client's budget. */
    pj->budget_measured = fmin(fin(in->client_cpu_budget_measured), DISP_PJ_MAX_BUDGET);
    pj->budget_from_measured = pj->budget_measured > 0.0;
    pj->recv_sec_per_byte = fin(in->recv_cpu_sec_per_byte);
    pj->consumer_target = fin(in->consumer_rate);
    pj->client_bandwidth = fin(in->client_bandwidth);
    pj->links_cached = in->links_cached != 0;
    disp_text_copy(pj->client_machine, sizeof(pj->client_machine), in->client_machine_id);
    pj->client_has_cpus = sl_cpuset_parse(in->client_cpu_set, &pj->client_cpus) == 0;
    codec_from_pb(pj, in);
    for (size_t i = 0; i < in->n_classes && pj->nclasses < DISP_PL_MAX_CLASSES; i++) {
        const Sluice__WorkerClass *m = in->classes[i];
        if (m == NULL) {
            continue;
        }
        disp_pclass_t *c = &pj->classes[pj->nclasses++];
        disp_text_copy(c->key, sizeof(c->key), m->key);
        c->threads = m->threads;
        c->cpu_budget = fin(m->cpu_budget);
        c->bandwidth = fin(m->bandwidth_bytes_per_sec);
        if (m->profile != NULL) {
            disp_hprof_from_pb(m->profile, &c->prof);
            c->profiled = fits(pj, &c->prof);
        }
        for (size_t k = 0; k < m->n_worker_ids && c->nids < DISP_PJ_MAX_IDS; k++) {
            c->ids[c->nids++] = m->worker_ids[k];
        }
    }
    *ret = pj;
    return 0;
}

void disp_pjob_free(disp_pjob_t *pj) { free(pj); }

/* ------------------------------------------------------------ live workers */

static int usable(const disp_worker_t *w) { return w->state == DISP_WORKER_LIVE && !w->leaving; }

static void live_set(const disp_registry_t *reg, uint64_t *ret_sig, uint32_t *ret_n)
{
    uint64_t sig = 0;
    uint32_t n = 0;
    for (size_t i = 0; i < reg->n; i++) {
        const disp_worker_t *w = reg->workers[i];
        if (usable(w)) {
            /* Order-independent: a sum of well-mixed ids. */
            uint64_t x = w->id * 0x9e3779b97f4a7c15ULL;
            sig += x ^ (x >> 29);
            n++;
        }
    }
    *ret_sig = sig;
    *ret_n = n;
}

static int class_of(const disp_pjob_t *pj, uint64_t id)
{
    for (uint32_t c = 0; c < pj->nclasses; c++) {
        for (uint32_t k = 0; k < pj->classes[c].nids; k++) {
            if (pj->classes[c].ids[k] == id) {
                return (int)c;
            }
        }
    }
    return -1;
}

static double cores_of(uint32_t threads, double budget)
{
    double t = threads > 0 ? (double)threads : 1.0;
    return budget > 0.0 && budget < t ? budget : t;
}

/* Workers' own per-unit measurements (heartbeat stage stats, cumulative
 * over their jobs, by unit name) averaged over the live workers of class c:
 * the cheap re-profile. Units nobody measured keep the profiled cost. */
static void measured_worker_costs(const disp_pjob_t *pj, const disp_registry_t *reg, int c,
                                  double *unit_sec)
{
    double sum[DISP_PL_MAX_UNITS] = {0};
    uint32_t cnt[DISP_PL_MAX_UNITS] = {0};
    for (size_t i = 0; i < reg->n; i++) {
        const disp_worker_t *w = reg->workers[i];
        if (!usable(w) || class_of(pj, w->id) != c) {
            continue;
        }
        for (uint32_t s = 0; s < w->nstages; s++) {
            if (w->stages[s].samples < DISP_PJ_MIN_MEASURED) {
                continue;
            }
            for (uint32_t u = 0; u < pj->nunits; u++) {
                if (strcmp(w->stages[s].name, pj->unit_names[u]) == 0) {
                    sum[u] += fin(w->stages[s].cpu_sec_per_sample);
                    cnt[u]++;
                }
            }
        }
    }
    for (uint32_t u = 0; u < pj->nunits; u++) {
        if (cnt[u] > 0 && sum[u] > 0.0) {
            unit_sec[u] = sum[u] / cnt[u];
        }
    }
}

int disp_pjob_set_splits(disp_pjob_t *pj, const uint64_t *len, uint32_t n)
{
    uint32_t nn = n <= DISP_PL_MAX_STEPS ? n : 0;
    int changed = nn != pj->nsplits;
    for (uint32_t i = 0; i < nn; i++) {
        changed |= pj->split_len[i] != len[i];
        pj->split_len[i] = len[i];
    }
    pj->nsplits = nn;
    return changed;
}

/* The shares whole splits make: handing the runtime j / n keeps the splits
 * disp_plan_split_is_local picks, and step_share[j] is their positions
 * over the epoch's. */
static void fill_steps(const disp_pjob_t *pj, disp_pl_input_t *in)
{
    in->nsteps = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < pj->nsplits; i++) {
        total += pj->split_len[i];
    }
    if (pj->nsplits == 0 || total == 0) {
        return;
    }
    in->nsteps = pj->nsplits;
    for (uint32_t j = 0; j <= pj->nsplits; j++) {
        double share = (double)j / (double)pj->nsplits;
        uint64_t local = 0;
        for (uint32_t i = 0; i < pj->nsplits; i++) {
            local += disp_plan_split_is_local(i, share) ? pj->split_len[i] : 0;
        }
        in->step_share[j] = (double)local / (double)total;
    }
}

static void add_host(disp_pm_host_t *hosts, size_t *n, const disp_worker_t *w, int cls,
                     double cores)
{
    if (hosts != NULL) {
        /* Its own budget, when it sent one, caps what its class assumes. */
        double own = w->cpu_budget > 0.0 ? fmin(cores, w->cpu_budget) : cores;
        hosts[(*n)++] = (disp_pm_host_t){w->machine_id, w->has_cpus ? &w->cpus : NULL, own, cls};
    }
}

static void build_input(const disp_pjob_t *pj, const disp_registry_t *reg, int64_t now_ms,
                        disp_pl_input_t *in)
{
    memset(in, 0, sizeof(*in));
    in->nunits = pj->nunits;
    int recent = pj->have_rates && now_ms - pj->rates_ms <= DISP_REPLAN_RATES_MAX_AGE_MS;
    for (uint32_t u = 0; u < pj->nunits; u++) {
        in->unit_sec[u] = pj->client.units[u].cpu_sec_per_sample;
        /* What the client measured while running (the units after the
         * split and its local share) beats the short profile. */
        if (recent && u < pj->measured_nunits &&
            pj->measured_units[u].samples >= DISP_PJ_MIN_MEASURED &&
            pj->measured_units[u].cpu_sec_per_sample > 0.0) {
            in->unit_sec[u] = pj->measured_units[u].cpu_sec_per_sample;
        }
        in->bytes[u + 1] = pj->client.units[u].out_bytes_per_sample;
    }
    in->bytes[0] = pj->client.encoded_bytes;
    for (uint32_t k = 0; k <= pj->nunits; k++) {
        in->ratio[k] = pj->codec_ratio[k];
        in->compress_sec[k] = pj->codec_compress[k];
        in->decompress_sec[k] = pj->codec_decompress[k];
    }
    in->read_sec = pj->client.read_sec;
    in->recv_sec_per_byte = pj->recv_sec_per_byte;
    in->client_cores = pj->client_budget;
    in->consumer_rate = pj->consumer_target;
    if (in->consumer_rate <= 0.0 && recent && pj->measured_consumer > 0.0) {
        in->consumer_rate = pj->measured_consumer;
    }
    in->client_bandwidth = pj->client_bandwidth;
    /* Measured by this job, else by an earlier job of the spec on this
     * host (the cached client profile), else unknown (0). */
    in->sample_sec = recent && pj->have_sample_sec ? pj->measured_sample_sec
                                                   : pj->client.overhead_sec;

    /* Who shares a machine with whom: the client first, then each live
     * worker (no memory: every host is its own machine, as before). */
    disp_pm_host_t *hosts = calloc(reg->n + 1, sizeof(*hosts));
    size_t nhosts = 0;
    if (hosts != NULL) {
        hosts[nhosts++] = (disp_pm_host_t){pj->client_machine,
                                           pj->client_has_cpus ? &pj->client_cpus : NULL,
                                           pj->client_budget, -1};
    }
    int largest = -1;
    for (uint32_t c = 0; c < pj->nclasses; c++) {
        const disp_pclass_t *pc = &pj->classes[c];
        disp_pl_class_t *k = &in->classes[in->nclasses++];
        k->cores = cores_of(pc->threads, pc->cpu_budget);
        k->bandwidth = pc->bandwidth;
        k->profiled = pc->profiled;
        if (pc->profiled) {
            k->read_sec = pc->prof.read_sec;
            for (uint32_t u = 0; u < pj->nunits; u++) {
                k->unit_sec[u] = pc->prof.units[u].cpu_sec_per_sample;
            }
            measured_worker_costs(pj, reg, (int)c, k->unit_sec);
            if (largest < 0 || pc->nids > pj->classes[largest].nids) {
                largest = (int)c;
            }
        }
    }
    for (size_t i = 0; i < reg->n; i++) {
        const disp_worker_t *w = reg->workers[i];
        if (!usable(w)) {
            continue;
        }
        int c = class_of(pj, w->id);
        if (c >= 0) {
            in->classes[c].workers++;
            add_host(hosts, &nhosts, w, c, in->classes[c].cores);
            continue;
        }
        /* Joined after profiling: the largest profiled class's speed (the
         * client's when none), its own threads. Grouped by thread count. */
        double cores = cores_of(w->threads, 0.0);
        uint32_t k;
        for (k = pj->nclasses; k < in->nclasses; k++) {
            if (in->classes[k].cores == cores) {
                break;
            }
        }
        if (k == in->nclasses) {
            if (in->nclasses == DISP_PL_MAX_CLASSES) {
                continue; /* bounded: beyond it such workers are not counted */
            }
            disp_pl_class_t *n = &in->classes[in->nclasses++];
            if (largest >= 0) {
                *n = in->classes[largest];
            } else {
                memset(n, 0, sizeof(*n));
                n->bandwidth = pj->nclasses > 0 ? in->classes[0].bandwidth : 0.0;
            }
            n->workers = 0;
            n->cores = cores;
        }
        in->classes[k].workers++;
        add_host(hosts, &nhosts, w, (int)k, cores);
    }
    if (hosts != NULL) {
        disp_pm_group(hosts, nhosts, in);
        free(hosts);
    }
    fill_steps(pj, in);
    disp_planner_rank_share(in, pj->node_ranks, pj->world);
}

/* ------------------------------------------------------------ planning */

/* The measured budget is far enough from the one in use to re-plan. */
static int budget_differs(const disp_pjob_t *pj)
{
    return pj->budget_measured > 0.0 && pj->client_budget > 0.0 &&
           fabs(pj->budget_measured - pj->client_budget) / pj->client_budget >
               DISP_REPLAN_BUDGET_DIFF;
}

void disp_pjob_plan(disp_pjob_t *pj, const disp_registry_t *reg, disp_plan_t *plan,
                    int64_t now_ms, const char *why)
{
    /* Once measured (and once it mattered), the client's measured budget
     * is the budget: every plan from then on takes the latest one. */
    if (pj->budget_measured > 0.0 && (pj->budget_from_measured || budget_differs(pj))) {
        pj->client_budget = pj->budget_measured;
        pj->budget_from_measured = 1;
    }
    build_input(pj, reg, now_ms, &pj->input);
    if (disp_planner_plan(&pj->input, &pj->result) != 0 ||
        disp_planner_fastflow(&pj->input, &pj->ff) != 0) {
        /* Cannot happen: nunits was checked at creation. Keep the plan. */
        return;
    }
    if (pj->policy == SL_OFFLOAD_FASTFLOW) {
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
    live_set(reg, &pj->worker_sig, &pj->nlive);
    pj->planned_ms = now_ms;
    pj->drift_since_ms = 0;
    snprintf(pj->last_reason, sizeof(pj->last_reason), "%s", why);
}

void disp_pjob_rates(disp_pjob_t *pj, const Sluice__ReportRatesRequest *req, int64_t now_ms)
{
    pj->have_rates = 1;
    pj->rates_ms = now_ms;
    pj->measured_rate = fin(req->delivered_per_sec);
    /* Steady: the window delivered at least DISP_PCACHE_STEADY of the
     * job's recent rate (the first one: anything). */
    pj->steady = pj->measured_rate > 0.0 &&
                 pj->measured_rate >= DISP_PCACHE_STEADY * pj->rate_avg;
    pj->rate_avg = pj->rate_avg > 0.0 ? pj->rate_avg * (1.0 - DISP_PJ_RATE_AVG_WEIGHT) +
                                            pj->measured_rate * DISP_PJ_RATE_AVG_WEIGHT
                                      : pj->measured_rate;
    pj->measured_consumer = fin(req->consumer_rate);
    pj->measured_cpu_fraction = fin(req->cpu_fraction);
    pj->measured_wait_fraction = fin(req->wait_fraction);
    pj->measured_overhead = fmin(fin(req->overhead_cpu_sec_per_sample), DISP_PJ_MAX_OVERHEAD_SEC);
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
    if (fin(req->cpu_budget) > 0.0 && !pj->budget_from_measured) {
        pj->client_budget = fin(req->cpu_budget);
    }
    /* A client that could not read its budget says what it measured. */
    double mb = fmin(fin(req->measured_cpu_budget), DISP_PJ_MAX_BUDGET);
    if (mb > 0.0) {
        pj->budget_measured = mb;
    }
    /* The client repeats its probe's figure; a fitted one replaces it. */
    if (fin(req->recv_cpu_sec_per_byte) > 0.0 && !pj->recv_fitted) {
        pj->recv_sec_per_byte = fin(req->recv_cpu_sec_per_byte);
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
                double sec = fin(s->cpu_sec_per_sample);
                pj->measured_units[u].cpu_sec_per_sample = sec <= DISP_PJ_MAX_UNIT_SEC ? sec : 0.0;
                pj->measured_units[u].out_bytes_per_sample = fin(s->out_bytes_per_sample);
                pj->measured_units[u].samples = s->samples;
            }
        }
    }
}

static double predicted_of(const disp_pjob_t *pj)
{
    if (pj->policy == SL_OFFLOAD_FASTFLOW) {
        return pj->ff.predicted;
    }
    return pj->result.cand[pj->result.chosen].predicted;
}

int disp_pjob_steady(const disp_pjob_t *pj) { return pj->steady; }

int disp_pjob_replan_due(disp_pjob_t *pj, const disp_registry_t *reg, int64_t now_ms,
                         char *why, size_t whylen)
{
    uint64_t sig = 0;
    uint32_t n = 0;
    live_set(reg, &sig, &n);
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
    double pred = predicted_of(pj);
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

/* ------------------------------------------------------------ JSON */

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
    jset(b, o, "client_cpu_budget_source", pj->budget_source[0] != '\0'
                                               ? jstr(pj->budget_source)
                                               : json_null());
    jset(b, o, "client_cpu_budget_measured", pj->budget_measured > 0.0
                                                 ? jnum(pj->budget_measured)
                                                 : json_null());
    jset(b, o, "client_cpu_budget_from",
         json_string(pj->budget_from_measured ? "measured" : "client"));
    jset(b, o, "recv_ns_per_byte", jnum(in->recv_sec_per_byte * 1e9));
    jset(b, o, "sample_overhead_ms", jnum(in->sample_sec * 1e3));
    jset(b, o, "consumer_rate", in->consumer_rate > 0.0 ? jnum(in->consumer_rate) : json_null());
    jset(b, o, "client_bandwidth", in->client_bandwidth > 0.0 ? jnum(in->client_bandwidth)
                                                              : json_null());
    /* Whether the link figures came from the client's probes of an earlier
     * job (the dispatcher's link cache) rather than this job's. */
    jset(b, o, "links_cached", json_boolean(pj->links_cached));
    /* Before the rank share: what the client measured for its node. */
    jset(b, o, "node_cpu_budget", jnum(pj->client_budget));
    jset(b, o, "node_bandwidth", pj->client_bandwidth > 0.0 ? jnum(pj->client_bandwidth)
                                                            : json_null());
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
        jset(b, x, "bandwidth_bytes_per_sec", k->bandwidth > 0.0 ? jnum(k->bandwidth)
                                                                 : json_null());
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

json_t *disp_pjob_json(const disp_pjob_t *pj, const disp_plan_t *plan)
{
    if (pj == NULL) {
        return NULL;
    }
    jb_t b = {0};
    json_t *o = json_object();
    jset(&b, o, "policy", json_string(pj->policy == SL_OFFLOAD_FASTFLOW ? "fastflow" : "auto"));
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
    jset(&b, o, "lifted_samples_per_sec", pj->result.workers_needed > 0
                                              ? jnum(pj->result.lifted_rate)
                                              : json_null());
    jset(&b, o, "fastflow", ff_json(&b, &pj->ff));
    if (plan != NULL) {
        json_t *p = json_object();
        jset(&b, p, "mode", jstr(plan->mode));
        jset(&b, p, "split", json_integer(plan->split));
        jset(&b, p, "local_share", jnum(plan->local_share));
        jset(&b, p, "predicted_samples_per_sec", jnum(plan->predicted));
        jset(&b, p, "binding", jstr(plan->binding));
        jset(&b, p, "version", json_integer(plan->version));
        jset(&b, o, "plan", p);
    }
    json_t *m = json_object();
    jset(&b, m, "delivered_per_sec", pj->have_rates ? jnum(pj->measured_rate) : json_null());
    jset(&b, m, "consumer_rate", pj->measured_consumer > 0.0 ? jnum(pj->measured_consumer)
                                                             : json_null());
    jset(&b, m, "cpu_fraction", pj->have_rates ? jnum(pj->measured_cpu_fraction) : json_null());
    jset(&b, m, "wait_fraction", pj->have_rates ? jnum(pj->measured_wait_fraction)
                                                : json_null());
    jset(&b, m, "overhead_ms_per_sample", pj->measured_overhead > 0.0
                                              ? jnum(pj->measured_overhead * 1e3)
                                              : json_null());
    double pred = predicted_of(pj);
    jset(&b, m, "drift", pj->have_rates && pred > 0.0
                             ? jnum((pj->measured_rate - pred) / pred)
                             : json_null());
    jset(&b, o, "measured", m);
    jset(&b, o, "replans", json_integer(pj->replans));
    jset(&b, o, "last_reason", jstr(pj->last_reason));
    if (b.failed) {
        json_decref(o);
        return NULL;
    }
    return o;
}
