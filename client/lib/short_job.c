/* short_job: see short_job.h. */
#include "client/lib/short_job.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/planner_impl.h"
#include "common/base/err.h"
#include "common/cost/hostfacts.h"
#include "common/profile/profiler.h"

static const char *const SHORT_NAMES[] = {
    [CL_SHORT_PROFILE] = "profile",
    [CL_SHORT_OFF] = "off",
    [CL_SHORT_ALL] = "all",
};

static const char *const WHY_NAMES[] = {
    [CL_SHORT_WHY_UNKNOWN] = "unknown", [CL_SHORT_WHY_PAYS] = "pays",
    [CL_SHORT_WHY_LONG] = "long",       [CL_SHORT_WHY_LINK] = "link",
    [CL_SHORT_WHY_SHORT] = "short",     [CL_SHORT_WHY_FORCED] = "forced",
};

const char *cl_short_name(cl_short_e c)
{
    return (unsigned)c <= CL_SHORT_ALL ? SHORT_NAMES[c] : "?";
}

const char *cl_short_why_name(cl_short_why_e w)
{
    return (unsigned)w <= CL_SHORT_WHY_FORCED ? WHY_NAMES[w] : "?";
}

int cl_short_forced(int opt)
{
    const char *env = getenv("SLUICE_ALWAYS_PROFILE");
    return opt != 0 || (env != NULL && strcmp(env, "1") == 0);
}

static int pos(double v) { return isfinite(v) && v > 0.0; }

void cl_short_decide(const cl_short_in_t *in, cl_short_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->in = *in;
    ret->choice = CL_SHORT_PROFILE;
    ret->why = CL_SHORT_WHY_UNKNOWN;
    if (!pos(in->samples) || !pos(in->rate_off) || !pos(in->rate_all)) {
        return; /* nothing to decide from */
    }
    double best = fmax(in->rate_off, in->rate_all);
    double both = pos(in->rate_both) ? fmax(in->rate_both, best) : in->rate_off + in->rate_all;
    ret->fixed_sec = in->samples / best;
    ret->saving_sec = ret->fixed_sec - in->samples / both;
    double cost = isfinite(in->profile_sec) && in->profile_sec > 0.0
                      ? CL_SHORT_COST_FACTOR * in->profile_sec
                      : 0.0;
    if (ret->saving_sec > cost) {
        ret->why = CL_SHORT_WHY_PAYS;
    } else if (cost <= CL_SHORT_FREE_SHARE * ret->fixed_sec) {
        ret->why = CL_SHORT_WHY_LONG;
    } else if (in->rate_off < in->rate_all && in->all_unpriced) {
        ret->why = CL_SHORT_WHY_LINK; /* the link may make `all` the slower */
    } else {
        ret->why = CL_SHORT_WHY_SHORT;
        ret->choice = in->rate_off >= in->rate_all ? CL_SHORT_OFF : CL_SHORT_ALL;
    }
}

/* rate_both: rate_all received, the client's CPU left over runs local
 * samples. rx: the client's CPU per received sample, per: per local one. */
static double both_rate(double cpus, double per, double rx, double rate_off, double rate_all)
{
    if (rx >= per) {
        return fmax(rate_off, rate_all); /* receiving frees no CPU for local samples */
    }
    return rate_all + fmax(cpus - rate_all * rx, 0.0) / per;
}

void cl_short_inputs(const cl_short_est_t *e, double samples, cl_short_in_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->samples = samples;
    double ovh = pos(e->overhead) ? e->overhead : 0.0;
    if (!pos(e->local_sec) || !pos(e->client_cpus)) {
        return;
    }
    ret->rate_off = e->client_cpus / (e->local_sec + ovh);
    double all = pos(e->worker_cpus) ? e->worker_cpus / e->local_sec : 0.0;
    double rx = ovh;
    if (all > 0.0 && pos(e->out_bytes)) {
        if (pos(e->bandwidth)) {
            all = fmin(all, e->bandwidth / e->out_bytes);
        }
        rx += (pos(e->recv_per_byte) ? e->recv_per_byte : 0.0) * e->out_bytes;
        if (rx > 0.0) {
            all = fmin(all, e->client_cpus / rx);
        }
    }
    ret->all_unpriced = all > 0.0 && !(pos(e->bandwidth) && pos(e->out_bytes));
    ret->rate_all = all;
    if (all > 0.0) {
        ret->rate_both = both_rate(e->client_cpus, e->local_sec + ovh, rx, ret->rate_off, all);
    }
    if (pos(e->consumer_rate)) {
        ret->rate_off = fmin(ret->rate_off, e->consumer_rate);
        ret->rate_all = fmin(ret->rate_all, e->consumer_rate);
        ret->rate_both = fmin(ret->rate_both, e->consumer_rate);
    }
    double lone = fmin(e->client_cpus, 1.0); /* the passes run on one thread */
    double per = e->local_sec / lone;        /* wall seconds a sample takes there */
    double pass = 0.0;
    if (pos(e->profile_samples)) {
        pass = (e->profile_samples + 1.0) * per; /* + sl_profile_run's untimed first sample */
        if (pos(e->pass_max_sec)) {
            pass = fmin(pass, e->pass_max_sec + per); /* the cap is checked between samples */
        }
    }
    double codec = pos(e->codec_samples) ? e->codec_samples * per : 0.0;
    ret->profile_sec = pass + codec + (pos(e->probe_sec) ? e->probe_sec : 0.0);
}

double cl_short_probe_sec(double bandwidth, int links_cached, int class_probed, uint32_t workers,
                          double step7_bytes)
{
    if (workers == 0) {
        return 0.0;
    }
    double bw = pos(bandwidth) ? bandwidth : INFINITY;
    double t = 0.0;
    if (pos(step7_bytes)) {
        t += CL_SHORT_PROBE_SEC + step7_bytes / bw;
    }
    if (!links_cached) {
        if (!class_probed) {
            t += CL_SHORT_PROBE_SEC + (double)CL_PROBE_CHUNK / bw;
        }
        if (workers > 1) {
            uint32_t n = workers < CL_PROBE_CONCURRENT ? workers : CL_PROBE_CONCURRENT;
            t += CL_SHORT_PROBE_SEC + (double)n * (double)CL_PROBE_CHUNK / bw;
        }
    }
    return t;
}

/* Per-sample CPU and output bytes from a host profile message. */
static void from_profile(const Sluice__HostProfile *m, cl_short_est_t *e)
{
    e->local_sec = m->read_cpu_sec_per_sample;
    for (size_t u = 0; u < m->n_units; u++) {
        e->local_sec += m->units[u] != NULL ? m->units[u]->cpu_sec_per_sample : 0.0;
    }
    if (m->n_units > 0 && m->units[m->n_units - 1] != NULL) {
        e->out_bytes = m->units[m->n_units - 1]->out_bytes_per_sample;
    }
    e->overhead = m->sample_overhead_sec;
}

/* The guard's own small profile pass, on this thread: CL_SHORT_MAX_MS of a
 * CPU's time, so longer in wall time under a quota (at 250 ms of wall time
 * a 0.25-CPU client finished no sample of a blur spec: the pass's untimed
 * first sample alone took the window). */
static int mini_profile(const cl_plan_args_t *a, cl_short_est_t *e, char *err, size_t errlen)
{
    uint64_t idx[CL_SHORT_SAMPLES];
    size_t n = sl_profile_pick(sl_source_count(a->src), CL_SHORT_SAMPLES, idx);
    sl_profile_t *pr = calloc(1, sizeof(*pr)); /* a few KB: off the stack */
    if (pr == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int max_ms = (int)ceil(CL_SHORT_MAX_MS / fmin(fmax(e->client_cpus, 0.01), 1.0));
    int rc = sl_profile_run(a->pipe, a->src, idx, n, max_ms, pr, err, errlen);
    if (rc == 0 && pr->samples == 0) {
        rc = sl_err(err, errlen, -EIO, "short-job guard: no sample could be processed");
    }
    if (rc == 0) {
        double ns = (double)pr->samples;
        e->local_sec = pr->read_cpu_sec / ns;
        for (uint32_t u = 0; u < pr->nunits; u++) {
            e->local_sec += pr->units[u].cpu_sec / ns;
        }
        e->out_bytes = pr->nunits > 0 ? (double)pr->units[pr->nunits - 1].out_bytes / ns : 0.0;
    }
    free(pr);
    return rc;
}

/* Links from the dispatcher's cache (the ingress link when known, else the
 * classes' summed). */
static void cached_links(const Sluice__PlanContextResponse *ctx, cl_short_est_t *e)
{
    double ingress = 0.0;
    double sum = 0.0;
    double recv = 0.0;
    for (size_t i = 0; i < ctx->n_links; i++) {
        const Sluice__LinkProbe *l = ctx->links[i];
        if (l == NULL || l->class_key == NULL || !pos(l->bandwidth_bytes_per_sec)) {
            continue;
        }
        if (l->class_key[0] == '\0') {
            ingress = l->bandwidth_bytes_per_sec;
        } else {
            sum += l->bandwidth_bytes_per_sec;
        }
        recv = cl_recv_lowest(recv, l->recv_cpu_sec_per_byte);
    }
    e->bandwidth = ingress > 0.0 ? ingress : sum;
    e->recv_per_byte = recv;
}

/* No cached link: one probe of the first worker (its bandwidth and the
 * receive cost per byte), kept in p for profiling's class probe. Returns 1
 * when the link is now known. */
static int probe_link(cl_planner_t *p, const Sluice__PlanContextResponse *ctx,
                      const cl_plan_args_t *a, cl_short_est_t *e)
{
    double bw = 0.0;
    double r = 0.0;
    if (ctx->n_workers == 0 || ctx->workers[0] == NULL || ctx->workers[0]->address == NULL ||
        cl_probe_link(ctx->workers[0]->address, a->security,
                      a->timeout_ms > 0 ? a->timeout_ms : 10000, &bw, &r) != 0 ||
        !pos(bw)) {
        return 0;
    }
    snprintf(p->guard_addr, sizeof(p->guard_addr), "%s", ctx->workers[0]->address);
    p->guard_bw = bw;
    p->guard_recv = r;
    e->bandwidth = bw;
    e->recv_per_byte = cl_recv_lowest(e->recv_per_byte, r);
    return 1;
}

/* The client's per-sample CPU and output bytes: the spec's cached profile,
 * else the guard's own pass (priced as cl_planner_profile would run it). */
static int client_costs(const Sluice__PlanContextResponse *ctx, const cl_plan_args_t *a,
                        cl_short_est_t *e, char *err, size_t errlen)
{
    char key[CL_KEY_MAX];
    cl_planner_client_key(key, sizeof(key));
    sl_budget_t hb;
    sl_cpu_budget_read(NULL, &hb);
    e->client_cpus = a->threads > 0 && (double)a->threads < hb.cpus ? a->threads : hb.cpus;
    e->consumer_rate = a->consumer_rate;
    /* What cl_planner_profile runs: its pass over this many samples (as
     * its pick_samples: at most the source's), the codec's over the first
     * of them. */
    double picks = a->samples > 0 ? (double)a->samples : SL_PROFILE_DEFAULT_SAMPLES;
    picks = fmin(fmin(picks, SL_PROFILE_MAX_SAMPLES), (double)sl_source_count(a->src));
    e->codec_samples = fmin(picks, SL_PROFILE_CODEC_SAMPLES);
    const Sluice__HostProfile *cached = cl_planner_find_cached(ctx, key, a->pipe);
    if (cached != NULL) {
        from_profile(cached, e);
        return 0;
    }
    e->profile_samples = picks;
    e->pass_max_sec = (a->max_ms > 0 ? a->max_ms : SL_PROFILE_DEFAULT_MS) / 1000.0;
    return mini_profile(a, e, err, errlen);
}

/* Decides from e as it stands; profiling's probes priced with what is
 * known of the link (class_probed: the guard's probe, which profiling
 * reuses). */
static void decide_now(cl_short_est_t *e, int links_cached, int class_probed, uint32_t nw,
                       double step7, double samples, cl_short_t *ret)
{
    e->probe_sec = cl_short_probe_sec(e->bandwidth, links_cached, class_probed, nw, step7);
    cl_short_in_t in;
    cl_short_inputs(e, samples, &in);
    cl_short_decide(&in, ret);
    ret->bandwidth = e->bandwidth;
    ret->link_probed = class_probed;
}

/* The decision from the estimates of e (the client's costs set). */
static void decide(cl_planner_t *p, const Sluice__PlanContextResponse *ctx, const cl_plan_args_t *a,
                   cl_short_est_t *e, double samples, cl_short_t *ret)
{
    /* Profiling's overhead probe (step 7) runs unless the cached profile
     * carries a running job's overhead. */
    double step7 = 0.0;
    if (!pos(e->overhead) && pos(e->out_bytes)) {
        step7 = fmin(e->out_bytes * (double)a->spec->batch_size,
                     (double)CL_PROBE_SAMPLES_MAX_CHUNK);
    }
    if (!pos(e->overhead)) {
        e->overhead = ctx->sample_overhead_prior_sec;
    }
    for (size_t i = 0; i < ctx->n_workers; i++) {
        e->worker_cpus += ctx->workers[i] != NULL ? ctx->workers[i]->threads : 0;
    }
    cached_links(ctx, e);
    int links_cached = e->bandwidth > 0.0;
    uint32_t nw = ctx->n_workers < UINT32_MAX ? (uint32_t)ctx->n_workers : UINT32_MAX;
    decide_now(e, links_cached, 0, nw, step7, samples, ret);
    /* Without the link `all` is priced high: `off` stands without it, and
     * so does a job long enough to profile anyway (its time on the better
     * policy only grows); the rest may change once the link is known. */
    if (links_cached || ret->choice == CL_SHORT_OFF || ret->why == CL_SHORT_WHY_UNKNOWN ||
        ret->why == CL_SHORT_WHY_LONG) {
        return;
    }
    if (probe_link(p, ctx, a, e) == 0) {
        return; /* `all` unpriced: the decision says profile unless `off` */
    }
    if (e->recv_per_byte <= 0.0) {
        e->recv_per_byte = 0.5e-9; /* profile.c's default */
    }
    decide_now(e, 0, 1, nw, step7, samples, ret);
}

int cl_short_assess(cl_planner_t *p, const cl_plan_args_t *a, uint64_t job_samples, cl_short_t *ret,
                    char *err, size_t errlen)
{
    p->in.spec_hash = sl_spec_cost_hash(a->spec, sl_source_fingerprint(a->src));
    ProtobufCMessage *resp = NULL;
    int rc = cl_planner_context(p, a, &resp, err, errlen);
    if (rc != 0) {
        return rc;
    }
    const Sluice__PlanContextResponse *ctx = (const Sluice__PlanContextResponse *)resp;
    cl_short_est_t e;
    memset(&e, 0, sizeof(e));
    rc = client_costs(ctx, a, &e, err, errlen);
    if (rc == 0) {
        decide(p, ctx, a, &e, (double)job_samples, ret);
    }
    protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}
