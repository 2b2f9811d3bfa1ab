/* probe: link probes (profile.h steps 5 and 6): Worker.Probe streams that
 * measure a link's bandwidth and the client's CPU per received byte: the
 * probing thread's own clock plus gRPC's threads (owncpu.h), never the
 * process clock (a training loop beside it would be charged as receiving). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "client/lib/overhead.h"
#include "client/lib/owncpu.h"
#include "client/lib/planner_impl.h"
#include "common/base/clock.h"
#include "common/cost/hostfacts.h"

/* One probe stream and what it measured. */
typedef struct cl_probe_s {
    const char *addr;
    const sl_rpc_security_t *sec;
    int timeout_ms;
    uint32_t chunk; /* bytes a chunk; 0 = CL_PROBE_CHUNK */
    int rc;         /* 0: the stream ended normally after more than one chunk */
    double t_first; /* when the first chunk arrived (monotonic) */
    double t_end;
    double cpu_first; /* the thread's CPU when the first chunk arrived */
    double cpu;       /* the thread's CPU from the first chunk to the end */
    double grpc;      /* gRPC's threads' CPU over the same span */
    cl_owncpu_grpc_t g;
    uint64_t bytes;   /* after the first chunk */
} cl_probe_t;

/* Streams CL_PROBE_BYTES from pr->addr, or what arrives within
 * CL_PROBE_MAX_SEC of the first chunk (then the stream is cancelled).
 * Bandwidth counts the bytes after the first chunk over the time from its
 * arrival to the end (connection set-up excluded); the receive cost is this
 * thread's and gRPC's threads' CPU over that time per byte. */
static void probe_run(cl_probe_t *pr)
{
    char err[256];
    pr->rc = -1;
    sl_rpc_channel_t *ch = sl_rpc_channel_new(pr->addr, SL_RPC_DEFAULT_MAX_MSG, pr->sec, 1, err,
                                              sizeof(err));
    if (ch == NULL) {
        return;
    }
    Sluice__ProbeRequest req = SLUICE__PROBE_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.bytes = CL_PROBE_BYTES;
    req.chunk_bytes = pr->chunk > 0 ? pr->chunk : CL_PROBE_CHUNK;
    sl_rpc_cstream_t *cs = NULL;
    sl_rpc_status_t st;
    if (sl_rpc_cstream_open(ch, "/sluice.Worker/Probe", &req.base, &sluice__probe_chunk__descriptor,
                            pr->timeout_ms, &cs, &st) == 0) {
        for (;;) {
            ProtobufCMessage *m = NULL;
            int r = sl_rpc_cstream_recv(cs, &m, pr->timeout_ms, &st);
            if (r != 0) {
                pr->rc = r == 1 && pr->bytes > 0 ? 0 : -1;
                break;
            }
            size_t len = ((Sluice__ProbeChunk *)m)->data.len;
            protobuf_c_message_free_unpacked(m, NULL);
            if (pr->t_first == 0.0) {
                pr->t_first = sl_mono_sec();
                pr->cpu_first = sl_thread_cpu_sec();
                (void)cl_owncpu_grpc_sample(&pr->g, NULL, &pr->grpc); /* the baseline */
            } else {
                pr->bytes += len;
                if (sl_mono_sec() - pr->t_first >= CL_PROBE_MAX_SEC) {
                    pr->rc = 0;
                    break;
                }
            }
        }
        pr->t_end = sl_mono_sec();
        pr->cpu = sl_thread_cpu_sec() - pr->cpu_first;
        if (pr->g.have && cl_owncpu_grpc_sample(&pr->g, NULL, &pr->grpc) != 0) {
            pr->grpc = 0.0;
        }
        sl_rpc_cstream_free(cs);
    }
    sl_rpc_channel_free(ch);
}

int cl_probe_link(const char *addr, const sl_rpc_security_t *sec, int timeout_ms, double *ret_bw,
                  double *ret_recv)
{
    cl_probe_t *prp = calloc(1, sizeof(*prp)); /* its gRPC table: 1 KB */
    if (prp == NULL) {
        return -1;
    }
    *prp = (cl_probe_t){.addr = addr, .sec = sec, .timeout_ms = timeout_ms};
    probe_run(prp);
    cl_probe_t pr = *prp;
    free(prp);
    if (pr.rc != 0) {
        return -1;
    }
    double dt = pr.t_end - pr.t_first;
    /* Below a microsecond the clock says nothing: call it 100 GB/s. */
    *ret_bw = dt > 1e-6 ? (double)pr.bytes / dt : 1e11;
    double cpu = pr.cpu + pr.grpc;
    *ret_recv = cpu > 0.0 ? cpu / (double)pr.bytes : 0.0;
    return 0;
}

int cl_probe_samples(const char *addr, const sl_rpc_security_t *sec, int timeout_ms,
                     double sample_bytes, uint32_t batch, double recv_per_byte, double *ret_sec)
{
    if (!(sample_bytes >= 1.0) || batch == 0) {
        return -1;
    }
    double chunk = sample_bytes * (double)batch;
    if (chunk > (double)CL_PROBE_SAMPLES_MAX_CHUNK) {
        chunk = (double)CL_PROBE_SAMPLES_MAX_CHUNK;
    }
    cl_probe_t *pr = calloc(1, sizeof(*pr)); /* its gRPC table: 1 KB */
    if (pr == NULL) {
        return -1;
    }
    *pr =
        (cl_probe_t){.addr = addr, .sec = sec, .timeout_ms = timeout_ms, .chunk = (uint32_t)chunk};
    probe_run(pr);
    int rc = pr->rc == 0 ? cl_overhead_from_probe(pr->cpu + pr->grpc, (double)pr->bytes,
                                                  sample_bytes, recv_per_byte, ret_sec)
                         : -1;
    free(pr);
    return rc;
}

static void *probe_thread(void *arg)
{
    probe_run(arg);
    return NULL;
}

/* The client's own ingress: up to CL_PROBE_CONCURRENT workers streaming to
 * it at once, all bytes over the span from the first first-chunk to the
 * last end. The per-class probes run one after another and each sees one
 * link; summed they overstate what the client can take in when its own
 * link is the narrow one. Returns bytes/s, or 0 when fewer than two
 * streams succeeded (one stream is what the class probe measured). */
double cl_probe_aggregate(const char *const *addrs, size_t n, const sl_rpc_security_t *sec,
                          int timeout_ms, double *ret_recv)
{
    *ret_recv = 0.0;
    pthread_t th[CL_PROBE_CONCURRENT];
    int started[CL_PROBE_CONCURRENT] = {0};
    if (n > CL_PROBE_CONCURRENT) {
        n = CL_PROBE_CONCURRENT;
    }
    if (n < 2) {
        return 0.0;
    }
    cl_probe_t *pr = calloc(n, sizeof(*pr)); /* a gRPC table each: off the stack */
    if (pr == NULL) {
        return 0.0;
    }
    for (size_t i = 0; i < n; i++) {
        pr[i] = (cl_probe_t){.addr = addrs[i], .sec = sec, .timeout_ms = timeout_ms, .rc = -1};
        started[i] = pthread_create(&th[i], NULL, probe_thread, &pr[i]) == 0;
    }
    double t0 = INFINITY;
    double t1 = 0.0;
    /* The streams' threads' CPU, summed, and gRPC's threads' over the
     * longest stream (the spans overlap: summed, gRPC's would count twice). */
    double cpu = 0.0;
    double grpc = 0.0;
    uint64_t bytes = 0;
    int ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (!started[i]) {
            continue;
        }
        pthread_join(th[i], NULL);
        if (pr[i].rc == 0) {
            t0 = fmin(t0, pr[i].t_first);
            t1 = fmax(t1, pr[i].t_end);
            cpu += pr[i].cpu;
            grpc = fmax(grpc, pr[i].grpc);
            bytes += pr[i].bytes;
            ok++;
        }
    }
    free(pr);
    if (ok < 2 || !(t1 - t0 > 1e-6)) {
        return 0.0;
    }
    *ret_recv = bytes > 0 && cpu + grpc > 0.0 ? (cpu + grpc) / (double)bytes : 0.0;
    return (double)bytes / (t1 - t0);
}

double cl_recv_lowest(double have, double probe)
{
    if (!isfinite(probe) || probe <= 0.0) {
        return have;
    }
    return have > 0.0 && have <= probe ? have : probe;
}
