/* planner_svc: see planner_svc.h. */
#include "dispatcher/service/planner_svc.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "common/order/ranks.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/first_plan.h"
#include "dispatcher/planner/link_cache.h"
#include "dispatcher/planner/plan.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/planner/mix_cost_cache.h"
#include "dispatcher/planner/planner_mix.h"

#define DISP_PLAN_CONTEXT_MAX_WORKERS 1024
#define DISP_PLAN_CONTEXT_MAX_CACHED 64
#define DISP_PLAN_CONTEXT_MAX_LINKS 64

/* ------------------------------------------------------------ messages */

static double lim(double v) { return isfinite(v) ? v : 0.0; } /* 0 = no limit on the wire */

static Sluice__FastFlowExplain *ff_pb(disp_arena_t *a, const disp_ff_result_t *f)
{
    Sluice__FastFlowExplain *m = disp_arena_alloc(a, sizeof(*m));
    Sluice__FastFlowCandidate *c = disp_arena_alloc(a, DISP_FF__COUNT * sizeof(*c));
    Sluice__FastFlowCandidate **pc = disp_arena_alloc(a, DISP_FF__COUNT * sizeof(*pc));
    if (m == NULL || c == NULL || pc == NULL) {
        return NULL;
    }
    sluice__fast_flow_explain__init(m);
    m->gthp = lim(f->gthp);
    m->lthp = lim(f->lthp);
    m->pcycle = f->pcycle;
    m->dcycle = f->dcycle;
    for (int i = 0; i < DISP_FF__COUNT; i++) {
        sluice__fast_flow_candidate__init(&c[i]);
        c[i].name = (char *)disp_ff_cand_name((disp_ff_cand_e)i);
        c[i].applicable = f->cand[i].applicable;
        c[i].split = f->cand[i].split;
        c[i].rthp = lim(f->cand[i].rthp);
        c[i].cycles = f->cand[i].cycles;
        c[i].score = lim(f->cand[i].score);
        pc[i] = &c[i];
    }
    m->n_candidates = DISP_FF__COUNT;
    m->candidates = pc;
    m->chosen = (char *)(f->chosen >= 0 ? disp_ff_cand_name((disp_ff_cand_e)f->chosen) : "");
    m->ratio_local = f->ratio_local;
    m->split = f->split;
    m->local_share = f->share;
    m->predicted_samples_per_sec = f->predicted;
    m->binding = (char *)disp_bind_name(f->binding);
    return m;
}

static Sluice__PlanExplain *explain_pb(disp_arena_t *a, const disp_pjob_t *pj,
                                       const disp_plan_t *plan)
{
    const disp_pl_result_t *r = &pj->result;
    Sluice__PlanExplain *m = disp_arena_alloc(a, sizeof(*m));
    Sluice__PlanCandidate *c = disp_arena_alloc(a, r->ncand * sizeof(*c));
    Sluice__PlanCandidate **pc = disp_arena_alloc(a, r->ncand * sizeof(*pc));
    char **names = disp_arena_alloc(a, pj->nunits * sizeof(*names));
    if (m == NULL || c == NULL || pc == NULL || names == NULL) {
        return NULL;
    }
    sluice__plan_explain__init(m);
    for (uint32_t i = 0; i < r->ncand; i++) {
        const disp_pl_cand_t *x = &r->cand[i];
        sluice__plan_candidate__init(&c[i]);
        c[i].split = x->split;
        c[i].local_share = x->share;
        c[i].predicted_samples_per_sec = x->predicted;
        c[i].binding = (char *)disp_bind_name(x->binding);
        c[i].client_limit = lim(x->terms.client);
        c[i].worker_limit = lim(x->terms.worker);
        c[i].network_limit = lim(x->terms.network);
        c[i].off = x->off;
        c[i].compress = x->compress != 0;
        pc[i] = &c[i];
    }
    m->n_candidates = r->ncand;
    m->candidates = pc;
    m->chosen = r->chosen;
    m->reason = disp_arena_strdup(a, r->reason);
    m->workers_needed = r->workers_needed;
    m->hint_estimated = r->hint_estimated;
    m->lifted_samples_per_sec = r->lifted_rate;
    m->local_samples_per_sec = r->local_rate;
    m->fastflow = ff_pb(a, &pj->ff);
    for (uint32_t u = 0; u < pj->nunits; u++) {
        names[u] = disp_arena_strdup(a, pj->unit_names[u]);
        if (names[u] == NULL) {
            return NULL;
        }
    }
    m->n_unit_names = pj->nunits;
    m->unit_names = names;
    m->policy = (char *)disp_pjob_policy_name(pj);
    json_t *j = disp_pjob_json(pj, plan);
    char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    m->json = disp_arena_strdup(a, s != NULL ? s : "{}");
    free(s);
    if (m->reason == NULL || m->fastflow == NULL || m->json == NULL) {
        return NULL;
    }
    return m;
}

/* The client's probed links, for its next job (link_cache.h); not when
 * they came from the cache themselves. */
static void cache_links(disp_t *d, const Sluice__PlannerInputs *in, int64_t now_ms)
{
    const char *client = in->client_host;
    if (in->links_cached || client == NULL || client[0] == '\0') {
        return;
    }
    for (size_t i = 0; i < in->n_classes; i++) {
        const Sluice__WorkerClass *c = in->classes[i];
        if (c != NULL && c->key != NULL) {
            disp_lcache_put(d->lcache, client, c->key, c->bandwidth_bytes_per_sec,
                            in->recv_cpu_sec_per_byte, 1, now_ms);
        }
    }
    disp_lcache_put(d->lcache, client, "", in->client_bandwidth, 0.0, in->client_ingress_streams,
                    now_ms);
}

/* Stores the request's profiles in the cache: a re-submitted job skips
 * profiling them. Profiles that came from the cache are not re-stored (their
 * age would reset forever). */
static void cache_inputs(disp_t *d, const Sluice__PlannerInputs *in, int64_t now_ms)
{
    cache_links(d, in, now_ms);
    disp_hprof_t p;
    if (in->client != NULL && !in->client->cached) {
        disp_hprof_from_pb(in->client, &p);
        disp_pcache_put(d->pcache, in->spec_hash, &p, now_ms);
    }
    for (size_t i = 0; i < in->n_classes; i++) {
        const Sluice__WorkerClass *c = in->classes[i];
        if (c != NULL && c->profile != NULL && !c->profile->cached) {
            disp_hprof_from_pb(c->profile, &p);
            disp_pcache_put(d->pcache, in->spec_hash, &p, now_ms);
        }
    }
    disp_mcache_put(d->mcache, in, now_ms);
}

/* ------------------------------------------------------------ geometry */

/* The splits a job of `positions` an epoch will have, cut by count with the
 * configured size; unknown (continuous F) when the size is chosen per job
 * at submission -- disp_planner_submit then reads it off the job. */
static void geometry_estimate(const disp_t *d, disp_pjob_t *pj, uint64_t positions)
{
    uint64_t ss = d->jobs.lim.split_size;
    uint64_t len[DISP_PL_MAX_STEPS];
    uint64_t n = ss > 0 ? positions / ss + (positions % ss != 0) : 0;
    if (n == 0 || n > DISP_PL_MAX_STEPS) {
        (void)disp_pjob_set_splits(pj, NULL, 0);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        len[i] = i + 1 < n ? ss : positions - i * ss;
    }
    (void)disp_pjob_set_splits(pj, len, (uint32_t)n);
}

/* The splits of the job's oldest live epoch, as the runtime cut them
 * (by count or by cost). Returns 1 when they differ from what pj had. */
static int geometry_of_job(disp_pjob_t *pj, disp_job_t *job)
{
    if (job->nep == 0) {
        return 0;
    }
    if (job->nsplits > DISP_PL_MAX_STEPS) {
        return disp_pjob_set_splits(pj, NULL, 0);
    }
    uint64_t len[DISP_PL_MAX_STEPS];
    uint64_t base = job->ep[0].epoch * job->nsplits;
    for (uint32_t i = 0; i < job->nsplits; i++) {
        uint64_t b = 0;
        uint64_t e = 0;
        if (disp_job_split(job, base + i, NULL, &b, &e) == NULL) {
            return 0;
        }
        len[i] = e > b ? e - b : 0;
    }
    return disp_pjob_set_splits(pj, len, job->nsplits);
}

/* Multi-rank jobs: the open parts of job's group submitted from the same
 * client host (client_id is the client's host name, client/lib/open.c),
 * job itself included; 1 for a single consumer. */
uint32_t disp_planner_node_ranks(const disp_jobs_t *js, const disp_job_t *job)
{
    if (job->group[0] == '\0' || job->world_size <= 1) {
        return 1;
    }
    uint32_t n = 0;
    for (size_t i = 0; i < js->n; i++) {
        const disp_job_t *o = js->jobs[i];
        if (o->state != DISP_JOB_CLOSED && o->world_size == job->world_size &&
            strcmp(o->group, job->group) == 0 && strcmp(o->client_id, job->client_id) == 0) {
            n++;
        }
    }
    return n > 0 ? n : 1;
}

/* ------------------------------------------------------------ planning */

/* Plans req for policy into *ret_plan and *ret_pj (owned by the caller).
 * Returns 0, 1 when there is nothing to plan (no inputs, or a fixed
 * offload), or a negative code with err set. */
static int plan_request(disp_t *d, const Sluice__SubmitJobRequest *req, int force_policy,
                        int64_t now_ms, disp_plan_t *ret_plan, disp_pjob_t **ret_pj, char *err,
                        size_t errlen)
{
    if (req->planner == NULL) {
        return 1; /* an older client, or a fixed plan: nothing to plan from */
    }
    const char *json = req->spec_json != NULL ? req->spec_json : "";
    const char *name = req->spec_name != NULL && req->spec_name[0] != '\0' ? req->spec_name
                                                                           : "<rpc>";
    sl_spec_t *spec = malloc(sizeof(*spec)); /* large: keep it off the pool thread's stack */
    if (spec == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = sl_spec_parse(name, json, strlen(json), spec, err, errlen);
    if (rc != 0) {
        free(spec);
        return rc;
    }
    /* A fixed offload (off, all, K:F) with the client's profiles is
     * diagnosed, not chosen (disp_pjob_fixed): PlanJob for `sluice plan
     * --offload K:F`, and any client that sends profiles with one. */
    sl_offload_e policy = spec->offload;
    (void)force_policy;
    disp_plan_t plan;
    rc = disp_plan_compute(spec, &plan, err, errlen);
    disp_pjob_t *pj = NULL;
    if (rc == 0) {
        rc = disp_pjob_new(req->planner, spec, policy, &pj, err, errlen);
    }
    if (rc == 0) {
        geometry_estimate(d, pj, sl_spec_positions(spec, req->num_samples));
        pj->cache.in.samples = (double)req->num_samples; /* entries are per sample index */
        /* Per-node share: alone on its node until the tick counts the
         * job's other ranks there (they may not have submitted yet). */
        pj->world = spec->world_size;
        pj->node_ranks = 1;
    }
    sl_spec_clear(spec);
    free(spec);
    if (rc != 0) {
        return rc;
    }
    /* A spec new to this host: its profile carries no overhead; what other
     * specs' jobs measured here is the prior, else what the client measured
     * under its quota while profiling (first_plan.h; docs/planner.md). */
    double prior = 0.0;
    if (!disp_pcache_host_prior(d->pcache, pj->client.host, pj->spec_hash, now_ms, &prior)) {
        prior = 0.0;
    }
    pj->overhead_prior_sec = prior;
    pj->overhead_src = (int)disp_first_overhead(pj->client.overhead_sec, prior,
                                                pj->overhead_profiled_sec,
                                                &pj->client.overhead_sec);
    pj->overhead_prior = pj->overhead_src == DISP_OVH_PRIOR;
    /* The host's per-second cost, where no running job's overhead holds it. */
    if (!disp_pcache_host_persec(d->pcache, pj->client.host, now_ms, &pj->persec_host)) {
        pj->persec_host = 0.0;
    }
    pj->persec_charged = disp_first_persec((disp_ovh_src_e)pj->overhead_src, pj->persec_host,
                                           pj->client_budget);
    cache_inputs(d, req->planner, now_ms);
    disp_pjob_plan(pj, &d->reg, &plan, now_ms, "submit");
    plan.version = 1;
    *ret_plan = plan;
    *ret_pj = pj;
    return 0;
}

int disp_planner_submit(disp_t *d, const Sluice__SubmitJobRequest *req, disp_submit_t *sub,
                        int64_t now_ms, disp_job_t **ret_job, Sluice__PlanExplain **ret_explain,
                        disp_arena_t *a, char *err, size_t errlen)
{
    *ret_explain = NULL;
    disp_plan_t plan;
    disp_pjob_t *pj = NULL;
    char perr[512] = "";
    int rc = plan_request(d, req, 0, now_ms, &plan, &pj, perr, sizeof(perr));
    if (rc < 0) {
        /* A profile we cannot use must not cost the user the job: it runs
         * as "all", and the reason is logged (the spec error, if that was
         * it, comes back from disp_jobs_submit below). */
        SL_NOTICE("planner: not planning a job from \"%s\": %s", req->client_id, perr);
    }
    sub->plan = rc == 0 ? &plan : NULL;
    rc = disp_jobs_submit(&d->jobs, sub, now_ms, ret_job, err, errlen);
    sub->plan = NULL;
    if (rc != 0 || pj == NULL) {
        disp_pjob_free(pj);
        return rc;
    }
    (*ret_job)->planner = pj;
    if (geometry_of_job(pj, *ret_job)) {
        /* The epoch was cut otherwise than estimated (a per-job split size,
         * or by cost): plan F in its splits. Still version 1; only splits
         * not yet handed out follow. */
        disp_pjob_plan(pj, &d->reg, &plan, now_ms, "submit");
        plan.version = 1;
        (*ret_job)->plan = plan;
        disp_jobs_replan(&d->jobs, *ret_job, now_ms);
    }
    *ret_explain = explain_pb(a, pj, &(*ret_job)->plan);
    SL_NOTICE("job %" PRIu64 ": planned (%s): split %u/%u%s, local share %.3f, %.0f samples/s "
              "predicted, bound by %s; client alone %.0f%s",
              (*ret_job)->id, plan.mode, plan.split, plan.nunits, plan.compress ? " +zstd" : "",
              plan.local_share, plan.predicted, plan.binding, pj->result.local_rate,
              pj->result.workers_needed > 0 ? "; more workers would help" : "");
    if (pj->mix != NULL) {
        SL_NOTICE("job %" PRIu64 ": mix of %u sources planned with per-source costs %s",
                  (*ret_job)->id, pj->mix->nsources,
                  pj->mix->cached ? "from the dispatcher's cache" : "the client profiled");
    }
    return 0;
}

/* The job's per-second cost into the host's figure (bounded, refusals
 * logged once per job). */
static void note_persec(disp_t *d, const disp_job_t *job, disp_pjob_t *pj)
{
    double bound = 0.0;
    if (pj->measured_persec <= 0.0 ||
        disp_pcache_note_persec(d->pcache, pj->spec_hash, pj->client.host, pj->measured_persec,
                                pj->client_budget, &bound) != -ERANGE ||
        pj->persec_refused) {
        return;
    }
    pj->persec_refused = 1;
    SL_WARN("job %" PRIu64 ": per-second client cost %.4f CPU not cached for \"%s\": above "
            "%.4f CPU (%.0f %% of its budget, at most %.2f)",
            job->id, pj->measured_persec, pj->client.host, bound, DISP_PERSEC_MAX_SHARE * 100.0,
            DISP_PERSEC_MAX_CPU);
}

void disp_planner_on_rates(disp_t *d, disp_job_t *job, const Sluice__ReportRatesRequest *req,
                           int64_t now_ms)
{
    disp_pjob_t *pj = job->planner;
    if (pj != NULL) {
        disp_pjob_rates(pj, req, now_ms);
        double bound = 0.0;
        int noted = pj->have_sample_sec && disp_pjob_steady(pj)
                        ? disp_pcache_note_overhead(d->pcache, pj->spec_hash, pj->client.host,
                                                    pj->measured_sample_sec, &bound)
                        : -ENOENT;
        if (noted == 0 && now_ms - job->created_ms < DISP_PRIOR_MIN_RUN_MS) {
            disp_pcache_not_prior(d->pcache, pj->spec_hash, pj->client.host);
        }
        if (noted == -ERANGE && !pj->overhead_refused) {
            pj->overhead_refused = 1;
            SL_WARN("job %" PRIu64 ": per-sample overhead %.3f ms not cached for \"%s\": "
                    "above %.3f ms (%.0fx the idle-core profile of a local sample, at least "
                    "%.0f ms)",
                    job->id, pj->measured_sample_sec * 1e3, pj->client.host, bound * 1e3,
                    DISP_PCACHE_OVERHEAD_MAX_X, DISP_PCACHE_OVERHEAD_FLOOR_SEC * 1e3);
        }
        note_persec(d, job, pj);
        disp_pcache_note_units(d->pcache, pj->spec_hash, pj->client.host, pj->measured_units,
                               pj->measured_nunits);
        if (pj->recv_fitted) {
            disp_lcache_note_recv(d->lcache, pj->client.host, pj->recv_sec_per_byte, now_ms);
        }
    }
}

void disp_planner_tick(disp_t *d, int64_t now_ms)
{
    for (size_t i = 0; i < d->jobs.n; i++) {
        disp_job_t *job = d->jobs.jobs[i];
        disp_pjob_t *pj = job->planner;
        char why[160];
        if (pj != NULL) {
            /* The workers' prefix cache lookups so far (heartbeats). */
            disp_pc_note(&pj->cache, job->cache.hits, job->cache.misses);
        }
        int kind = pj != NULL && job->state == DISP_JOB_ACTIVE
                       ? disp_pjob_replan_due(pj, &d->reg, now_ms, why, sizeof(why))
                       : 0;
        if (kind == 0 && pj != NULL && job->state == DISP_JOB_ACTIVE &&
            disp_pjob_mix_due(pj, disp_job_mix_step(job), why, sizeof(why))) {
            kind = 4; /* a schedule changed the weights: other costs (planner_mix.h) */
        }
        uint32_t on_node = pj != NULL ? disp_planner_node_ranks(&d->jobs, job) : 1;
        if (kind == 0 && pj != NULL && job->state == DISP_JOB_ACTIVE &&
            on_node != (pj->node_ranks > 1 ? pj->node_ranks : 1)) {
            snprintf(why, sizeof(why), "ranks on the client's node: %u -> %u",
                     pj->node_ranks > 1 ? pj->node_ranks : 1, on_node);
            kind = 1; /* like a worker change: the resources changed */
        }
        if (kind == 0) {
            continue;
        }
        pj->node_ranks = on_node;
        (void)geometry_of_job(pj, job);
        disp_plan_t np = job->plan;
        disp_pjob_plan(pj, &d->reg, &np, now_ms, why);
        np.version = job->plan.version + 1;
        pj->replans++;
        SL_NOTICE("job %" PRIu64 ": re-plan v%u (%s): split %u -> %u%s, local share %.3f -> "
                  "%.3f, %.0f samples/s predicted, bound by %s",
                  job->id, np.version, why, job->plan.split, np.split, np.compress ? " +zstd" : "",
                  job->plan.local_share, np.local_share, np.predicted, np.binding);
        disp_pjob_replanned(pj, kind, &job->plan, &np);
        job->plan = np;
        /* Splits not yet handed out follow the new share and split point;
         * handed-out ones keep theirs (exactly-once and bytes untouched). */
        disp_jobs_replan(&d->jobs, job, now_ms);
        if (disp_jstate_plan(d, job) != 0) {
            /* Bytes never depend on the plan: a restart would only resume
             * with the previous one. */
            SL_WARN("job %" PRIu64 ": journal write of plan v%u failed", job->id,
                    job->plan.version);
        }
    }
}

json_t *disp_planner_status_json(const disp_job_t *job)
{
    return disp_pjob_json(job->planner, &job->plan);
}

/* ------------------------------------------------------------ RPCs */

/* d->mu held: the live workers, at most DISP_PLAN_CONTEXT_MAX_WORKERS. */
static size_t live_workers(const disp_t *d)
{
    size_t nlive = 0;
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        nlive += w->state == DISP_WORKER_LIVE && !w->leaving;
    }
    return nlive < DISP_PLAN_CONTEXT_MAX_WORKERS ? nlive : DISP_PLAN_CONTEXT_MAX_WORKERS;
}

/* d->mu held: the first nlive live workers into resp->workers (room for
 * nlive). -ENOMEM when the arena is out of memory. */
static int context_workers(const disp_t *d, size_t nlive, Sluice__PlanContextResponse *resp,
                           disp_arena_t *a)
{
    for (size_t i = 0; i < d->reg.n && resp->n_workers < nlive; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        if (w->state != DISP_WORKER_LIVE || w->leaving) {
            continue;
        }
        Sluice__WorkerInfo *m = disp_arena_alloc(a, sizeof(*m));
        if (m == NULL) {
            return -ENOMEM;
        }
        sluice__worker_info__init(m);
        m->worker_id = w->id;
        m->address = disp_arena_strdup(a, w->address);
        m->hostname = disp_arena_strdup(a, w->hostname);
        m->threads = w->threads;
        if (m->address == NULL || m->hostname == NULL) {
            return -ENOMEM;
        }
        resp->workers[resp->n_workers++] = m;
    }
    return 0;
}

/* A mix's cached per-source costs as messages in the arena; -ENOMEM. */
static int context_mix(const disp_mcache_entry_t *e, Sluice__PlanContextResponse *resp,
                       disp_arena_t *a)
{
    if (e == NULL) {
        return 0;
    }
    resp->cached_mix_sources = disp_arena_alloc(a, e->nsources * sizeof(*resp->cached_mix_sources));
    if (resp->cached_mix_sources == NULL) {
        return -ENOMEM;
    }
    for (uint32_t j = 0; j < e->nsources; j++) {
        const disp_mcost_t *s = &e->src[j];
        Sluice__MixSourceCost *m = disp_arena_alloc(a, sizeof(*m));
        double *u = disp_arena_alloc(a, (e->nunits + 1) * sizeof(double));
        double *b = disp_arena_alloc(a, (e->nunits + 1) * sizeof(double));
        if (m == NULL || u == NULL || b == NULL) {
            return -ENOMEM;
        }
        sluice__mix_source_cost__init(m);
        if ((m->name = disp_arena_strdup(a, s->name)) == NULL) {
            return -ENOMEM;
        }
        memcpy(u, s->unit_sec, e->nunits * sizeof(double));
        memcpy(b, s->bytes, (e->nunits + 1) * sizeof(double));
        m->n_unit_cpu_sec_per_sample = e->nunits;
        m->unit_cpu_sec_per_sample = u;
        m->n_bytes_per_sample = (size_t)e->nunits + 1;
        m->bytes_per_sample = b;
        m->read_cpu_sec_per_sample = s->read_sec;
        m->samples = s->samples;
        m->profiled_share = s->profiled_share;
        resp->cached_mix_sources[resp->n_cached_mix_sources++] = m;
    }
    return 0;
}

/* A cached profile as a message in the arena; NULL on ENOMEM. */
static Sluice__HostProfile *profile_msg(disp_arena_t *a, const disp_hprof_t *p)
{
    Sluice__HostProfile *m = disp_arena_alloc(a, sizeof(*m));
    Sluice__StageStat *u = disp_arena_alloc(a, (p->nunits + 1) * sizeof(*u));
    Sluice__StageStat **pu = disp_arena_alloc(a, (p->nunits + 1) * sizeof(*pu));
    if (m == NULL || u == NULL || pu == NULL) {
        return NULL;
    }
    sluice__host_profile__init(m);
    m->host = disp_arena_strdup(a, p->host);
    for (uint32_t k = 0; k < p->nunits; k++) {
        sluice__stage_stat__init(&u[k]);
        u[k].name = disp_arena_strdup(a, p->units[k].name);
        u[k].cpu_sec_per_sample = p->units[k].cpu_sec_per_sample;
        u[k].out_bytes_per_sample = p->units[k].out_bytes_per_sample;
        u[k].samples = p->units[k].samples;
        pu[k] = &u[k];
        if (u[k].name == NULL) {
            return NULL;
        }
    }
    m->n_units = p->nunits;
    m->units = pu;
    m->read_cpu_sec_per_sample = p->read_sec;
    m->encoded_bytes_per_sample = p->encoded_bytes;
    m->samples = p->samples;
    m->seconds = p->seconds;
    m->cached = 1;
    m->cost_model_error = p->model_error;
    m->size_cost_error = p->size_error;
    m->n_cost_model_coef = p->ncoef;
    m->cost_model_coef = p->ncoef > 0 ? disp_arena_alloc(a, sizeof(p->coef)) : NULL;
    if (m->cost_model_coef != NULL) {
        memcpy(m->cost_model_coef, p->coef, sizeof(p->coef));
    } else {
        m->n_cost_model_coef = 0;
    }
    m->sample_overhead_sec = p->overhead_sec;
    return m->host != NULL ? m : NULL;
}

/* d->mu held: the client's cached link probes into resp->links (none when
 * the arena cannot hold their list). -ENOMEM when it cannot hold one. */
static int context_links(const disp_link_t *const *links, size_t nlinks, int64_t now_ms,
                         Sluice__PlanContextResponse *resp, disp_arena_t *a)
{
    resp->links = nlinks > 0 ? disp_arena_alloc(a, nlinks * sizeof(*resp->links)) : NULL;
    for (size_t i = 0; i < nlinks && resp->links != NULL; i++) {
        Sluice__LinkProbe *m = disp_arena_alloc(a, sizeof(*m));
        if (m == NULL) {
            return -ENOMEM;
        }
        sluice__link_probe__init(m);
        m->class_key = disp_arena_strdup(a, links[i]->class_key);
        m->bandwidth_bytes_per_sec = links[i]->bandwidth;
        m->recv_cpu_sec_per_byte = links[i]->recv_cpu_per_byte;
        m->streams = links[i]->streams;
        m->age_sec = (double)(now_ms - links[i]->stored_ms) / 1000.0;
        if (m->class_key == NULL) {
            return -ENOMEM;
        }
        resp->links[resp->n_links++] = m;
    }
    return 0;
}

int disp_svc_get_plan_context(disp_t *d, const Sluice__PlanContextRequest *req,
                              Sluice__PlanContextResponse *resp, disp_arena_t *a, int64_t now_ms,
                              char *err, size_t errlen)
{
    const disp_hprof_t *cached[DISP_PLAN_CONTEXT_MAX_CACHED];
    const disp_link_t *links[DISP_PLAN_CONTEXT_MAX_LINKS];
    int rc = -ENOMEM;
    pthread_mutex_lock(&d->mu);
    size_t nlive = live_workers(d);
    size_t ncached = disp_pcache_list(d->pcache, req->spec_hash, now_ms, cached,
                                      DISP_PLAN_CONTEXT_MAX_CACHED);
    size_t nlinks = disp_lcache_list(d->lcache, req->client_host, now_ms, links,
                                     DISP_PLAN_CONTEXT_MAX_LINKS);
    resp->version = SL_PROTOCOL_VERSION;
    resp->workers = nlive > 0 ? disp_arena_alloc(a, nlive * sizeof(*resp->workers)) : NULL;
    resp->cached = ncached > 0 ? disp_arena_alloc(a, ncached * sizeof(*resp->cached)) : NULL;
    if ((nlive > 0 && resp->workers == NULL) || (ncached > 0 && resp->cached == NULL) ||
        context_workers(d, nlive, resp, a) != 0) {
        goto out;
    }
    for (size_t i = 0; i < ncached; i++) {
        Sluice__HostProfile *m = profile_msg(a, cached[i]);
        if (m == NULL) {
            goto out;
        }
        resp->cached[resp->n_cached++] = m;
    }
    rc = context_links(links, nlinks, now_ms, resp, a);
    if (rc == 0) {
        rc = context_mix(disp_mcache_get(d->mcache, req->spec_hash, req->client_host, now_ms), resp,
                         a);
    }
    double prior = 0.0;
    if (rc == 0 && req->client_host != NULL &&
        disp_pcache_host_prior(d->pcache, req->client_host, req->spec_hash, now_ms, &prior)) {
        resp->sample_overhead_prior_sec = prior;
    }
out:
    pthread_mutex_unlock(&d->mu);
    return rc == 0 ? 0 : sl_err(err, errlen, rc, "dispatcher out of memory");
}

int disp_svc_plan_job(disp_t *d, const Sluice__SubmitJobRequest *req,
                      Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms, char *err,
                      size_t errlen)
{
    if (req->planner == NULL) {
        return sl_err(err, errlen, -EINVAL, "planner: PlanJob needs the client's PlannerInputs");
    }
    disp_plan_t plan;
    disp_pjob_t *pj = NULL;
    pthread_mutex_lock(&d->mu);
    /* Never 1 here: forced, every policy plans. Errors: the spec's or the
     * planner's -EINVAL (INVALID_ARGUMENT), -ENOMEM. */
    int rc = plan_request(d, req, 1, now_ms, &plan, &pj, err, errlen);
    if (rc == 0) {
        resp->version = SL_PROTOCOL_VERSION;
        resp->plan = disp_svc_plan_msg(a, &plan);
        resp->explain = explain_pb(a, pj, &plan);
        if (resp->plan == NULL || resp->explain == NULL) {
            rc = sl_err(err, errlen, -ENOMEM, "dispatcher out of memory");
        }
    }
    pthread_mutex_unlock(&d->mu);
    disp_pjob_free(pj);
    return rc;
}

DISP_HANDLER(GetPlanContext, Sluice__PlanContextRequest, Sluice__PlanContextResponse,
             SLUICE__PLAN_CONTEXT_RESPONSE__INIT, disp_svc_get_plan_context)
DISP_HANDLER(PlanJob, Sluice__SubmitJobRequest, Sluice__SubmitJobResponse,
             SLUICE__SUBMIT_JOB_RESPONSE__INIT, disp_svc_plan_job)

int disp_planner_service_add(disp_t *d, sl_rpc_server_t *srv)
{
    int rc = sl_rpc_server_add_unary(srv, "/sluice.Dispatcher/GetPlanContext",
                                     &sluice__plan_context_request__descriptor, h_GetPlanContext,
                                     d);
    if (rc != 0) {
        return rc;
    }
    return sl_rpc_server_add_unary(srv, "/sluice.Dispatcher/PlanJob",
                                   &sluice__submit_job_request__descriptor, h_PlanJob, d);
}
