/* short_job: see short_job.h. */
#include "client/lib/short_job.h"

#include <errno.h>
#include <math.h>
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

const char *cl_short_name(cl_short_e c)
{
    return (unsigned)c <= CL_SHORT_ALL ? SHORT_NAMES[c] : "?";
}

static int pos(double v) { return isfinite(v) && v > 0.0; }

void cl_short_decide(const cl_short_in_t *in, cl_short_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->in = *in;
    ret->choice = CL_SHORT_PROFILE;
    if (!pos(in->samples) || !pos(in->rate_off) || !pos(in->rate_all)) {
        return; /* nothing to decide from */
    }
    double best = fmax(in->rate_off, in->rate_all);
    ret->fixed_sec = in->samples / best;
    ret->saving_sec = ret->fixed_sec - in->samples / (in->rate_off + in->rate_all);
    double cost = isfinite(in->profile_sec) && in->profile_sec > 0.0 ? in->profile_sec : 0.0;
    if (cost >= CL_SHORT_MIN_PROFILE_SEC && ret->saving_sec <= cost) {
        ret->choice = in->rate_off >= in->rate_all ? CL_SHORT_OFF : CL_SHORT_ALL;
    }
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
    if (all > 0.0 && pos(e->out_bytes)) {
        if (pos(e->bandwidth)) {
            all = fmin(all, e->bandwidth / e->out_bytes);
        }
        double rx = (pos(e->recv_per_byte) ? e->recv_per_byte : 0.0) * e->out_bytes + ovh;
        if (rx > 0.0) {
            all = fmin(all, e->client_cpus / rx);
        }
    }
    ret->rate_all = all;
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

double cl_short_probe_sec(double bandwidth, int links_cached, uint32_t workers, double step7_bytes)
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
        t += CL_SHORT_PROBE_SEC + (double)CL_PROBE_CHUNK / bw;
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
 * receive cost per byte). Only when the decision can go either way. */
static void probe_link(const Sluice__PlanContextResponse *ctx, const cl_plan_args_t *a,
                       cl_short_est_t *e)
{
    double bw = 0.0;
    double r = 0.0;
    if (e->bandwidth <= 0.0 && ctx->n_workers > 0 && ctx->workers[0] != NULL &&
        ctx->workers[0]->address != NULL &&
        cl_probe_link(ctx->workers[0]->address, a->security,
                      a->timeout_ms > 0 ? a->timeout_ms : 10000, &bw, &r) == 0) {
        e->bandwidth = bw;
        e->recv_per_byte = cl_recv_lowest(e->recv_per_byte, r);
    }
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
    char key[CL_KEY_MAX];
    cl_planner_client_key(key, sizeof(key));
    sl_budget_t hb;
    sl_cpu_budget_read(NULL, &hb);
    e.client_cpus = a->threads > 0 && (double)a->threads < hb.cpus ? a->threads : hb.cpus;
    /* What cl_planner_profile runs: its pass over this many samples (as
     * its pick_samples: at most the source's), the codec's over the first
     * of them. */
    double picks = a->samples > 0 ? (double)a->samples : SL_PROFILE_DEFAULT_SAMPLES;
    picks = fmin(fmin(picks, SL_PROFILE_MAX_SAMPLES), (double)sl_source_count(a->src));
    e.codec_samples = fmin(picks, SL_PROFILE_CODEC_SAMPLES);
    const Sluice__HostProfile *cached = cl_planner_find_cached(ctx, key, a->pipe);
    if (cached != NULL) {
        from_profile(cached, &e);
    } else {
        rc = mini_profile(a, &e, err, errlen);
        e.profile_samples = picks;
        e.pass_max_sec = (a->max_ms > 0 ? a->max_ms : SL_PROFILE_DEFAULT_MS) / 1000.0;
    }
    if (rc == 0) {
        /* Profiling's overhead probe (step 7) runs unless the cached
         * profile carries a running job's overhead. */
        double step7 = 0.0;
        if (!pos(e.overhead) && pos(e.out_bytes)) {
            step7 = fmin(e.out_bytes * (double)a->spec->batch_size,
                         (double)CL_PROBE_SAMPLES_MAX_CHUNK);
        }
        if (!pos(e.overhead)) {
            e.overhead = ctx->sample_overhead_prior_sec;
        }
        for (size_t i = 0; i < ctx->n_workers; i++) {
            e.worker_cpus += ctx->workers[i] != NULL ? ctx->workers[i]->threads : 0;
        }
        cached_links(ctx, &e);
        int links_cached = e.bandwidth > 0.0;
        uint32_t nw = ctx->n_workers < UINT32_MAX ? (uint32_t)ctx->n_workers : UINT32_MAX;
        e.probe_sec = cl_short_probe_sec(e.bandwidth, links_cached, nw, step7);
        cl_short_in_t in;
        cl_short_inputs(&e, (double)job_samples, &in);
        /* Profiling this cheap always profiles: no probe for the guard. */
        if (in.profile_sec >= CL_SHORT_MIN_PROFILE_SEC) {
            probe_link(ctx, a, &e);
            if (e.recv_per_byte <= 0.0) {
                e.recv_per_byte = 0.5e-9; /* profile.c's default */
            }
            e.probe_sec = cl_short_probe_sec(e.bandwidth, links_cached, nw, step7);
            cl_short_inputs(&e, (double)job_samples, &in);
        }
        cl_short_decide(&in, ret);
    }
    protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}
