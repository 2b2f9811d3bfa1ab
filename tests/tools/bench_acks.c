/* bench_acks: split acknowledgements per second at a real dispatcher, from
 * N client threads at once, for scripts/bench-journal-acks.
 *
 *   bench_acks TARGET [--threads N] [--seconds S]
 *
 * Each thread has its own connection and its own job, whose splits are all
 * the client's (offload "off": no worker needed). Until S seconds (default
 * 5) have passed it asks GetAssignment for the splits it holds and
 * acknowledges them one AckSplits call per split, as a client does when
 * its local share delivers them one by one; then closes the job. Against a
 * dispatcher with --journal every ack appends a record and is answered once
 * it is durable, so acks per second measure the journal's commit path.
 *
 * stdout: one line `threads=N acks=M seconds=S acks_per_sec=R`.
 * Exit 0; 1 when an RPC fails; 2 on usage. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/rpc/rpc.h"
#include "proto/sluice.pb-c.h"

/* Every job this tool submits uses one capability (docs/protocol.md). */
#define FX_JOB_SECRET "bench-job-secret-0123456789"

#define MAX_THREADS 64
#define CALL_MS 10000

/* One 100-epoch job of 1 Mi samples: far more splits than a run acks. */
#define SPEC                                                                                  \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 8, \"epochs\": 100,"          \
    " \"offload\": \"off\"}"
#define SAMPLES (1u << 20)

typedef struct bench_s {
    const char *target;
    double deadline; /* sl_mono_sec */
} bench_t;

typedef struct thr_s {
    const bench_t *b;
    int index;
    uint64_t acks;
    int failed;
    char err[600];
} thr_t;

/* One unary call; ret NULL: the answer is not wanted (freed here). */
static int call(sl_rpc_channel_t *ch, const char *method, const ProtobufCMessage *req,
                const ProtobufCMessageDescriptor *desc, ProtobufCMessage **ret, thr_t *t)
{
    sl_rpc_status_t st;
    ProtobufCMessage *m = NULL;
    if (sl_rpc_unary(ch, method, req, desc, CALL_MS, 1, &m, &st) == 0) {
        if (ret != NULL) {
            *ret = m;
        } else {
            protobuf_c_message_free_unpacked(m, NULL);
        }
        return 0;
    }
    snprintf(t->err, sizeof(t->err), "%s: %s: %s", method, sl_rpc_code_name(st.code),
             st.details);
    return -ECOMM;
}

static int submit(sl_rpc_channel_t *ch, thr_t *t, uint64_t *ret_job)
{
    char client_id[32];
    snprintf(client_id, sizeof(client_id), "bench-acks-%d", t->index);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = SPEC;
    req.spec_name = "bench-acks";
    req.num_samples = SAMPLES;
    req.client_id = client_id;
    ProtobufCMessage *m = NULL;
    int rc = call(ch, "/sluice.Dispatcher/SubmitJob", &req.base,
                  &sluice__submit_job_response__descriptor, &m, t);
    if (rc == 0) {
        *ret_job = ((Sluice__SubmitJobResponse *)m)->job_id;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return rc;
}

static int ack_one(sl_rpc_channel_t *ch, thr_t *t, uint64_t job, uint64_t split)
{
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    req.n_split_ids = 1;
    req.split_ids = &split;
    return call(ch, "/sluice.Dispatcher/AckSplits", &req.base,
                &sluice__ack_splits_response__descriptor, NULL, t);
}

/* Acks the client's own splits of one GetAssignment answer; *ret_n: how many. */
static int ack_assigned(sl_rpc_channel_t *ch, thr_t *t, uint64_t job, size_t *ret_n)
{
    Sluice__GetAssignmentRequest req = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    ProtobufCMessage *m = NULL;
    int rc = call(ch, "/sluice.Dispatcher/GetAssignment", &req.base,
                  &sluice__get_assignment_response__descriptor, &m, t);
    if (rc != 0) {
        return rc;
    }
    const Sluice__GetAssignmentResponse *resp = (const Sluice__GetAssignmentResponse *)m;
    size_t n = 0;
    for (size_t i = 0; i < resp->n_splits && rc == 0 && sl_mono_sec() < t->b->deadline; i++) {
        if (resp->splits[i]->worker_id == 0) {
            rc = ack_one(ch, t, job, resp->splits[i]->split_id);
            n += rc == 0;
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
    *ret_n = n;
    return rc;
}

static int close_job(sl_rpc_channel_t *ch, thr_t *t, uint64_t job)
{
    Sluice__CloseJobRequest req = SLUICE__CLOSE_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    return call(ch, "/sluice.Dispatcher/CloseJob", &req.base,
                &sluice__close_job_response__descriptor, NULL, t);
}

static void *run(void *arg)
{
    thr_t *t = arg;
    char err[256];
    sl_rpc_channel_t *ch = sl_rpc_channel_new(t->b->target, 0, NULL, 1, err, sizeof(err));
    if (ch == NULL) {
        snprintf(t->err, sizeof(t->err), "%s", err);
        t->failed = 1;
        return NULL;
    }
    uint64_t job = 0;
    int rc = submit(ch, t, &job);
    while (rc == 0 && sl_mono_sec() < t->b->deadline) {
        size_t n = 0;
        rc = ack_assigned(ch, t, job, &n);
        t->acks += n;
        if (rc == 0 && n == 0 && sl_mono_sec() < t->b->deadline) {
            snprintf(t->err, sizeof(t->err), "job %" PRIu64 ": nothing left to ack", job);
            rc = -ENOENT;
        }
    }
    if (job != 0 && close_job(ch, t, job) != 0 && rc == 0) {
        rc = -ECOMM;
    }
    t->failed = rc != 0;
    sl_rpc_channel_free(ch);
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_acks TARGET [--threads N] [--seconds S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        return usage();
    }
    int nthreads = 1;
    double seconds = 5;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            nthreads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else {
            return usage();
        }
    }
    if (nthreads < 1 || nthreads > MAX_THREADS || !(seconds > 0)) {
        return usage();
    }
    sl_rpc_init();
    static thr_t thr[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    double start = sl_mono_sec();
    bench_t b = {.target = argv[1], .deadline = start + seconds};
    for (int i = 0; i < nthreads; i++) {
        thr[i] = (thr_t){.b = &b, .index = i};
        if (pthread_create(&th[i], NULL, run, &thr[i]) != 0) {
            fprintf(stderr, "bench_acks: cannot start thread %d\n", i);
            return 1;
        }
    }
    uint64_t acks = 0;
    int failed = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        acks += thr[i].acks;
        if (thr[i].failed) {
            fprintf(stderr, "bench_acks: thread %d: %s\n", i, thr[i].err);
            failed = 1;
        }
    }
    double took = sl_mono_sec() - start;
    sl_rpc_shutdown();
    printf("threads=%d acks=%" PRIu64 " seconds=%.2f acks_per_sec=%.1f\n", nthreads, acks, took,
           (double)acks / took);
    return failed;
}
