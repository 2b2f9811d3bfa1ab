/* bench_dispatcher: a load generator for one real dispatcher over gRPC, for
 * scripts/bench-dispatcher (which starts the dispatcher and measures it).
 *
 *   bench_dispatcher TARGET --workers N --jobs M --ack-rate R --seconds S
 *                    [--worker-threads T] [--client-threads C] [--channels K]
 *
 * One process plays N workers and M clients over K shared channels (default
 * 4; a channel is thread-safe, so many simulated peers share one).
 *
 * Workers: T threads (default 4) each own a contiguous share of the N
 * workers. Each worker registers (RegisterWorker), then heartbeats at the
 * interval the dispatcher answered (heartbeat_ms), the N phases spread evenly
 * over the interval. A heartbeat carries a load, buffered bytes, the jobs
 * whose spec the worker holds, one StageStat per such job, and the splits it
 * was assigned at the previous heartbeat as `sent` (taken and delivered at
 * once). known = false makes it register again.
 *
 * Clients: C threads (default min(M, 16)) own the M jobs round-robin. Each
 * job (its own client_id, offload "off": every split is the client's) is
 * submitted, then its splits are taken from GetAssignment (the plan fetch:
 * whenever its queue cannot cover the next ack, and at least once a second)
 * and acknowledged as the client library does: every I ms (default 100, the
 * client's control-thread period) one AckSplits per job carrying the R/M x I
 * splits it consumed since; all jobs together ack R splits per second. More
 * than a second behind, the backlog is dropped and counted as `ack_behind`.
 * --ack-interval-ms 0 instead sends one AckSplits per split, all C threads
 * together R calls per second (the old worst case, R times the calls). At
 * the end every job is closed (CloseJob).
 *
 * Latency of every call goes into a per-thread, per-method histogram of
 * fixed size (2% wide buckets from 1 us to ~10 min): bounded memory, merged
 * at the end.
 *
 * stdout, one line per method that was called, then a summary:
 *   method=NAME calls=N errors=E per_sec=X p50_ms=A p99_ms=B max_ms=C
 *   summary workers=N jobs=M ack_rate=R seconds=S acks_per_sec=X
 *           heartbeats_per_sec=Y hb_late=L ack_behind=B errors=E
 *           p99_ms_max=P gen_cpu=G ack_interval_ms=I
 * hb_late: heartbeats sent more than half an interval after their slot.
 * gen_cpu: this process's CPU (cores) over the run.
 * The first few RPC errors go to stderr. Exit 0 (even with RPC errors, which
 * are counted); 1 when it cannot start; 2 on usage. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/clock.h"
#include "common/rpc/rpc.h"
#include "proto/sluice.pb-c.h"

/* Every job this tool submits uses one capability (docs/protocol.md). */
#define FX_JOB_SECRET "bench-job-secret-0123456789"

#define CALL_MS 10000
#define MAX_THREADS 64
#define MAX_CHANNELS 64
#define NBUCKET 1024          /* bucket i: [1.02^i, 1.02^(i+1)) microseconds */
#define W_KNOWN 8             /* job specs one simulated worker holds */
#define W_HELD 32             /* splits one simulated worker holds */
#define C_QUEUE 256           /* client splits queued per job */
#define MAX_ERR_PRINT 10

#define SPEC                                                                                  \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 8, \"epochs\": 100,"          \
    " \"offload\": \"off\"}"
#define SAMPLES (1u << 20)

enum { M_REGISTER, M_HEARTBEAT, M_SUBMIT, M_ASSIGN, M_ACK, M_CLOSE, M_COUNT };
static const char *const MNAME[M_COUNT] = {"RegisterWorker", "Heartbeat", "SubmitJob",
                                           "GetAssignment",  "AckSplits", "CloseJob"};
static const char *const MPATH[M_COUNT] = {
    "/sluice.Dispatcher/RegisterWorker", "/sluice.Dispatcher/Heartbeat",
    "/sluice.Dispatcher/SubmitJob",      "/sluice.Dispatcher/GetAssignment",
    "/sluice.Dispatcher/AckSplits",      "/sluice.Dispatcher/CloseJob"};

typedef struct hist_s {
    uint64_t calls, errors;
    double max_us;
    uint32_t b[NBUCKET];
} hist_t;

typedef struct cfg_s {
    int workers, jobs, wthreads, cthreads, nch;
    double ack_rate, seconds;
    int ack_interval_ms; /* 0: one AckSplits per split */
    double start, deadline;
    sl_rpc_channel_t *ch[MAX_CHANNELS];
} cfg_t;

typedef struct held_s {
    uint64_t job, split, epoch, begin, end, worker, assignment;
    uint32_t stage_to;
} held_t;

typedef struct wk_s {
    uint64_t id;
    double next;
    uint64_t known[W_KNOWN];
    size_t nknown;
    held_t held[W_HELD];
    size_t nheld;
    uint64_t samples, bytes_sent;
} wk_t;

typedef struct cjob_s {
    uint64_t id;
    uint64_t q[C_QUEUE];
    size_t nq, iq;
    double next_plan;
    double next_ack, credit; /* batched acks: when the next is due, splits owed */
} cjob_t;

typedef struct thr_s {
    const cfg_t *c;
    int index;
    sl_rpc_channel_t *ch;
    hist_t h[M_COUNT];
    uint64_t hb_late, ack_behind, acks, heartbeats;
    unsigned rng;
} thr_t;

static atomic_int g_err_printed;

static double now_s(void) { return sl_mono_sec(); }

static void sleep_until(double t)
{
    double d = t - now_s();
    if (d <= 0) {
        return;
    }
    struct timespec ts = {.tv_sec = (time_t)d, .tv_nsec = (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}

static void hist_add(hist_t *h, double us)
{
    int i = us < 1 ? 0 : (int)(log(us) / log(1.02));
    if (i >= NBUCKET) {
        i = NBUCKET - 1;
    }
    h->b[i]++;
    h->calls++;
    if (us > h->max_us) {
        h->max_us = us;
    }
}

/* Upper bound of the bucket holding quantile q, in ms. */
static double hist_q_ms(const hist_t *h, double q)
{
    uint64_t n = 0;
    for (int i = 0; i < NBUCKET; i++) {
        n += h->b[i];
    }
    if (n == 0) {
        return 0;
    }
    uint64_t want = (uint64_t)ceil(q * (double)n);
    want = want < 1 ? 1 : want;
    uint64_t acc = 0;
    for (int i = 0; i < NBUCKET; i++) {
        acc += h->b[i];
        if (acc >= want) {
            double v = pow(1.02, i + 1) / 1000.0;
            return v < h->max_us / 1000.0 ? v : h->max_us / 1000.0;
        }
    }
    return h->max_us / 1000.0;
}

/* One unary call, timed; ret NULL: the answer is not wanted. */
static int call(thr_t *t, int m, const ProtobufCMessage *req,
                const ProtobufCMessageDescriptor *desc, ProtobufCMessage **ret)
{
    sl_rpc_status_t st;
    ProtobufCMessage *r = NULL;
    double t0 = now_s();
    int rc = sl_rpc_unary(t->ch, MPATH[m], req, desc, CALL_MS, 1, &r, &st);
    hist_add(&t->h[m], (now_s() - t0) * 1e6);
    if (rc == 0) {
        if (ret != NULL) {
            *ret = r;
        } else {
            protobuf_c_message_free_unpacked(r, NULL);
        }
        return 0;
    }
    t->h[m].errors++;
    if (atomic_fetch_add(&g_err_printed, 1) < MAX_ERR_PRINT) {
        fprintf(stderr, "bench_dispatcher: %s: %s: %s\n", MNAME[m],
                rc == -ECOMM ? sl_rpc_code_name(st.code) : "reply", rc == -ECOMM ? st.details : "does not unpack");
    }
    return -ECOMM;
}

/* ------------------------------------------------------------ workers */

static int wk_register(thr_t *t, wk_t *w, int g, uint32_t *ret_hb_ms)
{
    char addr[64], host[32], mid[32];
    snprintf(addr, sizeof(addr), "10.%d.%d.%d:7500", (g >> 16) & 255, (g >> 8) & 255, g & 255);
    snprintf(host, sizeof(host), "bench-w%d", g);
    snprintf(mid, sizeof(mid), "bench-machine-%d", g);
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.address = addr;
    req.threads = 8;
    req.hostname = host;
    req.worker_id = w->id;
    req.machine_id = mid;
    req.cpu_set = "0-7";
    req.cpu_budget = 8;
    ProtobufCMessage *m = NULL;
    if (call(t, M_REGISTER, &req.base, &sluice__register_worker_response__descriptor, &m) != 0) {
        return -ECOMM;
    }
    const Sluice__RegisterWorkerResponse *r = (const Sluice__RegisterWorkerResponse *)m;
    w->id = r->worker_id;
    if (ret_hb_ms != NULL) {
        *ret_hb_ms = r->heartbeat_ms;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

static void wk_forget_job(wk_t *w, uint64_t job)
{
    for (size_t i = 0; i < w->nknown; i++) {
        if (w->known[i] == job) {
            w->known[i] = w->known[--w->nknown];
            break;
        }
    }
    for (size_t i = 0; i < w->nheld;) {
        if (w->held[i].job == job) {
            w->held[i] = w->held[--w->nheld];
        } else {
            i++;
        }
    }
}

static void wk_heartbeat(thr_t *t, wk_t *w, int g)
{
    Sluice__HeartbeatRequest req = SLUICE__HEARTBEAT_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.worker_id = w->id;
    req.load = (double)(rand_r(&t->rng) % 1000) / 1000.0;
    req.buffered_bytes = (uint64_t)(rand_r(&t->rng) % (64 << 20));
    req.n_known_jobs = w->nknown;
    req.known_jobs = w->known;
    Sluice__StageStat st[W_KNOWN], *stp[W_KNOWN];
    char names[W_KNOWN][32];
    for (size_t i = 0; i < w->nknown; i++) {
        sluice__stage_stat__init(&st[i]);
        snprintf(names[i], sizeof(names[i]), "decode_jpeg");
        st[i].name = names[i];
        st[i].cpu_sec_per_sample = 0.004 + (double)(rand_r(&t->rng) % 100) * 1e-5;
        st[i].out_bytes_per_sample = 150528;
        st[i].samples = w->samples;
        stp[i] = &st[i];
    }
    req.n_stages = w->nknown;
    req.stages = stp;
    /* Splits assigned last time: taken and delivered since. */
    Sluice__SplitAssignment sa[W_HELD], *sap[W_HELD];
    for (size_t i = 0; i < w->nheld; i++) {
        const held_t *h = &w->held[i];
        sluice__split_assignment__init(&sa[i]);
        sa[i].job_id = h->job;
        sa[i].split_id = h->split;
        sa[i].epoch = h->epoch;
        sa[i].begin = h->begin;
        sa[i].end = h->end;
        sa[i].stage_to = h->stage_to;
        sa[i].worker_id = h->worker;
        sa[i].assignment = h->assignment;
        sap[i] = &sa[i];
        w->samples += h->end - h->begin;
        w->bytes_sent += (h->end - h->begin) * 150528;
    }
    req.n_sent = w->nheld;
    req.sent = sap;
    req.bytes_sent = w->bytes_sent;
    ProtobufCMessage *m = NULL;
    t->heartbeats++;
    if (call(t, M_HEARTBEAT, &req.base, &sluice__heartbeat_response__descriptor, &m) != 0) {
        return;
    }
    w->nheld = 0;
    const Sluice__HeartbeatResponse *r = (const Sluice__HeartbeatResponse *)m;
    if (!r->known) {
        protobuf_c_message_free_unpacked(m, NULL);
        w->nknown = 0;
        wk_register(t, w, g, NULL);
        return;
    }
    for (size_t i = 0; i < r->n_closed_jobs; i++) {
        wk_forget_job(w, r->closed_jobs[i]);
    }
    for (size_t i = 0; i < r->n_jobs && w->nknown < W_KNOWN; i++) {
        w->known[w->nknown++] = r->jobs[i]->job_id;
    }
    for (size_t i = 0; i < r->n_assign && w->nheld < W_HELD; i++) {
        const Sluice__SplitAssignment *a = r->assign[i];
        w->held[w->nheld++] = (held_t){.job = a->job_id,
                                       .split = a->split_id,
                                       .epoch = a->epoch,
                                       .begin = a->begin,
                                       .end = a->end,
                                       .worker = a->worker_id,
                                       .assignment = a->assignment,
                                       .stage_to = a->stage_to};
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

static void *run_workers(void *arg)
{
    thr_t *t = arg;
    const cfg_t *c = t->c;
    int lo = (int)((int64_t)c->workers * t->index / c->wthreads);
    int hi = (int)((int64_t)c->workers * (t->index + 1) / c->wthreads);
    int n = hi - lo;
    if (n <= 0) {
        return NULL;
    }
    wk_t *w = calloc((size_t)n, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    uint32_t hb_ms = 500;
    for (int i = 0; i < n && now_s() < c->deadline; i++) {
        wk_register(t, &w[i], lo + i, &hb_ms);
    }
    double iv = (hb_ms > 0 ? hb_ms : 500) / 1000.0;
    /* Phases spread evenly over the interval across all N workers. */
    double base = now_s();
    for (int i = 0; i < n; i++) {
        w[i].next = base + iv * (double)(lo + i) / (double)c->workers;
    }
    /* Same interval for all: visiting in index order is visiting in due order. */
    for (int k = 0; now_s() < c->deadline; k = (k + 1) % n) {
        wk_t *x = &w[k];
        while (now_s() < x->next && now_s() < c->deadline) {
            double until = x->next < c->deadline ? x->next : c->deadline;
            sleep_until(until < now_s() + 0.05 ? until : now_s() + 0.05);
        }
        if (now_s() >= c->deadline) {
            break;
        }
        double late = now_s() - x->next;
        if (late > iv / 2) {
            t->hb_late++;
        }
        wk_heartbeat(t, x, lo + k);
        x->next += iv;
        if (x->next < now_s() - iv) {
            x->next = now_s();
        }
    }
    free(w);
    return NULL;
}

/* ------------------------------------------------------------ clients */

static int cl_submit(thr_t *t, cjob_t *j, int g)
{
    char client_id[48];
    snprintf(client_id, sizeof(client_id), "bench-dispatcher-%d", g);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = SPEC;
    req.spec_name = "bench-dispatcher";
    req.num_samples = SAMPLES;
    req.client_id = client_id;
    req.client_threads = 8;
    ProtobufCMessage *m = NULL;
    if (call(t, M_SUBMIT, &req.base, &sluice__submit_job_response__descriptor, &m) != 0) {
        return -ECOMM;
    }
    j->id = ((Sluice__SubmitJobResponse *)m)->job_id;
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

static void cl_plan(thr_t *t, cjob_t *j)
{
    Sluice__GetAssignmentRequest req = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = j->id;
    ProtobufCMessage *m = NULL;
    j->next_plan = now_s() + 1.0;
    if (call(t, M_ASSIGN, &req.base, &sluice__get_assignment_response__descriptor, &m) != 0) {
        return;
    }
    const Sluice__GetAssignmentResponse *r = (const Sluice__GetAssignmentResponse *)m;
    /* Every unacknowledged split comes back: the queue is replaced. */
    j->nq = 0;
    j->iq = 0;
    for (size_t i = 0; i < r->n_splits && j->nq < C_QUEUE; i++) {
        if (r->splits[i]->worker_id == 0) {
            j->q[j->nq++] = r->splits[i]->split_id;
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Acknowledges the next n queued splits of j in one AckSplits call. */
static void cl_ack(thr_t *t, cjob_t *j, size_t n)
{
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = j->id;
    req.n_split_ids = n;
    req.split_ids = &j->q[j->iq];
    j->iq += n;
    if (call(t, M_ACK, &req.base, &sluice__ack_splits_response__descriptor, NULL) == 0) {
        t->acks += n;
    }
}

static void cl_close(thr_t *t, const cjob_t *j)
{
    Sluice__CloseJobRequest req = SLUICE__CLOSE_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = j->id;
    call(t, M_CLOSE, &req.base, &sluice__close_job_response__descriptor, NULL);
}

/* Plan fetches that are due: the queue ran dry, or a second passed. */
static void cl_plans_due(thr_t *t, cjob_t *j, int n)
{
    double now = now_s();
    for (int i = 0; i < n; i++) {
        if (j[i].id != 0 && (j[i].iq >= j[i].nq || now >= j[i].next_plan)) {
            cl_plan(t, &j[i]);
        }
    }
}

/* One split per call, the thread's share of R on a fixed schedule. */
static void cl_loop_per_split(thr_t *t, cjob_t *j, int n)
{
    const cfg_t *c = t->c;
    double gap = (double)c->cthreads / c->ack_rate;
    double next_ack = now_s();
    int k = 0;
    while (now_s() < c->deadline) {
        cl_plans_due(t, j, n);
        double now = now_s();
        if (now < next_ack) {
            double until = next_ack < c->deadline ? next_ack : c->deadline;
            sleep_until(until < now + 0.05 ? until : now + 0.05);
            continue;
        }
        if (next_ack < now - 1.0) {
            t->ack_behind += (uint64_t)((now - next_ack) / gap);
            next_ack = now;
        }
        /* The next job (round-robin) with a split to ack. */
        for (int tries = 0; tries < n; tries++, k = (k + 1) % n) {
            if (j[k].id != 0 && j[k].iq < j[k].nq) {
                cl_ack(t, &j[k], 1);
                k = (k + 1) % n;
                break;
            }
        }
        next_ack += gap;
    }
}

/* What the client library does (its control thread): every interval, one
 * AckSplits per job carrying every split consumed since, each job consuming
 * R/M splits per second. Phases spread evenly over the interval. */
static void cl_loop_batched(thr_t *t, cjob_t *j, int n)
{
    const cfg_t *c = t->c;
    double iv = c->ack_interval_ms / 1000.0;
    double per_tick = c->ack_rate / c->jobs * iv;
    double base = now_s();
    for (int i = 0; i < n; i++) {
        int g = t->index + i * c->cthreads;
        j[i].next_ack = base + iv * (double)g / (double)c->jobs;
    }
    /* Same interval for all: visiting in index order is visiting in due order. */
    for (int k = 0; now_s() < c->deadline; k = (k + 1) % n) {
        cjob_t *x = &j[k];
        while (now_s() < x->next_ack && now_s() < c->deadline) {
            double until = x->next_ack < c->deadline ? x->next_ack : c->deadline;
            sleep_until(until < now_s() + 0.05 ? until : now_s() + 0.05);
        }
        if (now_s() >= c->deadline) {
            break;
        }
        x->next_ack += iv;
        if (x->id == 0) {
            continue;
        }
        x->credit += per_tick;
        size_t want = (size_t)x->credit;
        if (x->iq + want > x->nq || now_s() >= x->next_plan) {
            cl_plan(t, x);
        }
        size_t have = x->nq - x->iq;
        size_t send = want < have ? want : have;
        if (send > 0) {
            cl_ack(t, x, send);
        }
        x->credit -= (double)send;
        /* More than a second of acks owed: drop it, count it behind. */
        double cap = c->ack_rate / c->jobs;
        if (x->credit > cap) {
            t->ack_behind += (uint64_t)(x->credit - cap);
            x->credit = cap;
        }
        if (x->next_ack < now_s() - 1.0) {
            t->ack_behind += (uint64_t)((now_s() - x->next_ack) / iv * per_tick);
            x->next_ack = now_s();
        }
    }
}

static void *run_clients(void *arg)
{
    thr_t *t = arg;
    const cfg_t *c = t->c;
    int n = 0;
    for (int g = t->index; g < c->jobs; g += c->cthreads) {
        n++;
    }
    if (n == 0) {
        return NULL;
    }
    cjob_t *j = calloc((size_t)n, sizeof(*j));
    if (j == NULL) {
        return NULL;
    }
    int live = 0;
    for (int i = 0, g = t->index; i < n; i++, g += c->cthreads) {
        if (cl_submit(t, &j[i], g) == 0) {
            cl_plan(t, &j[i]);
            live++;
        }
    }
    if (live > 0) {
        if (c->ack_interval_ms > 0) {
            cl_loop_batched(t, j, n);
        } else {
            cl_loop_per_split(t, j, n);
        }
    }
    for (int i = 0; i < n; i++) {
        if (j[i].id != 0) {
            cl_close(t, &j[i]);
        }
    }
    free(j);
    return NULL;
}

/* ------------------------------------------------------------ main */

static int usage(void)
{
    fprintf(stderr, "usage: bench_dispatcher TARGET --workers N --jobs M --ack-rate R --seconds S\n"
                    "       [--worker-threads T] [--client-threads C] [--channels K]\n"
                    "       [--ack-interval-ms I]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        return usage();
    }
    cfg_t c = {.workers = 100, .jobs = 4, .ack_rate = 1000, .seconds = 10, .wthreads = 4,
               .cthreads = 0, .nch = 4, .ack_interval_ms = 100};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            return usage();
        }
        const char *v = argv[++i];
        if (strcmp(a, "--workers") == 0) {
            c.workers = atoi(v);
        } else if (strcmp(a, "--jobs") == 0) {
            c.jobs = atoi(v);
        } else if (strcmp(a, "--ack-rate") == 0) {
            c.ack_rate = atof(v);
        } else if (strcmp(a, "--seconds") == 0) {
            c.seconds = atof(v);
        } else if (strcmp(a, "--worker-threads") == 0) {
            c.wthreads = atoi(v);
        } else if (strcmp(a, "--client-threads") == 0) {
            c.cthreads = atoi(v);
        } else if (strcmp(a, "--channels") == 0) {
            c.nch = atoi(v);
        } else if (strcmp(a, "--ack-interval-ms") == 0) {
            c.ack_interval_ms = atoi(v);
        } else {
            return usage();
        }
    }
    if (c.cthreads == 0) {
        c.cthreads = c.jobs < 16 ? c.jobs : 16;
    }
    if (c.workers < 0 || c.jobs < 0 || !(c.seconds > 0) || c.wthreads < 1 || c.cthreads < 0 ||
        c.wthreads + c.cthreads > MAX_THREADS || c.nch < 1 || c.nch > MAX_CHANNELS ||
        c.ack_interval_ms < 0 || c.ack_interval_ms > 60000 ||
        (c.jobs > 0 && !(c.ack_rate > 0))) {
        return usage();
    }
    sl_rpc_init();
    for (int i = 0; i < c.nch; i++) {
        char err[256];
        c.ch[i] = sl_rpc_channel_new(argv[1], 0, NULL, 1, err, sizeof(err));
        if (c.ch[i] == NULL) {
            fprintf(stderr, "bench_dispatcher: %s\n", err);
            return 1;
        }
    }
    static thr_t thr[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int nthr = c.wthreads + c.cthreads;
    double cpu0 = sl_process_cpu_sec();
    c.start = now_s();
    c.deadline = c.start + c.seconds;
    for (int i = 0; i < nthr; i++) {
        int is_w = i < c.wthreads;
        thr[i] = (thr_t){.c = &c,
                         .index = is_w ? i : i - c.wthreads,
                         .ch = c.ch[i % c.nch],
                         .rng = (unsigned)i * 2654435761u + 1};
        if (pthread_create(&th[i], NULL, is_w ? run_workers : run_clients, &thr[i]) != 0) {
            fprintf(stderr, "bench_dispatcher: cannot start thread %d\n", i);
            return 1;
        }
    }
    static hist_t tot[M_COUNT];
    uint64_t hb_late = 0, behind = 0, acks = 0, hbs = 0;
    for (int i = 0; i < nthr; i++) {
        pthread_join(th[i], NULL);
        for (int m = 0; m < M_COUNT; m++) {
            tot[m].calls += thr[i].h[m].calls;
            tot[m].errors += thr[i].h[m].errors;
            if (thr[i].h[m].max_us > tot[m].max_us) {
                tot[m].max_us = thr[i].h[m].max_us;
            }
            for (int b = 0; b < NBUCKET; b++) {
                tot[m].b[b] += thr[i].h[m].b[b];
            }
        }
        hb_late += thr[i].hb_late;
        behind += thr[i].ack_behind;
        acks += thr[i].acks;
        hbs += thr[i].heartbeats;
    }
    double took = now_s() - c.start;
    double gen_cpu = (sl_process_cpu_sec() - cpu0) / took;
    for (int i = 0; i < c.nch; i++) {
        sl_rpc_channel_free(c.ch[i]);
    }
    sl_rpc_shutdown();
    uint64_t errors = 0;
    double p99max = 0;
    for (int m = 0; m < M_COUNT; m++) {
        if (tot[m].calls == 0) {
            continue;
        }
        double p99 = hist_q_ms(&tot[m], 0.99);
        printf("method=%s calls=%" PRIu64 " errors=%" PRIu64
               " per_sec=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n",
               MNAME[m], tot[m].calls, tot[m].errors, (double)tot[m].calls / took,
               hist_q_ms(&tot[m], 0.5), p99, tot[m].max_us / 1000.0);
        errors += tot[m].errors;
        p99max = p99 > p99max ? p99 : p99max;
    }
    printf("summary workers=%d jobs=%d ack_rate=%.0f seconds=%.3f acks_per_sec=%.1f"
           " heartbeats_per_sec=%.1f hb_late=%" PRIu64 " ack_behind=%" PRIu64
           " errors=%" PRIu64 " p99_ms_max=%.3f gen_cpu=%.2f ack_interval_ms=%d\n",
           c.workers, c.jobs, c.ack_rate, took, (double)acks / took,
           (double)hbs / took, hb_late, behind, errors, p99max, gen_cpu,
           c.ack_interval_ms);
    return 0;
}
