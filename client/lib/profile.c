/* profile: profiling before SubmitJob (profile.h steps 1-6; the link
 * probes themselves are probe.c, the reports while running rates.c). */
#include "client/lib/profile.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/lib/planner_impl.h"
#include "client/lib/profile_mix_inputs.h"
#include "common/base/clock.h"
#include "common/base/err.h"
#include "common/cost/costmodel.h"
#include "common/cost/hostfacts.h"
#include "common/order/blend.h"
#include "common/order/ranks.h"
#include "common/profile/profiler.h"

#define CL_PROFILE_CALL_SLACK_MS 15000 /* beyond max_ms: indexing the source there */

cl_planner_t *cl_planner_new(void)
{
    cl_planner_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    sluice__planner_inputs__init(&p->in);
    return p;
}

void cl_planner_free(cl_planner_t *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_destroy(&p->mu);
    free(p->mix);
    free(p);
}

Sluice__PlannerInputs *cl_planner_inputs(cl_planner_t *p) { return &p->in; }

double cl_planner_profile_seconds(const cl_planner_t *p) { return p->profile_seconds; }

size_t cl_profile_samples_for(uint64_t count, uint64_t epochs, uint32_t world)
{
    uint64_t share = count / (world > 1 ? world : 1);
    uint64_t job = epochs > 0 && share > UINT64_MAX / epochs ? UINT64_MAX : share * epochs;
    uint64_t want = job / 20;
    if (want < CL_PROFILE_MIN_SAMPLES) {
        want = CL_PROFILE_MIN_SAMPLES;
    }
    return want < SL_PROFILE_DEFAULT_SAMPLES ? (size_t)want : SL_PROFILE_DEFAULT_SAMPLES;
}

/* ------------------------------------------------------------ profiles */

static void hp_init(cl_hp_t *hp, const char *host)
{
    memset(hp, 0, sizeof(*hp));
    sluice__host_profile__init(&hp->msg);
    snprintf(hp->host, sizeof(hp->host), "%s", host);
    hp->msg.host = hp->host;
}

static void hp_from_local(cl_hp_t *hp, const char *host, const sl_profile_t *pr,
                          const sl_pipeline_t *pipe)
{
    hp_init(hp, host);
    double ns = pr->samples > 0 ? (double)pr->samples : 1.0;
    for (uint32_t u = 0; u < pr->nunits && u < SL_PIPE_MAX_UNITS; u++) {
        Sluice__StageStat *s = &hp->units[u];
        sluice__stage_stat__init(s);
        snprintf(hp->names[u], sizeof(hp->names[u]), "%s", sl_pipeline_unit_name(pipe, u));
        s->name = hp->names[u];
        s->cpu_sec_per_sample = pr->units[u].cpu_sec / ns;
        s->out_bytes_per_sample = (double)pr->units[u].out_bytes / ns;
        s->samples = pr->units[u].samples;
        hp->punits[u] = s;
    }
    hp->msg.n_units = pr->nunits;
    hp->msg.units = hp->punits;
    hp->msg.read_cpu_sec_per_sample = pr->read_cpu_sec / ns;
    hp->msg.encoded_bytes_per_sample = (double)pr->encoded_bytes / ns;
    hp->msg.samples = pr->samples;
    hp->msg.seconds = pr->seconds;
    hp->msg.cost_model_error = pr->model_error > 0 ? pr->model_error : 0;
    hp->msg.size_cost_error = pr->size_error > 0 ? pr->size_error : 0;
    if (pr->model.fitted) {
        memcpy(hp->coef, pr->model.coef, sizeof(hp->coef));
        hp->msg.n_cost_model_coef = SL_COST_NPARAM;
        hp->msg.cost_model_coef = hp->coef;
    }
}

/* Deep copy of a received profile (the reply is freed afterwards). */
static void hp_copy(cl_hp_t *hp, const Sluice__HostProfile *m, int cached)
{
    hp_init(hp, m->host != NULL ? m->host : "");
    size_t n = m->n_units < SL_PIPE_MAX_UNITS ? m->n_units : SL_PIPE_MAX_UNITS;
    for (size_t u = 0; u < n; u++) {
        Sluice__StageStat *s = &hp->units[u];
        sluice__stage_stat__init(s);
        if (m->units[u] != NULL) {
            snprintf(hp->names[u], sizeof(hp->names[u]), "%s",
                     m->units[u]->name != NULL ? m->units[u]->name : "");
            s->cpu_sec_per_sample = m->units[u]->cpu_sec_per_sample;
            s->out_bytes_per_sample = m->units[u]->out_bytes_per_sample;
            s->samples = m->units[u]->samples;
        }
        s->name = hp->names[u];
        hp->punits[u] = s;
    }
    hp->msg.n_units = n;
    hp->msg.units = hp->punits;
    hp->msg.read_cpu_sec_per_sample = m->read_cpu_sec_per_sample;
    hp->msg.encoded_bytes_per_sample = m->encoded_bytes_per_sample;
    hp->msg.samples = m->samples;
    hp->msg.seconds = m->seconds;
    hp->msg.cost_model_error = m->cost_model_error;
    hp->msg.size_cost_error = m->size_cost_error;
    hp->msg.source_bytes_per_sec = m->source_bytes_per_sec;
    hp->msg.source_latency_sec = m->source_latency_sec;
    if (m->n_cost_model_coef == SL_COST_NPARAM) {
        memcpy(hp->coef, m->cost_model_coef, sizeof(hp->coef));
        hp->msg.n_cost_model_coef = SL_COST_NPARAM;
        hp->msg.cost_model_coef = hp->coef;
    }
    hp->msg.sample_overhead_sec = m->sample_overhead_sec;
    hp->msg.cached = cached;
}

/* A cached profile usable for this pipeline: one row per unit, by name. */
static int hp_fits(const Sluice__HostProfile *m, const sl_pipeline_t *pipe)
{
    uint32_t n = sl_pipeline_nunits(pipe);
    if (m == NULL || m->n_units != n || m->samples == 0) {
        return 0;
    }
    for (uint32_t u = 0; u < n; u++) {
        if (m->units[u] == NULL || m->units[u]->name == NULL ||
            strcmp(m->units[u]->name, sl_pipeline_unit_name(pipe, u)) != 0) {
            return 0;
        }
    }
    return 1;
}

const Sluice__HostProfile *cl_planner_find_cached(const Sluice__PlanContextResponse *ctx,
                                                  const char *host, const sl_pipeline_t *pipe)
{
    for (size_t i = 0; ctx != NULL && i < ctx->n_cached; i++) {
        const Sluice__HostProfile *m = ctx->cached[i];
        if (m != NULL && m->host != NULL && strcmp(m->host, host) == 0 && hp_fits(m, pipe)) {
            return m;
        }
    }
    return NULL;
}

/* The link this client measured to class_key ("" = its ingress) on an
 * earlier job, as the dispatcher remembers it (fresh ones only), or NULL. */
static const Sluice__LinkProbe *find_link(const Sluice__PlanContextResponse *ctx,
                                          const char *class_key)
{
    for (size_t i = 0; ctx != NULL && i < ctx->n_links; i++) {
        const Sluice__LinkProbe *l = ctx->links[i];
        if (l != NULL && l->class_key != NULL && strcmp(l->class_key, class_key) == 0 &&
            isfinite(l->bandwidth_bytes_per_sec) && l->bandwidth_bytes_per_sec > 0.0) {
            return l;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ workers */

static int class_for(cl_planner_t *p, const char *key)
{
    for (size_t c = 0; c < p->in.n_classes; c++) {
        if (strcmp(p->classes[c].key, key) == 0) {
            return (int)c;
        }
    }
    if (p->in.n_classes == CL_PLAN_MAX_CLASSES) {
        return -1;
    }
    int c = (int)p->in.n_classes++;
    cl_class_t *k = &p->classes[c];
    memset(k, 0, sizeof(*k));
    sluice__worker_class__init(&k->msg);
    snprintf(k->key, sizeof(k->key), "%s", key);
    k->msg.key = k->key;
    k->msg.worker_ids = k->ids;
    p->pclasses[c] = &k->msg;
    p->in.classes = p->pclasses;
    return c;
}

/* Identity of one worker; adds it to its class. Unreachable workers are
 * left out (the dispatcher treats them as joined later). */
static void identify(cl_planner_t *p, const Sluice__WorkerInfo *w, int timeout_ms)
{
    char err[256];
    sl_rpc_channel_t *ch = sl_rpc_channel_new(w->address, SL_RPC_DEFAULT_MAX_MSG, p->security, 0,
                                              err, sizeof(err));
    if (ch == NULL) {
        return;
    }
    Sluice__ProfileRequest req = SLUICE__PROFILE_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    if (sl_rpc_unary(ch, "/sluice.Worker/Profile", &req.base,
                     &sluice__profile_response__descriptor, timeout_ms, 0, &resp, &st) == 0) {
        const Sluice__ProfileResponse *r = (const Sluice__ProfileResponse *)resp;
        int c = class_for(p, r->class_key != NULL ? r->class_key : "?");
        if (c >= 0 && p->classes[c].msg.n_worker_ids < CL_PLAN_MAX_WORKERS) {
            cl_class_t *k = &p->classes[c];
            if (k->msg.n_worker_ids == 0) {
                snprintf(k->first_addr, sizeof(k->first_addr), "%s", w->address);
                k->msg.threads = r->threads;
                k->msg.cpu_budget = r->cpu_budget;
            }
            k->ids[k->msg.n_worker_ids++] = w->worker_id;
        }
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    sl_rpc_channel_free(ch);
}

static void profile_class(cl_class_t *k, const cl_plan_args_t *a, const char *spec_json,
                          const uint64_t *idx, size_t n, int max_ms)
{
    char err[256];
    sl_rpc_channel_t *ch = sl_rpc_channel_new(k->first_addr, SL_RPC_DEFAULT_MAX_MSG, a->security, 0,
                                              err, sizeof(err));
    if (ch == NULL) {
        return;
    }
    Sluice__ProfileRequest req = SLUICE__PROFILE_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = (char *)spec_json;
    req.source_fingerprint = sl_source_fingerprint(a->src);
    req.n_indices = n;
    req.indices = (uint64_t *)idx;
    req.max_ms = (uint32_t)max_ms;
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    if (sl_rpc_unary(ch, "/sluice.Worker/Profile", &req.base,
                     &sluice__profile_response__descriptor, max_ms + CL_PROFILE_CALL_SLACK_MS, 0,
                     &resp, &st) == 0) {
        const Sluice__ProfileResponse *r = (const Sluice__ProfileResponse *)resp;
        if (r->profile != NULL && hp_fits(r->profile, a->pipe)) {
            hp_copy(&k->hp, r->profile, 0);
            k->have_profile = 1;
        }
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    sl_rpc_channel_free(ch);
}

/* ------------------------------------------------------------ profiling */

/* This host's key in the profile cache. */
void cl_planner_client_key(char *key, size_t len)
{
    char host[200] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(key, len, "client %.100s", host);
}

/* Step 1: GetPlanContext for the job's spec hash (set in p->in). */
int cl_planner_context(cl_planner_t *p, const cl_plan_args_t *a, ProtobufCMessage **ret, char *err,
                       size_t errlen)
{
    int timeout_ms = a->timeout_ms > 0 ? a->timeout_ms : 10000;
    Sluice__PlanContextRequest creq = SLUICE__PLAN_CONTEXT_REQUEST__INIT;
    creq.version = SL_PROTOCOL_VERSION;
    creq.spec_hash = p->in.spec_hash;
    cl_planner_client_key(p->host_key, sizeof(p->host_key));
    creq.client_host = p->host_key;
    p->in.client_host = p->host_key;
    sl_rpc_status_t st;
    /* Bounded apart from SubmitJob's own wait: an unreachable dispatcher
     * should not cost two full timeouts. */
    int ctx_ms = timeout_ms < CL_CONTEXT_TIMEOUT_MS ? timeout_ms : CL_CONTEXT_TIMEOUT_MS;
    int rc = sl_rpc_unary(a->disp, "/sluice.Dispatcher/GetPlanContext", &creq.base,
                          &sluice__plan_context_response__descriptor, ctx_ms, 1, ret, &st);
    if (rc != 0) {
        if (rc == -ECOMM && st.code == SL_RPC_UNIMPLEMENTED) {
            return sl_err(err, errlen, -ENOTSUP, "the dispatcher has no planner");
        }
        return sl_err(err, errlen, -ECONNREFUSED, "GetPlanContext failed: %s (%s)",
                      rc == -ECOMM ? st.details : "bad reply",
                      rc == -ECOMM ? sl_rpc_code_name(st.code) : "");
    }
    return 0;
}

int cl_planner_cached_client(cl_planner_t *p, const cl_plan_args_t *a, char *err, size_t errlen)
{
    p->in.spec_hash = sl_spec_cost_hash(a->spec, sl_source_fingerprint(a->src));
    ProtobufCMessage *cresp = NULL;
    int rc = cl_planner_context(p, a, &cresp, err, errlen);
    if (rc != 0) {
        return rc;
    }
    char key[CL_KEY_MAX];
    cl_planner_client_key(key, sizeof(key));
    const Sluice__HostProfile *cached =
        cl_planner_find_cached((const Sluice__PlanContextResponse *)cresp, key, a->pipe);
    if (cached != NULL) {
        hp_copy(&p->client, cached, 1);
    } else {
        rc = sl_err(err, errlen, -ENOENT, "no cached profile of this spec on this host");
    }
    protobuf_c_message_free_unpacked(cresp, NULL);
    return rc;
}

int cl_planner_cost_model(const cl_planner_t *p, sl_costmodel_t *ret)
{
    if (p == NULL || p->client.msg.n_cost_model_coef != SL_COST_NPARAM) {
        return -ENOENT;
    }
    return sl_costmodel_set(ret, p->client.coef, SL_COST_NPARAM);
}

/* The samples to profile: evenly spread over the source, or for a mixed
 * spec the first ones of the blend's first epoch (docs/mixing.md): every
 * prefix of it holds each source's share within one sample, so the
 * profile's costs come in the mix's proportions (a cheap text source
 * weighted 0.9 makes a cheap job). Not strides over the epoch: those can
 * land on one source only (1:1 alternates). The same indices on every host. */
static size_t pick_samples(const sl_spec_t *spec, const sl_source_t *src, size_t want,
                           uint64_t *idx)
{
    uint64_t n = sl_source_count(src), e = sl_spec_epoch_len(spec, n);
    uint64_t *order = spec->mix != NULL ? malloc((e > 0 ? e : 1) * sizeof(*order)) : NULL;
    if (order == NULL || sl_spec_epoch_order(spec, 0, n, NULL, NULL, order) < 0) {
        free(order); /* no memory for the blend: spread over the source */
        return sl_profile_pick(n, want, idx);
    }
    size_t got = e < want ? (size_t)e : want;
    for (size_t i = 0; i < got; i++) {
        idx[i] = order[i];
    }
    free(order);
    return got;
}

/* What every host profiles: the same samples, the same spec, the same limit. */
typedef struct cl_sampling_s {
    uint64_t *idx;
    size_t n;
    char *spec_json;
    int max_ms;
} cl_sampling_t;

/* Step 2b: the wire codec at every boundary, so the planner can weigh
 * compression (docs/planner.md "Compression"). Its own small pass, also
 * when the unit costs came from the cache (the cache has no codec numbers).
 * A failure leaves the fields empty: the planner then never compresses. */
static void profile_codec(cl_planner_t *p, const cl_plan_args_t *a, const cl_sampling_t *sm)
{
    sl_profile_t *pr = calloc(1, sizeof(*pr)); /* a few KB: off the stack */
    char err[256];
    if (pr == NULL) {
        return;
    }
    pr->nunits = sl_pipeline_nunits(a->pipe);
    if (sl_profile_codec(a->pipe, a->src, sm->idx, sm->n, pr, err, sizeof(err)) == 0 &&
        pr->codec_samples > 0) {
        size_t n = (size_t)pr->nunits + 1;
        for (size_t k = 0; k < n; k++) {
            double per = 1.0 / (double)pr->codec_samples;
            p->codec_ratio[k] = sl_profile_codec_ratio(pr, (uint32_t)k);
            p->codec_compress[k] = pr->codec_compress_sec[k] * per;
            p->codec_decompress[k] = pr->codec_decompress_sec[k] * per;
        }
        p->in.codec_ratio = p->codec_ratio;
        p->in.n_codec_ratio = n;
        p->in.codec_compress_sec_per_sample = p->codec_compress;
        p->in.n_codec_compress_sec_per_sample = n;
        p->in.codec_decompress_sec_per_sample = p->codec_decompress;
        p->in.n_codec_decompress_sec_per_sample = n;
    }
    free(pr);
}

/* Step 2: ourselves, or the profile the dispatcher has cached for this host. */
static int profile_client(cl_planner_t *p, const cl_plan_args_t *a,
                          const Sluice__PlanContextResponse *ctx, const cl_sampling_t *sm,
                          char *err, size_t errlen)
{
    char key[CL_KEY_MAX];
    cl_planner_client_key(key, sizeof(key));
    const Sluice__HostProfile *cached = cl_planner_find_cached(ctx, key, a->pipe);
    if (cached != NULL) {
        hp_copy(&p->client, cached, 1);
    } else {
        sl_profile_t pr;
        /* One thread flat out: its CPU over wall time is what a lone
         * thread gets here (profile_budget.h). */
        double w0 = sl_mono_sec();
        double c0 = sl_thread_cpu_sec();
        int rc = sl_profile_run(a->pipe, a->src, sm->idx, sm->n, sm->max_ms, &pr, err, errlen);
        p->lone_cpu = sl_thread_cpu_sec() - c0;
        p->lone_wall = sl_mono_sec() - w0;
        if (rc == 0 && pr.samples == 0) {
            rc = sl_err(err, errlen, -EIO, "profile: none of %zu samples could be processed",
                        sm->n);
        }
        if (rc != 0) {
            return rc;
        }
        hp_from_local(&p->client, key, &pr, a->pipe);
    }
    /* A URL source: what this host's reads cost, measured now (not cached:
     * the link may have changed; planner_read.c). */
    sl_source_read_cost(a->src, &p->client.msg.source_bytes_per_sec,
                        &p->client.msg.source_latency_sec);
    p->in.client = &p->client.msg;
    return 0;
}

/* Step 4's profiles: one per class, or the cached one. */
static void profile_classes(cl_planner_t *p, const cl_plan_args_t *a,
                            const Sluice__PlanContextResponse *ctx, const cl_sampling_t *sm)
{
    for (size_t c = 0; c < p->in.n_classes; c++) {
        cl_class_t *k = &p->classes[c];
        const Sluice__HostProfile *hit = cl_planner_find_cached(ctx, k->key, a->pipe);
        if (hit != NULL) {
            hp_copy(&k->hp, hit, 1);
            k->have_profile = 1;
        } else {
            profile_class(k, a, sm->spec_json, sm->idx, sm->n, sm->max_ms);
        }
        if (k->have_profile) {
            k->msg.profile = &k->hp.msg;
        }
    }
}

/* The workers profile while the client does (cl_planner_profile): remote
 * CPU, and this thread only waits on their replies. */
typedef struct cl_classes_run_s {
    cl_planner_t *p;
    const cl_plan_args_t *a;
    const Sluice__PlanContextResponse *ctx;
    const cl_sampling_t *sm;
} cl_classes_run_t;

static void *classes_thread(void *arg)
{
    cl_classes_run_t *r = arg;
    profile_classes(r->p, r->a, r->ctx, r->sm);
    return NULL;
}

/* Steps 4 (identities) and 5: the workers' classes and one probe per
 * class; the receive cost from the probes. */
static void probe_workers(cl_planner_t *p, const cl_plan_args_t *a,
                          const Sluice__PlanContextResponse *ctx, int timeout_ms)
{
    for (size_t i = 0; i < ctx->n_workers && i < CL_PLAN_MAX_WORKERS; i++) {
        if (ctx->workers[i] != NULL && ctx->workers[i]->address != NULL) {
            identify(p, ctx->workers[i], CL_IDENTITY_TIMEOUT_MS);
        }
    }
    double recv_min = 0.0; /* the lowest probe's (cl_recv_lowest; and probe_ingress's) */
    for (size_t c = 0; c < p->in.n_classes; c++) {
        cl_class_t *k = &p->classes[c];
        double bw = 0.0;
        double recv = 0.0;
        const Sluice__LinkProbe *link = find_link(ctx, k->key);
        if (link != NULL) {
            k->msg.bandwidth_bytes_per_sec = link->bandwidth_bytes_per_sec;
            p->in.links_cached = 1;
            recv = link->recv_cpu_sec_per_byte; /* checked by cl_recv_lowest */
        } else if (p->guard_bw > 0.0 && strcmp(k->first_addr, p->guard_addr) == 0) {
            k->msg.bandwidth_bytes_per_sec = p->guard_bw; /* the guard probed it just now */
            recv = p->guard_recv;
        } else if (cl_probe_link(k->first_addr, a->security, timeout_ms, &bw, &recv) == 0) {
            k->msg.bandwidth_bytes_per_sec = bw;
        }
        recv_min = cl_recv_lowest(recv_min, recv);
    }
    p->in.recv_cpu_sec_per_byte = recv_min; /* 0: none yet (probe_ingress) */
}

/* Step 6: our own ingress, every worker's link at once (bounded). */
static void probe_ingress(cl_planner_t *p, const cl_plan_args_t *a,
                          const Sluice__PlanContextResponse *ctx, int timeout_ms)
{
    const char *addrs[CL_PROBE_CONCURRENT];
    size_t naddrs = 0;
    for (size_t i = 0; i < ctx->n_workers && naddrs < CL_PROBE_CONCURRENT; i++) {
        if (ctx->workers[i] != NULL && ctx->workers[i]->address != NULL) {
            addrs[naddrs++] = ctx->workers[i]->address;
        }
    }
    int agg_ms = timeout_ms < CL_PROBE_AGG_TIMEOUT_MS ? timeout_ms : CL_PROBE_AGG_TIMEOUT_MS;
    const Sluice__LinkProbe *link = find_link(ctx, "");
    double agg = 0.0;
    if (link != NULL && link->streams == naddrs) {
        agg = link->bandwidth_bytes_per_sec;
        p->in.links_cached = 1;
    } else {
        double recv = 0.0;
        agg = cl_probe_aggregate(addrs, naddrs, a->security, agg_ms, &recv);
        /* The streams at once are also what a job sees. */
        p->in.recv_cpu_sec_per_byte = cl_recv_lowest(p->in.recv_cpu_sec_per_byte, recv);
    }
    /* No probe at all: a loopback measurement of one gRPC stream of 150 KB
     * messages, ~0.5 CPU-s per GB received. */
    if (p->in.recv_cpu_sec_per_byte <= 0.0) {
        p->in.recv_cpu_sec_per_byte = 0.5e-9;
    }
    p->in.client_ingress_streams = (uint32_t)naddrs;
    /* The client took in at least what one stream alone reached: streams
     * at once can lose time to CPU-quota throttling (their set-up bursts),
     * which the planner's client term already charges, so the link bound
     * must not count it again. */
    for (size_t c = 0; c < p->in.n_classes && agg > 0.0; c++) {
        agg = fmax(agg, p->classes[c].msg.bandwidth_bytes_per_sec);
    }
    p->in.client_bandwidth = agg;
}

/* Step 7: the client's own CPU per received sample under its real quota
 * (issue 39 part 4): a probe of the largest class whose messages are batches
 * of the pipeline's output (planner_impl.h cl_probe_samples), after
 * everything else, so that nothing else runs here then. Not when the
 * cached profile carries an overhead a running job of the spec measured:
 * the dispatcher plans from that. */
static void profile_overhead(cl_planner_t *p, const cl_plan_args_t *a, int timeout_ms)
{
    const Sluice__HostProfile *c = &p->client.msg;
    if (c->sample_overhead_sec > 0.0 || c->n_units == 0 || c->units[c->n_units - 1] == NULL) {
        return;
    }
    const cl_class_t *best = NULL;
    for (size_t i = 0; i < p->in.n_classes; i++) {
        const cl_class_t *k = &p->classes[i];
        if (k->first_addr[0] != '\0' &&
            (best == NULL || k->msg.n_worker_ids > best->msg.n_worker_ids)) {
            best = k;
        }
    }
    double sec = 0.0;
    if (best != NULL &&
        cl_probe_samples(best->first_addr, a->security, timeout_ms,
                         c->units[c->n_units - 1]->out_bytes_per_sample, a->spec->batch_size,
                         p->in.recv_cpu_sec_per_byte, &sec) == 0) {
        p->in.client_overhead_profiled_sec = sec;
    }
}

/* Step 2c: a mix's sources one by one, in half the time again; without
 * them the dispatcher plans with the blend's profile. After the workers'
 * profiles: on a shared machine their decoding inflated the CPU time a
 * source's few samples measured (a 2-core host: 2-4x on images). */
static void profile_mix_sources(cl_planner_t *p, const cl_plan_args_t *a,
                                const Sluice__PlanContextResponse *ctx, const cl_sampling_t *sm,
                                size_t want)
{
    char err[256];
    if (cl_planner_mix_cached(p, a, ctx)) {
        return; /* the dispatcher's cache: the same spec on this host ran */
    }
    size_t nblend = p->client.msg.samples < sm->n ? (size_t)p->client.msg.samples : sm->n;
    if (cl_planner_mix_costs(p, a, want, sm->max_ms / 2, sm->idx, nblend, err, sizeof(err)) < 0) {
        p->in.n_mix_sources = 0;
    }
}

int cl_planner_profile(cl_planner_t *p, const cl_plan_args_t *a, char *err, size_t errlen)
{
    double t0 = sl_mono_sec();
    p->security = a->security;
    p->in.spec_hash = sl_spec_cost_hash(a->spec, sl_source_fingerprint(a->src));
    p->in.consumer_rate = a->consumer_rate > 0 ? a->consumer_rate : 0;
    int timeout_ms = a->timeout_ms > 0 ? a->timeout_ms : 10000;
    size_t want = a->samples > 0 ? a->samples : SL_PROFILE_DEFAULT_SAMPLES;
    if (want > SL_PROFILE_MAX_SAMPLES) {
        want = SL_PROFILE_MAX_SAMPLES;
    }

    /* 1. What the dispatcher knows. */
    ProtobufCMessage *cresp = NULL;
    int rc = cl_planner_context(p, a, &cresp, err, errlen);
    if (rc != 0) {
        return rc;
    }
    const Sluice__PlanContextResponse *ctx = (const Sluice__PlanContextResponse *)cresp;
    cl_sampling_t sm = {.idx = calloc(want, sizeof(uint64_t)),
                        .spec_json = sl_spec_to_json(a->spec),
                        .max_ms = a->max_ms > 0 ? a->max_ms : SL_PROFILE_DEFAULT_MS};
    if (sm.idx == NULL || sm.spec_json == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    sm.n = pick_samples(a->spec, a->src, want, sm.idx);
    /* 4 and 5 first, while nothing else runs here: the probes charge this
     * process's CPU to the bytes they receive. */
    probe_workers(p, a, ctx, timeout_ms);
    probe_ingress(p, a, ctx, timeout_ms); /* 6 */
    /* Then the workers' profiles and ours at once: theirs cost this
     * process nothing but a waiting thread. Not when the CPU budget is
     * unknown: the profile pass's lone thread then measures it
     * (profile_budget.h), and workers on this machine profiling at the
     * same time would take CPU from it. */
    sl_budget_t hb;
    sl_cpu_budget_read(NULL, &hb);
    cl_classes_run_t cr = {.p = p, .a = a, .ctx = ctx, .sm = &sm};
    pthread_t th;
    int threaded = hb.src != SL_BUDGET_UNKNOWN &&
                   pthread_create(&th, NULL, classes_thread, &cr) == 0;
    if (!threaded) {
        profile_classes(p, a, ctx, &sm);
    }
    rc = profile_client(p, a, ctx, &sm, err, errlen); /* 2 */
    if (rc == 0) {
        profile_codec(p, a, &sm); /* 2b */
    }
    if (threaded) {
        pthread_join(th, NULL);
    }
    if (rc == 0) {
        profile_mix_sources(p, a, ctx, &sm, want); /* 2c */
    }
    if (rc != 0) {
        goto out;
    }
    profile_overhead(p, a, timeout_ms); /* 7 */
    /* 3. Our CPU budget: the pipeline cannot use more than its threads.
     * When no cgroup tells it, what the profile pass got (if it showed a
     * limit); the reports refine it while the job runs. */
    double budget = hb.cpus;
    if (a->threads > 0 && (double)a->threads < budget) {
        budget = (double)a->threads;
    }
    p->budget_src = hb.src;
    cl_budget_est_init(&p->best, budget);
    if (hb.src == SL_BUDGET_UNKNOWN) {
        double est = cl_budget_est_lone(&p->best, p->lone_cpu, p->lone_wall);
        if (est > 0.0) {
            budget = est;
            p->in.client_cpu_budget_measured = est;
        }
    }
    p->in.client_cpu_budget = budget;
    p->in.client_cpu_budget_source = (char *)sl_budget_src_name(hb.src);
    /* Which machine and CPUs we are, so workers on this host are not
     * counted as CPUs of their own (docs/planner.md "Shared machines"). */
    sl_cpuset_t cpus;
    sl_machine_id(p->machine_id, sizeof(p->machine_id));
    if (sl_cpuset_self(&cpus) != 0 ||
        sl_cpuset_format(&cpus, p->cpu_set, sizeof(p->cpu_set)) != 0) {
        p->cpu_set[0] = '\0';
    }
    p->in.client_machine_id = p->machine_id;
    p->in.client_cpu_set = p->cpu_set;
    p->profile_seconds = sl_mono_sec() - t0;
out:
    free(sm.idx);
    free(sm.spec_json);
    protobuf_c_message_free_unpacked(cresp, NULL);
    return rc;
}
