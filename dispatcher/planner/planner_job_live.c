/* planner_job_live: the live workers of the moment against a job's planner
 * state (planner_job.h): their signature (a re-plan when it changes), their
 * speed classes, the machines they share and the splits' steps, turned into
 * the planner's input (disp_pjob_build_input). Workers' measured unit costs
 * replace profiled ones (the cheap re-profile). Runs under the dispatcher
 * mutex. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/planner/planner_job_impl.h"
#include "dispatcher/planner/planner_machines.h"
#include "dispatcher/planner/planner_mix.h"

static int usable(const disp_worker_t *w) { return w->state == DISP_WORKER_LIVE && !w->leaving; }

void disp_pjob_live_set(const disp_registry_t *reg, uint64_t *ret_sig, uint32_t *ret_n)
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
    if (disp_pjob_mix_stale(pj)) {
        return; /* measured under another mix's weights (planner_mix.h) */
    }
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
                    sum[u] += disp_pj_fin(w->stages[s].cpu_sec_per_sample);
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

/* The client's side of the planner's input: its unit costs (measured
 * while running beats the short profile), bytes, codec, budget, consumer
 * and overhead. Clears in first. */
static void client_input(const disp_pjob_t *pj, int64_t now_ms, disp_pl_input_t *in)
{
    memset(in, 0, sizeof(*in));
    in->nunits = pj->nunits;
    int recent = pj->have_rates && now_ms - pj->rates_ms <= DISP_REPLAN_RATES_MAX_AGE_MS;
    int stale = disp_pjob_mix_stale(pj); /* measured under another mix's weights */
    for (uint32_t u = 0; u < pj->nunits; u++) {
        in->unit_sec[u] = pj->client.units[u].cpu_sec_per_sample;
        /* What the client measured while running (the units after the
         * split and its local share) beats the short profile. */
        if (recent && !stale && u < pj->measured_nunits &&
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
    in->client_source_rate = pj->client.source_rate; /* planner_read.c */
    in->client_source_latency = pj->client.source_latency;
    /* Measured by this job, else by an earlier job of the spec on this
     * host (the cached client profile), else by a job of another spec on
     * this host (the prior, disp_pcache_host_prior), else unknown (0). */
    int own = recent && pj->have_sample_sec;
    in->sample_sec = own ? pj->measured_sample_sec : pj->client.overhead_sec;
    /* The job's own overhead counts its per-second cost already. */
    in->client_persec_cpu = own ? 0.0 : pj->persec_charged;
}

/* One class per profiled worker class, with the workers' own measured unit
 * costs; returns the largest profiled class (by workers), -1 when none. */
static int profiled_classes(const disp_pjob_t *pj, const disp_registry_t *reg, disp_pl_input_t *in)
{
    int largest = -1;
    for (uint32_t c = 0; c < pj->nclasses; c++) {
        const disp_pclass_t *pc = &pj->classes[c];
        disp_pl_class_t *k = &in->classes[in->nclasses++];
        k->cores = cores_of(pc->threads, pc->cpu_budget);
        k->bandwidth = pc->bandwidth;
        k->profiled = pc->profiled;
        k->source_rate = pc->profiled ? pc->prof.source_rate : 0.0; /* planner_read.c */
        k->source_latency = pc->profiled ? pc->prof.source_latency : 0.0;
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
    return largest;
}

/* Each live worker counted in its class, and its machine noted in hosts
 * (when not NULL). A worker that joined after profiling runs at the
 * largest profiled class's speed (the client's when none) with its own
 * threads, in a class per thread count. */
static void live_workers(const disp_pjob_t *pj, const disp_registry_t *reg, int largest,
                         disp_pl_input_t *in, disp_pm_host_t *hosts, size_t *nhosts)
{
    for (size_t i = 0; i < reg->n; i++) {
        const disp_worker_t *w = reg->workers[i];
        if (!usable(w)) {
            continue;
        }
        int c = class_of(pj, w->id);
        if (c >= 0) {
            in->classes[c].workers++;
            add_host(hosts, nhosts, w, c, in->classes[c].cores);
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
        add_host(hosts, nhosts, w, (int)k, cores);
    }
}

void disp_pjob_build_input(const disp_pjob_t *pj, const disp_registry_t *reg, int64_t now_ms,
                           disp_pl_input_t *in)
{
    client_input(pj, now_ms, in);
    /* Who shares a machine with whom: the client first, then each live
     * worker (no memory: every host is its own machine, as before). */
    disp_pm_host_t *hosts = calloc(reg->n + 1, sizeof(*hosts));
    size_t nhosts = 0;
    if (hosts != NULL) {
        hosts[nhosts++] = (disp_pm_host_t){pj->client_machine,
                                           pj->client_has_cpus ? &pj->client_cpus : NULL,
                                           pj->client_budget, -1};
    }
    int largest = profiled_classes(pj, reg, in);
    live_workers(pj, reg, largest, in, hosts, &nhosts);
    if (hosts != NULL) {
        disp_pm_group(hosts, nhosts, in);
        free(hosts);
    }
    fill_steps(pj, in);
    disp_planner_rank_share(in, pj->node_ranks, pj->world);
}
