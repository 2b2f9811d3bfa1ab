/* intruder: a client that holds a valid cluster token (or none) but not a
 * job's capability, and tries to act on that job anyway -- for
 * tests/integration/test_job_capability.sh.
 *
 *   intruder TARGET OP --job ID [--secret S] [--token-file F] [--timeout MS]
 *            [--splits N] [--spec FILE --job-name NAME --world-size W --rank R
 *             --samples N --fingerprint X]
 *
 * OP: fetch (TARGET is a worker: opens the job's Fetch stream with credits
 * and waits for one message), assign (GetAssignment), ack (AckSplits of
 * split ids 0..N-1, also as received and retried), rates (ReportRates),
 * close (CloseJob), join (SubmitJob as rank R of the multi-rank job NAME).
 *
 * stdout: one line `status=CODE details=TEXT` (CODE numeric; for fetch,
 * status=0 with got=N when a Batch arrived: the job leaked). Exit 0 when a
 * status came back, 1 on a local failure, 2 on usage. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/file.h"
#include "common/base/secret.h"
#include "common/rpc/rpc.h"
#include "proto/sluice.pb-c.h"

#define MAX_SPLITS 256

typedef struct intr_s {
    const char *target, *op, *secret, *token_file, *spec, *job_name;
    uint64_t job, samples, fingerprint;
    unsigned long timeout, splits, world, rank;
    char token[SL_SECRET_MAX];
} intr_t;

static int usage(void)
{
    fprintf(stderr, "usage: intruder TARGET fetch|assign|ack|rates|close|join --job ID "
                    "[--secret S] [--token-file F] [--timeout MS] [--splits N] [--spec FILE "
                    "--job-name NAME --world-size W --rank R --samples N --fingerprint X]\n");
    return 2;
}

static int parse_u64(const char *s, int base, uint64_t *ret)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || end == s || *end != '\0') {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int parse_args(int argc, char **argv, intr_t *o)
{
    if (argc < 3) {
        return -EINVAL;
    }
    o->target = argv[1];
    o->op = argv[2];
    o->timeout = 5000;
    o->splits = 64;
    for (int i = 3; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        uint64_t n = 0;
        int num = strcmp(k, "--fingerprint") == 0 ? parse_u64(v, 16, &n) : parse_u64(v, 10, &n);
        if (strcmp(k, "--secret") == 0) {
            o->secret = v;
        } else if (strcmp(k, "--token-file") == 0) {
            o->token_file = v;
        } else if (strcmp(k, "--spec") == 0) {
            o->spec = v;
        } else if (strcmp(k, "--job-name") == 0) {
            o->job_name = v;
        } else if (num < 0) {
            return -EINVAL;
        } else if (strcmp(k, "--job") == 0) {
            o->job = n;
        } else if (strcmp(k, "--timeout") == 0 && n > 0 && n <= 600000) {
            o->timeout = n;
        } else if (strcmp(k, "--splits") == 0 && n <= MAX_SPLITS) {
            o->splits = n;
        } else if (strcmp(k, "--world-size") == 0 && n <= 1024) {
            o->world = n;
        } else if (strcmp(k, "--rank") == 0 && n <= 1024) {
            o->rank = n;
        } else if (strcmp(k, "--samples") == 0) {
            o->samples = n;
        } else if (strcmp(k, "--fingerprint") == 0) {
            o->fingerprint = n;
        } else {
            return -EINVAL;
        }
    }
    return (argc - 3) % 2 == 0 ? 0 : -EINVAL;
}

/* Opens the Fetch stream and waits for its first message or its end. */
static int do_fetch(sl_rpc_channel_t *ch, const intr_t *o, sl_rpc_status_t *st, int *ret_got)
{
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = o->job;
    req.job_secret = (char *)o->secret;
    req.credits = 64;
    sl_rpc_cstream_t *cs = NULL;
    int rc = sl_rpc_cstream_open(ch, "/sluice.Worker/Fetch", &req.base, &sluice__batch__descriptor,
                                 (int)o->timeout, &cs, st);
    if (rc < 0) {
        return rc;
    }
    ProtobufCMessage *m = NULL;
    rc = sl_rpc_cstream_recv(cs, &m, (int)o->timeout, st);
    if (rc == 0) {
        *ret_got = 1;
        protobuf_c_message_free_unpacked(m, NULL);
        st->code = SL_RPC_OK;
        snprintf(st->details, sizeof(st->details), "a Batch of job %" PRIu64 " arrived",
                 o->job);
        rc = -ECOMM;
    } else if (rc == 1) {
        rc = -ECOMM; /* ended OK with nothing: st says so */
    } else if (rc == -ETIMEDOUT) {
        st->code = SL_RPC_DEADLINE_EXCEEDED;
        snprintf(st->details, sizeof(st->details), "no message and no end");
        rc = -ECOMM;
    }
    sl_rpc_cstream_free(cs);
    return rc;
}

static int do_join(sl_rpc_channel_t *ch, const intr_t *o, sl_rpc_status_t *st)
{
    char *json = NULL;
    size_t len = 0;
    char err[256];
    if (o->spec == NULL || o->job_name == NULL ||
        sl_file_read(o->spec, 1 << 20, &json, &len, err, sizeof(err)) != 0) {
        fprintf(stderr, "intruder: join needs --spec FILE and --job-name NAME\n");
        return -EINVAL;
    }
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = json;
    req.spec_name = (char *)"intruder.json";
    req.num_samples = o->samples;
    req.source_fingerprint = o->fingerprint;
    req.client_id = (char *)"intruder";
    req.world_size = (uint32_t)o->world;
    req.rank = (uint32_t)o->rank;
    req.job_name = (char *)o->job_name;
    req.job_secret = (char *)o->secret;
    ProtobufCMessage *resp = NULL;
    int rc = sl_rpc_unary(ch, "/sluice.Dispatcher/SubmitJob", &req.base,
                          &sluice__submit_job_response__descriptor, (int)o->timeout, 0, &resp,
                          st);
    free(json);
    if (rc == 0) {
        st->code = SL_RPC_OK;
        snprintf(st->details, sizeof(st->details), "joined as job %" PRIu64,
                 ((Sluice__SubmitJobResponse *)resp)->job_id);
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    return rc;
}

static int do_unary(sl_rpc_channel_t *ch, const intr_t *o, sl_rpc_status_t *st)
{
    uint64_t ids[MAX_SPLITS];
    for (size_t i = 0; i < o->splits; i++) {
        ids[i] = i;
    }
    Sluice__GetAssignmentRequest g = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    Sluice__AckSplitsRequest a = SLUICE__ACK_SPLITS_REQUEST__INIT;
    Sluice__ReportRatesRequest r = SLUICE__REPORT_RATES_REQUEST__INIT;
    Sluice__CloseJobRequest c = SLUICE__CLOSE_JOB_REQUEST__INIT;
    const ProtobufCMessage *req = NULL;
    const ProtobufCMessageDescriptor *rd = NULL;
    const char *method = NULL;
    if (strcmp(o->op, "assign") == 0) {
        g.version = SL_PROTOCOL_VERSION;
        g.job_id = o->job;
        g.job_secret = (char *)o->secret;
        req = &g.base;
        rd = &sluice__get_assignment_response__descriptor;
        method = "/sluice.Dispatcher/GetAssignment";
    } else if (strcmp(o->op, "ack") == 0) {
        /* Everything an ack can do to a job at once: done, received, retried. */
        a.version = SL_PROTOCOL_VERSION;
        a.job_id = o->job;
        a.job_secret = (char *)o->secret;
        a.n_split_ids = o->splits;
        a.split_ids = ids;
        a.n_received_split_ids = o->splits;
        a.received_split_ids = ids;
        a.n_retry_split_ids = o->splits;
        a.retry_split_ids = ids;
        a.retry_worker_id = 1;
        req = &a.base;
        rd = &sluice__ack_splits_response__descriptor;
        method = "/sluice.Dispatcher/AckSplits";
    } else if (strcmp(o->op, "rates") == 0) {
        r.version = SL_PROTOCOL_VERSION;
        r.job_id = o->job;
        r.job_secret = (char *)o->secret;
        r.delivered_per_sec = 1;
        r.consumer_rate = 1;
        req = &r.base;
        rd = &sluice__report_rates_response__descriptor;
        method = "/sluice.Dispatcher/ReportRates";
    } else if (strcmp(o->op, "close") == 0) {
        c.version = SL_PROTOCOL_VERSION;
        c.job_id = o->job;
        c.job_secret = (char *)o->secret;
        req = &c.base;
        rd = &sluice__close_job_response__descriptor;
        method = "/sluice.Dispatcher/CloseJob";
    } else {
        return -EINVAL;
    }
    ProtobufCMessage *resp = NULL;
    int rc = sl_rpc_unary(ch, method, req, rd, (int)o->timeout, 0, &resp, st);
    if (rc == 0) {
        st->code = SL_RPC_OK;
        snprintf(st->details, sizeof(st->details), "accepted");
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    return rc;
}

int main(int argc, char **argv)
{
    intr_t o = {0};
    if (parse_args(argc, argv, &o) < 0 || (o.job == 0 && strcmp(o.op, "join") != 0)) {
        return usage();
    }
    char err[256];
    sl_rpc_security_t sec = {0};
    if (o.token_file != NULL) {
        if (sl_secret_read(o.token_file, o.token, sizeof(o.token), err, sizeof(err)) != 0) {
            fprintf(stderr, "intruder: %s\n", err);
            return 1;
        }
        sec.token = o.token;
    }
    sl_rpc_init();
    sl_rpc_channel_t *ch = sl_rpc_channel_new(o.target, SL_RPC_DEFAULT_MAX_MSG, &sec, 1, err,
                                              sizeof(err));
    if (ch == NULL) {
        fprintf(stderr, "intruder: %s\n", err);
        sl_rpc_shutdown();
        return 1;
    }
    sl_rpc_status_t st = {0};
    int got = 0;
    int rc = strcmp(o.op, "fetch") == 0  ? do_fetch(ch, &o, &st, &got)
             : strcmp(o.op, "join") == 0 ? do_join(ch, &o, &st)
                                         : do_unary(ch, &o, &st);
    sl_rpc_channel_free(ch);
    sl_rpc_shutdown();
    if (rc == -EINVAL) {
        return usage();
    }
    if (rc != 0 && rc != -ECOMM) {
        fprintf(stderr, "intruder: local failure (%s): %s\n", strerror(-rc), st.details);
        return 1;
    }
    printf("status=%d details=%s%s\n", st.code, st.details, got ? " got=1" : "");
    return 0;
}
