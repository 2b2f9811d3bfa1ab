/* profile: see profile.h. Handlers run on the rpc layer's threads (Profile
 * on the unary pool, Probe on its stream's own thread). */
#include "worker/profile.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/cost/hostfacts.h"
#include "common/profile/profiler.h"
#include "common/plugin/plugin.h"
#include "common/base/log.h"
#include "common/cost/costmodel.h"
#include "common/engine/pipeline.h"
#include "common/data/source.h"
#include "common/spec/spec.h"
#include "proto/sluice.pb-c.h"

struct wk_profile_s {
    char data_root[4096];
    unsigned threads;
    char cpu_model[128];
    double cpu_budget;
    char class_key[256];
    /* The last source profiled (one: a planner profiles one job's data at
     * a time), guarded by mu, which also serialises profiles so that two
     * never compete for this host's CPUs and skew each other. */
    pthread_mutex_t mu;
    sl_source_t *src;
    sl_source_type_e src_type;
    char src_path[SL_SPEC_PATH_MAX];
    const sl_plugins_t *plugins; /* the worker's plugin_dir; NULL = none */
    const sl_remote_t *remote;   /* URL sources; NULL = refused (not owned) */
};

wk_profile_t *wk_profile_new(const char *data_root, unsigned threads,
                             const sl_plugins_t *plugins)
{
    wk_profile_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    snprintf(p->data_root, sizeof(p->data_root), "%s", data_root);
    p->threads = threads > 0 ? threads : 1;
    p->plugins = plugins;
    sl_cpu_model(p->cpu_model, sizeof(p->cpu_model));
    p->cpu_budget = sl_cpu_budget(NULL, 0);
    /* Workers with the same key are one speed class: profiling one of them
     * stands for all. */
    snprintf(p->class_key, sizeof(p->class_key), "%.120s|%u threads|%.2f cpus", p->cpu_model,
             p->threads, p->cpu_budget);
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void wk_profile_set_remote(wk_profile_t *p, const struct sl_remote_s *remote)
{
    p->remote = remote;
}

void wk_profile_free(wk_profile_t *p)
{
    if (p == NULL) {
        return;
    }
    sl_source_free(p->src);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* The job's source, opened under our data root (the cached one when it is
 * the same data). mu held. -ENOENT when it does not open here, -ESTALE when
 * it is not the client's data. */
static int open_source(wk_profile_t *p, const sl_spec_t *spec, uint64_t fingerprint,
                       char *err, size_t errlen)
{
    if (p->src != NULL && spec->mix == NULL && p->src_type == spec->source_type &&
        strcmp(p->src_path, spec->source_path) == 0 &&
        sl_source_fingerprint(p->src) == fingerprint) {
        return 0;
    }
    sl_source_free(p->src);
    p->src = NULL;
    int rc = sl_source_open_spec(p->data_root, p->remote, spec, &p->src, err, errlen);
    if (rc != 0) {
        return -ENOENT; /* whatever kept it shut, the client hears the data is not here */
    }
    p->src_type = spec->source_type;
    snprintf(p->src_path, sizeof(p->src_path), "%s", spec->source_path);
    if (fingerprint != 0 && sl_source_fingerprint(p->src) != fingerprint) {
        snprintf(err, errlen,
                 "source '%.300s' under this worker's data root differs from the client's "
                 "(fingerprint %016" PRIx64 ", client %016" PRIx64 ")",
                 spec->source_path, sl_source_fingerprint(p->src), fingerprint);
        return -ESTALE;
    }
    return 0;
}

/* Parses the request's spec and builds its pipeline (*ret_spec: large, so
 * off the pool thread's stack). Both are the caller's to free, also on
 * failure. */
static int profile_prepare(const Sluice__ProfileRequest *req, sl_spec_t **ret_spec,
                           sl_pipeline_t **ret_pipe, char *err, size_t errlen)
{
    if (req->n_indices > SL_PROFILE_MAX_SAMPLES) {
        return sl_err(err, errlen, -EINVAL, "indices: more than %d", SL_PROFILE_MAX_SAMPLES);
    }
    *ret_spec = malloc(sizeof(**ret_spec));
    if (*ret_spec == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    const char *json = req->spec_json != NULL ? req->spec_json : "";
    int rc = sl_spec_parse("<profile>", json, strlen(json), *ret_spec, err, errlen);
    if (rc == 0) {
        rc = sl_pipeline_new(*ret_spec, 0, ret_pipe, err, errlen);
    }
    return rc;
}

/* Runs pipe on the request's samples of this worker's copy of the data.
 * Serialised by p->mu: two profiles must not compete for this host's CPUs. */
static int profile_measure(wk_profile_t *p, const Sluice__ProfileRequest *req,
                           const sl_spec_t *spec, sl_pipeline_t *pipe, sl_profile_t *ret,
                           char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    int rc = open_source(p, spec, req->source_fingerprint, err, errlen);
    if (rc == 0) {
        rc = sl_pipeline_load(pipe, p->src, err, errlen);
    }
    if (rc == 0 && sl_spec_has_plugins(spec)) {
        /* Units past a plugin this worker lacks are never given to it: an
         * unbound one fails its samples and its profile says so. */
        rc = sl_pipeline_bind_plugins(pipe, p->plugins, err, errlen);
        rc = rc == -ENOENT ? 0 : rc;
    }
    uint64_t total = rc == 0 ? sl_source_count(p->src) : 0;
    for (size_t i = 0; rc == 0 && i < req->n_indices; i++) {
        if (req->indices[i] >= total) {
            rc = sl_err(err, errlen, -EINVAL, "index %" PRIu64 " beyond the source's %" PRIu64,
                        req->indices[i], total);
        }
    }
    if (rc == 0) {
        int max_ms = req->max_ms > 0 && req->max_ms < WK_PROFILE_MAX_MS ? (int)req->max_ms
                                                                         : WK_PROFILE_MAX_MS;
        rc = sl_profile_run(pipe, p->src, req->indices, req->n_indices, max_ms, ret, err,
                            errlen);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* The measured profile as a message: per-sample means. units and punits
 * hold pr->nunits entries and back hp until it is packed. */
static void profile_msg(const wk_profile_t *p, const sl_pipeline_t *pipe, const sl_profile_t *pr,
                        Sluice__StageStat *units, Sluice__StageStat **punits,
                        Sluice__HostProfile *hp)
{
    double ns = pr->samples > 0 ? (double)pr->samples : 1.0;
    for (uint32_t u = 0; u < pr->nunits; u++) {
        sluice__stage_stat__init(&units[u]);
        units[u].name = (char *)sl_pipeline_unit_name(pipe, u);
        units[u].cpu_sec_per_sample = pr->units[u].cpu_sec / ns;
        units[u].out_bytes_per_sample = (double)pr->units[u].out_bytes / ns;
        units[u].samples = pr->units[u].samples;
        punits[u] = &units[u];
    }
    sluice__host_profile__init(hp);
    hp->host = (char *)p->class_key;
    hp->n_units = pr->nunits;
    hp->units = punits;
    hp->read_cpu_sec_per_sample = pr->read_cpu_sec / ns;
    hp->encoded_bytes_per_sample = (double)pr->encoded_bytes / ns;
    hp->samples = pr->samples;
    hp->seconds = pr->seconds;
    hp->cost_model_error = pr->model_error > 0 ? pr->model_error : 0;
    hp->size_cost_error = pr->size_error > 0 ? pr->size_error : 0;
    /* A URL source: what this host's reads of it cost (planner_read.c). */
    sl_source_read_cost(p->src, &hp->source_bytes_per_sec, &hp->source_latency_sec);
}

/* Profile: the identity always; with indices, the measured profile too. */
static void h_profile(void *ctx, const ProtobufCMessage *m, sl_rpc_reply_t *reply)
{
    wk_profile_t *p = ctx;
    const Sluice__ProfileRequest *req = (const Sluice__ProfileRequest *)m;
    Sluice__ProfileResponse resp = SLUICE__PROFILE_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    resp.class_key = p->class_key;
    resp.threads = p->threads;
    resp.cpu_budget = p->cpu_budget;
    resp.cpu_model = p->cpu_model;
    char err[1024] = "";
    sl_spec_t *spec = NULL;
    sl_pipeline_t *pipe = NULL;
    sl_profile_t pr;
    Sluice__StageStat units[SL_PIPE_MAX_UNITS];
    Sluice__StageStat *punits[SL_PIPE_MAX_UNITS];
    Sluice__HostProfile hp;
    int rc = 0;
    if (req->n_indices > 0) {
        rc = profile_prepare(req, &spec, &pipe, err, sizeof(err));
        if (rc == 0) {
            rc = profile_measure(p, req, spec, pipe, &pr, err, sizeof(err));
        }
        if (rc == 0) {
            profile_msg(p, pipe, &pr, units, punits, &hp);
            resp.profile = &hp;
            SL_INFO("profile: %" PRIu64 " samples (%" PRIu64 " failed) in %.2f s for %s",
                    pr.samples, pr.failed, pr.seconds, sl_rpc_reply_peer(reply));
        } else {
            SL_INFO("profile for %s refused: %s", sl_rpc_reply_peer(reply), err);
        }
    }
    sl_rpc_reply_finish(reply, rc, &resp.base, err);
    sl_pipeline_free(pipe);
    sl_spec_clear(spec);
    free(spec);
}

/* Probe: chunks of one reused buffer until `bytes` went out or the peer
 * left. The rpc layer keeps one send in flight, so this is paced by the
 * link (its flow control), which is what the client times. */
static int h_probe(void *ctx, sl_rpc_stream_t *st, const ProtobufCMessage *m)
{
    (void)ctx;
    const Sluice__ProbeRequest *req = (const Sluice__ProbeRequest *)m;
    uint64_t left = req->bytes < WK_PROBE_MAX_BYTES ? req->bytes : WK_PROBE_MAX_BYTES;
    size_t chunk = req->chunk_bytes > 0 && req->chunk_bytes < WK_PROBE_MAX_CHUNK
                       ? req->chunk_bytes
                       : (req->chunk_bytes == 0 ? (1u << 20) : WK_PROBE_MAX_CHUNK);
    uint8_t *buf = malloc(chunk);
    if (buf == NULL) {
        sl_rpc_stream_set_details(st, "out of memory");
        return sl_rpc_status_from_errno(-ENOMEM);
    }
    /* Not all zeros, so that no layer can shortcut it. */
    for (size_t i = 0; i < chunk; i++) {
        buf[i] = (uint8_t)(i * 131u + 7u);
    }
    int rc = 0;
    while (left > 0 && rc == 0) {
        Sluice__ProbeChunk c = SLUICE__PROBE_CHUNK__INIT;
        c.data.data = buf;
        c.data.len = left < chunk ? (size_t)left : chunk;
        if (sl_rpc_stream_send(st, &c.base, 10000) != 0) {
            /* Whatever the send says, the client stopped reading. */
            rc = -ECANCELED;
            sl_rpc_stream_set_details(st, "probe: peer gone");
        }
        left -= c.data.len;
    }
    free(buf);
    return sl_rpc_status_from_errno(rc);
}

int wk_profile_register(wk_profile_t *p, sl_rpc_server_t *srv)
{
    int rc = sl_rpc_server_add_unary(srv, WK_PROFILE_METHOD, &sluice__profile_request__descriptor,
                                     h_profile, p);
    if (rc != 0) {
        return rc;
    }
    return sl_rpc_server_add_stream(srv, WK_PROBE_METHOD, &sluice__probe_request__descriptor,
                                    h_probe, p);
}
