#include "worker/profile.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cost/hostfacts.h"
#include "common/cost/profiler.h"
#include "common/base/log.h"
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
};

wk_profile_t *wk_profile_new(const char *data_root, unsigned threads)
{
    wk_profile_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    snprintf(p->data_root, sizeof(p->data_root), "%s", data_root);
    p->threads = threads > 0 ? threads : 1;
    sl_cpu_model(p->cpu_model, sizeof(p->cpu_model));
    p->cpu_budget = sl_cpu_budget(NULL, 0);
    /* Workers with the same key are one speed class: profiling one of them
     * stands for all. */
    snprintf(p->class_key, sizeof(p->class_key), "%.120s|%u threads|%.2f cpus", p->cpu_model,
             p->threads, p->cpu_budget);
    pthread_mutex_init(&p->mu, NULL);
    return p;
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
 * the same data). mu held. */
static int open_source(wk_profile_t *p, const sl_spec_t *spec, uint64_t fingerprint,
                       char *err, size_t errlen)
{
    if (p->src != NULL && p->src_type == spec->source_type &&
        strcmp(p->src_path, spec->source_path) == 0 &&
        sl_source_fingerprint(p->src) == fingerprint) {
        return 0;
    }
    sl_source_free(p->src);
    p->src = NULL;
    int rc = sl_source_open(p->data_root, spec->source_type, spec->source_path, &p->src, err,
                            errlen);
    if (rc != 0) {
        return rc;
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
    if (req->n_indices == 0) {
        sl_rpc_reply_ok(reply, &resp.base);
        return;
    }
    if (req->n_indices > SL_PROFILE_MAX_SAMPLES) {
        sl_rpc_reply_error(reply, SL_RPC_INVALID_ARGUMENT, "indices: more than %d",
                           SL_PROFILE_MAX_SAMPLES);
        return;
    }
    char err[1024] = "";
    sl_spec_t *spec = malloc(sizeof(*spec)); /* large: keep it off the pool thread's stack */
    sl_pipeline_t *pipe = NULL;
    Sluice__StageStat *units = NULL;
    Sluice__StageStat **punits = NULL;
    int locked = 0;
    int code = SL_RPC_OK;
    if (spec == NULL) {
        code = SL_RPC_RESOURCE_EXHAUSTED;
        snprintf(err, sizeof(err), "out of memory");
        goto out;
    }
    const char *json = req->spec_json != NULL ? req->spec_json : "";
    if (sl_spec_parse("<profile>", json, strlen(json), spec, err, sizeof(err)) != 0 ||
        sl_pipeline_new(spec, 0, &pipe, err, sizeof(err)) != 0) {
        code = SL_RPC_INVALID_ARGUMENT;
        goto out;
    }
    pthread_mutex_lock(&p->mu);
    locked = 1;
    int rc = open_source(p, spec, req->source_fingerprint, err, sizeof(err));
    if (rc != 0) {
        code = rc == -ESTALE ? SL_RPC_FAILED_PRECONDITION : SL_RPC_NOT_FOUND;
        goto out;
    }
    uint64_t total = sl_source_count(p->src);
    for (size_t i = 0; i < req->n_indices; i++) {
        if (req->indices[i] >= total) {
            code = SL_RPC_INVALID_ARGUMENT;
            snprintf(err, sizeof(err), "index %" PRIu64 " beyond the source's %" PRIu64,
                     req->indices[i], total);
            goto out;
        }
    }
    int max_ms = req->max_ms > 0 && req->max_ms < WK_PROFILE_MAX_MS ? (int)req->max_ms
                                                                     : WK_PROFILE_MAX_MS;
    sl_profile_t pr;
    rc = sl_profile_run(pipe, p->src, req->indices, req->n_indices, max_ms, &pr, err,
                        sizeof(err));
    if (rc != 0) {
        code = SL_RPC_INTERNAL;
        goto out;
    }
    units = calloc(pr.nunits > 0 ? pr.nunits : 1, sizeof(*units));
    punits = calloc(pr.nunits > 0 ? pr.nunits : 1, sizeof(*punits));
    if (units == NULL || punits == NULL) {
        code = SL_RPC_RESOURCE_EXHAUSTED;
        snprintf(err, sizeof(err), "out of memory");
        goto out;
    }
    double ns = pr.samples > 0 ? (double)pr.samples : 1.0;
    for (uint32_t u = 0; u < pr.nunits; u++) {
        sluice__stage_stat__init(&units[u]);
        units[u].name = (char *)sl_pipeline_unit_name(pipe, u);
        units[u].cpu_sec_per_sample = pr.units[u].cpu_sec / ns;
        units[u].out_bytes_per_sample = (double)pr.units[u].out_bytes / ns;
        units[u].samples = pr.units[u].samples;
        punits[u] = &units[u];
    }
    Sluice__HostProfile hp = SLUICE__HOST_PROFILE__INIT;
    hp.host = p->class_key;
    hp.n_units = pr.nunits;
    hp.units = punits;
    hp.read_cpu_sec_per_sample = pr.read_cpu_sec / ns;
    hp.encoded_bytes_per_sample = (double)pr.encoded_bytes / ns;
    hp.samples = pr.samples;
    hp.seconds = pr.seconds;
    hp.cost_model_error = pr.model_error > 0 ? pr.model_error : 0;
    hp.size_cost_error = pr.size_error > 0 ? pr.size_error : 0;
    resp.profile = &hp;
    SL_INFO("profile: %" PRIu64 " samples (%" PRIu64 " failed) in %.2f s for %s",
            pr.samples, pr.failed, pr.seconds, sl_rpc_reply_peer(reply));
    sl_rpc_reply_ok(reply, &resp.base);
out:
    if (locked) {
        pthread_mutex_unlock(&p->mu);
    }
    if (code != SL_RPC_OK) {
        SL_INFO("profile for %s refused: %s", sl_rpc_reply_peer(reply), err);
        sl_rpc_reply_error(reply, code, "%s", err);
    }
    free(units);
    free(punits);
    sl_pipeline_free(pipe);
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
        return SL_RPC_RESOURCE_EXHAUSTED;
    }
    /* Not all zeros, so that no layer can shortcut it. */
    for (size_t i = 0; i < chunk; i++) {
        buf[i] = (uint8_t)(i * 131u + 7u);
    }
    int code = SL_RPC_OK;
    while (left > 0) {
        Sluice__ProbeChunk c = SLUICE__PROBE_CHUNK__INIT;
        c.data.data = buf;
        c.data.len = left < chunk ? (size_t)left : chunk;
        int rc = sl_rpc_stream_send(st, &c.base, 10000);
        if (rc != 0) {
            code = SL_RPC_CANCELLED;
            sl_rpc_stream_set_details(st, "probe: peer gone");
            break;
        }
        left -= c.data.len;
    }
    free(buf);
    return code;
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
