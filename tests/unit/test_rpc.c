/* Unit tests for common/rpc*: a real server on 127.0.0.1:0 with a test unary
 * handler (RegisterWorker, Heartbeat) and a test stream handler (Fetch),
 * driven through the client half of the layer. Runs with CK_NOFORK: forking
 * after grpc_init hangs (gRPC's threads do not survive a fork). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/rpc/rpc.h"
#include "common/rpc/rpc_impl.h"
#include "proto/sluice.pb-c.h"
#include "tests/unit/fixtures.h"

#define M_REGISTER "/sluice.Dispatcher/RegisterWorker"
#define M_HEARTBEAT "/sluice.Dispatcher/Heartbeat"
#define M_FETCH "/sluice.Worker/Fetch"
#define BIG_BYTES (20u << 20)

/* Fetch behaviours, chosen by FetchRequest.job_id. */
enum {
    FETCH_CREDITS = 1,  /* send FETCH_N batches, only as many as credited */
    FETCH_FLOOD = 2,    /* send until send fails; record the error */
    FETCH_WAIT = 3,     /* block in recv forever; record the result */
    FETCH_BIG = 4,      /* one batch with a BIG_BYTES sample */
    FETCH_DETAILS = 5,  /* NOT_FOUND with details */
    FETCH_RECV_ALL = 6, /* read until half-close or error; record the result */
};
#define FETCH_N 10

/* Shared between the test thread and handler threads. */
typedef struct test_ctx_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stream_started;
    int stream_done;
    int stream_rc; /* last send/recv result seen by the stream handler */
    int gate_open; /* "gate" unary calls block until this is set */
    int gate_waiting;
    char peer[128];
    char tenant[SL_RPC_TENANT_MAX]; /* the last register call's (sl_rpc_reply_tenant) */
} test_ctx_t;

typedef struct fixture_s {
    test_ctx_t ctx;
    sl_rpc_server_t *srv;
    sl_rpc_channel_t *ch;
    char addr[64];
} fixture_t;

static fixture_t fx;

/* Directory with the test PKI made by make_pki() before grpc_init. */
static char pki_dir[64];
static const char *const pki_files[] = {
    "ca.key", "ca.pem", "ca.srl", "ca2.key", "ca2.pem", "ca2.srl", "server.key", "server.csr",
    "server.pem", "client.key", "client.csr", "client.pem", "rogue.pem", "server.ext",
    "client.ext",
};

static const char *pki(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", pki_dir, name);
    return buf;
}

/* A CA, a server certificate for localhost and 127.0.0.1, a client
 * certificate from the same CA and one from another CA. Runs before
 * grpc_init: system() forks. */
static int make_pki(void)
{
    snprintf(pki_dir, sizeof(pki_dir), "/tmp/sl_rpc_pki.XXXXXX");
    if (mkdtemp(pki_dir) == NULL) {
        return -1;
    }
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "set -e; cd '%s'; O=/usr/bin/openssl; K='-newkey ec -pkeyopt "
             "ec_paramgen_curve:prime256v1 -nodes';"
             "$O req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj /CN=sluice-test-ca;"
             "$O req -x509 $K -keyout ca2.key -out ca2.pem -days 2 -subj /CN=other-ca;"
             "$O req $K -keyout server.key -out server.csr -subj /CN=localhost;"
             "$O req $K -keyout client.key -out client.csr -subj /CN=client;"
             "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'"
             " > server.ext;"
             "printf 'extendedKeyUsage=clientAuth\n' > client.ext;"
             "$O x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
             " -extfile server.ext -out server.pem;"
             "$O x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
             " -extfile client.ext -out client.pem;"
             "$O x509 -req -in client.csr -CA ca2.pem -CAkey ca2.key -CAcreateserial -days 2"
             " -extfile client.ext -out rogue.pem",
             pki_dir);
    char full[4200];
    snprintf(full, sizeof(full), "( %s ) >/dev/null 2>&1", cmd);
    return system(full) == 0 ? 0 : -1;
}

static void remove_pki(void)
{
    char path[128];
    for (size_t i = 0; i < sizeof(pki_files) / sizeof(pki_files[0]); i++) {
        unlink(pki(pki_files[i], path, sizeof(path)));
    }
    rmdir(pki_dir);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void ctx_init(test_ctx_t *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void ctx_destroy(test_ctx_t *c)
{
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

static void ctx_reset_stream(test_ctx_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->stream_started = 0;
    c->stream_done = 0;
    c->stream_rc = 0;
    pthread_mutex_unlock(&c->mu);
}

static void ctx_record(test_ctx_t *c, int rc)
{
    pthread_mutex_lock(&c->mu);
    c->stream_rc = rc;
    c->stream_done = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Waits up to ms for the stream handler to record a result; returns it or
 * 12345 on timeout. */
static int ctx_wait_done(test_ctx_t *c, int ms)
{
    int64_t end = now_ms() + ms;
    pthread_mutex_lock(&c->mu);
    while (!c->stream_done && now_ms() < end) {
        pthread_mutex_unlock(&c->mu);
        usleep(5000);
        pthread_mutex_lock(&c->mu);
    }
    int rc = c->stream_done ? c->stream_rc : 12345;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void ctx_wait_started(test_ctx_t *c)
{
    int64_t end = now_ms() + 5000;
    pthread_mutex_lock(&c->mu);
    while (!c->stream_started && now_ms() < end) {
        pthread_mutex_unlock(&c->mu);
        usleep(2000);
        pthread_mutex_lock(&c->mu);
    }
    ck_assert_int_eq(c->stream_started, 1);
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------ handlers */

static void on_register(void *ctx, const ProtobufCMessage *m, sl_rpc_reply_t *reply)
{
    test_ctx_t *t = ctx;
    const Sluice__RegisterWorkerRequest *req = (const Sluice__RegisterWorkerRequest *)m;
    if (strcmp(req->hostname, "slow") == 0) {
        usleep(1000 * 1000);
    }
    if (strcmp(req->hostname, "gate") == 0) {
        pthread_mutex_lock(&t->mu);
        t->gate_waiting++;
        pthread_cond_broadcast(&t->cv);
        int64_t end = now_ms() + 10000;
        while (!t->gate_open && now_ms() < end) {
            pthread_mutex_unlock(&t->mu);
            usleep(2000);
            pthread_mutex_lock(&t->mu);
        }
        pthread_mutex_unlock(&t->mu);
    }
    if (strcmp(req->hostname, "noreply") == 0) {
        return;
    }
    if (strcmp(req->hostname, "error") == 0) {
        sl_rpc_reply_error(reply, SL_RPC_NOT_FOUND, "no worker %llu",
                           (unsigned long long)req->worker_id);
        return;
    }
    if (strcmp(req->hostname, "errno") == 0) {
        sl_rpc_reply_finish(reply, -ESTALE, NULL, req->worker_id == 0 ? NULL : "stale");
        return;
    }
    pthread_mutex_lock(&t->mu);
    snprintf(t->peer, sizeof(t->peer), "%s", sl_rpc_reply_peer(reply));
    snprintf(t->tenant, sizeof(t->tenant), "%s", sl_rpc_reply_tenant(reply));
    pthread_mutex_unlock(&t->mu);
    Sluice__RegisterWorkerResponse resp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    resp.worker_id = req->worker_id + 1000;
    resp.heartbeat_ms = req->threads;
    sl_rpc_reply_ok(reply, &resp.base);
}

/* Echoes req.failure (any size) back as jobs[0].spec_json. */
static void on_heartbeat(void *ctx, const ProtobufCMessage *m, sl_rpc_reply_t *reply)
{
    const Sluice__HeartbeatRequest *req = (const Sluice__HeartbeatRequest *)m;
    Sluice__HeartbeatResponse resp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    Sluice__JobSpec job = SLUICE__JOB_SPEC__INIT;
    Sluice__JobSpec *jobs[1] = {&job};
    resp.version = SL_PROTOCOL_VERSION;
    resp.known = 1;
    job.job_id = req->worker_id;
    job.spec_json = req->failure;
    resp.n_jobs = 1;
    resp.jobs = jobs;
    sl_rpc_reply_ok(reply, &resp.base);
}

static int send_batch(sl_rpc_stream_t *st, uint64_t job, uint64_t split, size_t data_len)
{
    Sluice__Batch b = SLUICE__BATCH__INIT;
    Sluice__Sample s = SLUICE__SAMPLE__INIT;
    Sluice__Sample *samples[1] = {&s};
    b.job_id = job;
    b.split_id = split;
    if (data_len > 0) {
        s.data.len = data_len;
        s.data.data = malloc(data_len);
        ck_assert_ptr_nonnull(s.data.data);
        for (size_t i = 0; i < data_len; i++) {
            s.data.data[i] = (uint8_t)(i * 7 + 3);
        }
        s.index = data_len;
        b.n_samples = 1;
        b.samples = samples;
    }
    int r = sl_rpc_stream_send(st, &b.base, 10000);
    free(s.data.data);
    return r;
}

static int on_fetch(void *ctx, sl_rpc_stream_t *st, const ProtobufCMessage *first)
{
    test_ctx_t *t = ctx;
    const Sluice__FetchRequest *req = (const Sluice__FetchRequest *)first;
    pthread_mutex_lock(&t->mu);
    t->stream_started = 1;
    pthread_mutex_unlock(&t->mu);

    switch (req->job_id) {
    case FETCH_CREDITS: {
        uint32_t credits = req->credits;
        for (uint64_t i = 0; i < FETCH_N; i++) {
            while (credits == 0) {
                ProtobufCMessage *m = NULL;
                int r = sl_rpc_stream_recv(st, &m, 10000);
                if (r != 0) {
                    ctx_record(t, r);
                    return r == 1 ? SL_RPC_OK : SL_RPC_CANCELLED;
                }
                credits += ((Sluice__FetchRequest *)m)->credits;
                protobuf_c_message_free_unpacked(m, NULL);
            }
            int r = send_batch(st, req->job_id, i, 0);
            if (r < 0) {
                ctx_record(t, r);
                return SL_RPC_CANCELLED;
            }
            credits--;
        }
        ctx_record(t, 0);
        return SL_RPC_OK;
    }
    case FETCH_FLOOD:
        for (uint64_t i = 0;; i++) {
            int r = send_batch(st, req->job_id, i, 1000);
            if (r < 0) {
                ctx_record(t, r);
                return SL_RPC_CANCELLED;
            }
        }
    case FETCH_WAIT: {
        ProtobufCMessage *m = NULL;
        int r = sl_rpc_stream_recv(st, &m, -1);
        if (m != NULL) {
            protobuf_c_message_free_unpacked(m, NULL);
        }
        ctx_record(t, r);
        return SL_RPC_OK;
    }
    case FETCH_BIG: {
        int r = send_batch(st, req->job_id, 0, BIG_BYTES);
        ctx_record(t, r);
        return r == 0 ? SL_RPC_OK : SL_RPC_CANCELLED;
    }
    case FETCH_DETAILS:
        sl_rpc_stream_set_details(st, "no job %llu here", (unsigned long long)req->job_id);
        return SL_RPC_NOT_FOUND;
    case FETCH_RECV_ALL:
        for (;;) {
            ProtobufCMessage *m = NULL;
            int r = sl_rpc_stream_recv(st, &m, 10000);
            if (r != 0) {
                ctx_record(t, r);
                return SL_RPC_OK;
            }
            protobuf_c_message_free_unpacked(m, NULL);
        }
    default:
        return SL_RPC_INVALID_ARGUMENT;
    }
}

/* ------------------------------------------------------------ fixture */

static sl_rpc_server_t *start_server(const char *listen, size_t max_msg, unsigned max_streams,
                                     const sl_rpc_security_t *sec, test_ctx_t *ctx, char *addr,
                                     size_t addrlen, int *ret_rc)
{
    char err[256] = "";
    sl_rpc_server_opts_t o = {
        .listen = listen,
        .max_msg_bytes = max_msg,
        .cq_threads = 2,
        .handler_threads = 4,
        .max_streams = max_streams,
        .security = sec,
    };
    sl_rpc_server_t *srv = sl_rpc_server_new(&o, err, sizeof(err));
    ck_assert_msg(srv != NULL, "server_new: %s", err);
    ck_assert_int_eq(sl_rpc_server_add_unary(srv, M_REGISTER,
                                             &sluice__register_worker_request__descriptor,
                                             on_register, ctx),
                     0);
    ck_assert_int_eq(sl_rpc_server_add_unary(srv, M_HEARTBEAT,
                                             &sluice__heartbeat_request__descriptor,
                                             on_heartbeat, ctx),
                     0);
    ck_assert_int_eq(sl_rpc_server_add_stream(srv, M_FETCH, &sluice__fetch_request__descriptor,
                                              on_fetch, ctx),
                     0);
    int r = sl_rpc_server_start(srv, addr, addrlen, err, sizeof(err));
    if (ret_rc != NULL) {
        *ret_rc = r;
        if (r < 0) {
            sl_rpc_server_free(srv);
            return NULL;
        }
    }
    ck_assert_msg(r == 0, "server_start: %s", err);
    return srv;
}

static sl_rpc_channel_t *open_channel(const char *addr, const sl_rpc_security_t *sec)
{
    char err[256] = "";
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, 0, sec, 0, err, sizeof(err));
    ck_assert_msg(ch != NULL, "channel_new: %s", err);
    return ch;
}

static void setup(void)
{
    ctx_init(&fx.ctx);
    fx.srv = start_server("127.0.0.1:0", 0, 0, NULL, &fx.ctx, fx.addr, sizeof(fx.addr), NULL);
    fx.ch = open_channel(fx.addr, NULL);
}

static void teardown(void)
{
    sl_rpc_channel_free(fx.ch);
    sl_rpc_server_shutdown(fx.srv, 2000);
    sl_rpc_server_free(fx.srv);
    ctx_destroy(&fx.ctx);
    memset(&fx, 0, sizeof(fx));
}

/* A loopback port nobody listens on (bound, read, closed). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static int call_register(sl_rpc_channel_t *ch, uint32_t version, const char *hostname,
                         uint64_t worker_id, int timeout_ms, int wfr, sl_rpc_status_t *st,
                         Sluice__RegisterWorkerResponse **ret)
{
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    req.version = version;
    req.address = (char *)"127.0.0.1:1";
    req.hostname = (char *)hostname;
    req.worker_id = worker_id;
    req.threads = 7;
    ProtobufCMessage *resp = NULL;
    int r = sl_rpc_unary(ch, M_REGISTER, &req.base, &sluice__register_worker_response__descriptor,
                         timeout_ms, wfr, &resp, st);
    if (ret != NULL) {
        *ret = (Sluice__RegisterWorkerResponse *)resp;
    } else if (resp != NULL) {
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    return r;
}

static sl_rpc_cstream_t *open_fetch(sl_rpc_channel_t *ch, uint32_t version, uint64_t job,
                                    uint32_t credits)
{
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = version;
    req.job_id = job;
    req.credits = credits;
    sl_rpc_cstream_t *cs = NULL;
    sl_rpc_status_t st;
    int r = sl_rpc_cstream_open(ch, M_FETCH, &req.base, &sluice__batch__descriptor, 30000, &cs,
                                &st);
    ck_assert_msg(r == 0, "open: %d %s", r, st.details);
    return cs;
}

static void grant(sl_rpc_cstream_t *cs, uint32_t credits)
{
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.credits = credits;
    ck_assert_int_eq(sl_rpc_cstream_send(cs, &req.base, 5000), 0);
}

static Sluice__Batch *recv_batch(sl_rpc_cstream_t *cs, int timeout_ms)
{
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st = {0};
    int r = sl_rpc_cstream_recv(cs, &m, timeout_ms, &st);
    ck_assert_msg(r == 0, "recv: %d %s %s", r, sl_rpc_code_name(st.code), st.details);
    return (Sluice__Batch *)m;
}

/* ------------------------------------------------------------ unary tests */

START_TEST(test_unary_roundtrip)
{
    sl_rpc_status_t st;
    Sluice__RegisterWorkerResponse *resp = NULL;
    int r = call_register(fx.ch, SL_PROTOCOL_VERSION, "h", 5, 5000, 0, &st, &resp);
    ck_assert_msg(r == 0, "%d %s", r, st.details);
    ck_assert_int_eq(st.code, SL_RPC_OK);
    ck_assert_uint_eq(resp->version, SL_PROTOCOL_VERSION);
    ck_assert_uint_eq(resp->worker_id, 1005);
    ck_assert_uint_eq(resp->heartbeat_ms, 7);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    pthread_mutex_lock(&fx.ctx.mu);
    ck_assert(strstr(fx.ctx.peer, "127.0.0.1") != NULL);
    pthread_mutex_unlock(&fx.ctx.mu);

    /* Handler errors and a handler that forgets to reply. */
    r = call_register(fx.ch, SL_PROTOCOL_VERSION, "error", 9, 5000, 0, &st, NULL);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_NOT_FOUND);
    ck_assert_str_eq(st.details, "no worker 9");
    r = call_register(fx.ch, SL_PROTOCOL_VERSION, "noreply", 9, 5000, 0, &st, NULL);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_INTERNAL);
    /* sl_rpc_reply_finish: the errno's status; no details -> the code's name. */
    r = call_register(fx.ch, SL_PROTOCOL_VERSION, "errno", 9, 5000, 0, &st, NULL);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_FAILED_PRECONDITION);
    ck_assert_str_eq(st.details, "stale");
    r = call_register(fx.ch, SL_PROTOCOL_VERSION, "errno", 0, 5000, 0, &st, NULL);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_str_eq(st.details, "FAILED_PRECONDITION");
}
END_TEST

typedef struct worker_arg_s {
    sl_rpc_channel_t *ch;
    int id;
    int ok;
} worker_arg_t;

static void *unary_worker(void *p)
{
    worker_arg_t *w = p;
    for (int i = 0; i < 200; i++) {
        sl_rpc_status_t st;
        Sluice__RegisterWorkerResponse *resp = NULL;
        uint64_t id = (uint64_t)w->id * 100000 + (uint64_t)i;
        if (call_register(w->ch, SL_PROTOCOL_VERSION, "h", id, 10000, 0, &st, &resp) == 0) {
            if (resp->worker_id == id + 1000) {
                w->ok++;
            }
            protobuf_c_message_free_unpacked(&resp->base, NULL);
        }
    }
    return NULL;
}

START_TEST(test_unary_concurrent)
{
    pthread_t t[4];
    worker_arg_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_arg_t){fx.ch, i + 1, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, unary_worker, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(w[i].ok, 200);
    }
}
END_TEST

typedef struct gate_arg_s {
    sl_rpc_channel_t *ch;
    int rc;
    sl_rpc_status_t st;
} gate_arg_t;

static void *gate_caller(void *p)
{
    gate_arg_t *a = p;
    int rc = call_register(a->ch, SL_PROTOCOL_VERSION, "gate", 1, 20000, 0, &a->st, NULL);
    __atomic_store_n(&a->rc, rc, __ATOMIC_SEQ_CST); /* polled by the test thread */
    return NULL;
}

START_TEST(test_unary_queue_full)
{
    /* One handler thread blocked, its queue (64) full: the rest are refused
     * with RESOURCE_EXHAUSTED at once, and everything queued still runs. */
    enum { CALLS = 72 };
    test_ctx_t ctx;
    ctx_init(&ctx);
    char addr[64], err[128];
    sl_rpc_server_opts_t o = {.listen = "127.0.0.1:0", .handler_threads = 1};
    sl_rpc_server_t *srv = sl_rpc_server_new(&o, err, sizeof(err));
    ck_assert_ptr_nonnull(srv);
    ck_assert_int_eq(sl_rpc_server_add_unary(srv, M_REGISTER,
                                             &sluice__register_worker_request__descriptor,
                                             on_register, &ctx),
                     0);
    ck_assert_int_eq(sl_rpc_server_start(srv, addr, sizeof(addr), err, sizeof(err)), 0);
    sl_rpc_channel_t *ch = open_channel(addr, NULL);
    pthread_t t[CALLS];
    gate_arg_t *a = calloc(CALLS, sizeof(*a));
    for (int i = 0; i < CALLS; i++) {
        a[i].ch = ch;
        ck_assert_int_eq(pthread_create(&t[i], NULL, gate_caller, &a[i]), 0);
    }
    /* Refusals come back while the gate is still closed. */
    int64_t end = now_ms() + 10000;
    int refused = 0;
    while (now_ms() < end) {
        refused = 0;
        for (int i = 0; i < CALLS; i++) {
            refused += __atomic_load_n(&a[i].rc, __ATOMIC_SEQ_CST) == -ECOMM;
        }
        if (refused >= CALLS - 65) {
            break;
        }
        usleep(5000);
    }
    ck_assert_int_ge(refused, CALLS - 65);
    pthread_mutex_lock(&ctx.mu);
    ctx.gate_open = 1;
    pthread_mutex_unlock(&ctx.mu);
    int ok = 0;
    for (int i = 0; i < CALLS; i++) {
        pthread_join(t[i], NULL);
        if (a[i].rc == 0) {
            ok++;
        } else {
            ck_assert_int_eq(a[i].st.code, SL_RPC_RESOURCE_EXHAUSTED);
        }
    }
    ck_assert_int_ge(ok, 64);
    ck_assert_int_le(ok, 65);
    free(a);
    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);
    ctx_destroy(&ctx);
}
END_TEST

START_TEST(test_unknown_method)
{
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    int64_t t0 = now_ms();
    int r = sl_rpc_unary(fx.ch, "/sluice.Nope/Missing", &req.base,
                         &sluice__register_worker_response__descriptor, 5000, 0, &resp, &st);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNIMPLEMENTED);
    ck_assert(strstr(st.details, "/sluice.Nope/Missing") != NULL);
    ck_assert_int_lt(now_ms() - t0, 1000);
    ck_assert_ptr_null(resp);
}
END_TEST

START_TEST(test_wrong_version)
{
    sl_rpc_status_t st;
    int r = call_register(fx.ch, 7, "h", 1, 5000, 0, &st, NULL);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_FAILED_PRECONDITION);
    ck_assert_str_eq(st.details, "protocol version 7, this server speaks 1");
    /* A missing version is version 0. */
    r = call_register(fx.ch, 0, "h", 1, 5000, 0, &st, NULL);
    ck_assert_int_eq(st.code, SL_RPC_FAILED_PRECONDITION);
    ck_assert(strstr(st.details, "protocol version 0") != NULL);
}
END_TEST

START_TEST(test_garbage_request)
{
    /* Field 1 as length-delimited with a length far past the end. */
    static const unsigned char garbage[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    sl_rpc_status_t st;
    int r = sl_rpc_unary_bytes(fx.ch, M_REGISTER, garbage, sizeof(garbage), 5000, 0, NULL, NULL,
                               &st);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_INVALID_ARGUMENT);
    ck_assert(strstr(st.details, "RegisterWorkerRequest") != NULL);
    /* An empty message unpacks (all defaults) and fails the version check. */
    r = sl_rpc_unary_bytes(fx.ch, M_REGISTER, "", 0, 5000, 0, NULL, NULL, &st);
    ck_assert_int_eq(st.code, SL_RPC_FAILED_PRECONDITION);
    /* The server is fine afterwards. */
    ck_assert_int_eq(call_register(fx.ch, SL_PROTOCOL_VERSION, "h", 1, 5000, 0, &st, NULL), 0);
}
END_TEST

START_TEST(test_oversized_message)
{
    test_ctx_t ctx;
    ctx_init(&ctx);
    char addr[64];
    sl_rpc_server_t *srv =
        start_server("127.0.0.1:0", 1 << 20, 0, NULL, &ctx, addr, sizeof(addr), NULL);
    sl_rpc_channel_t *ch = open_channel(addr, NULL);

    Sluice__HeartbeatRequest req = SLUICE__HEARTBEAT_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    size_t n = 2u << 20;
    req.failure = malloc(n + 1);
    memset(req.failure, 'x', n);
    req.failure[n] = '\0';
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    int r = sl_rpc_unary(ch, M_HEARTBEAT, &req.base, &sluice__heartbeat_response__descriptor, 5000,
                         0, &resp, &st);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_msg(st.code == SL_RPC_RESOURCE_EXHAUSTED, "%s %s", sl_rpc_code_name(st.code),
                  st.details);
    /* Still serving, on the same channel. */
    req.failure[100] = '\0';
    r = sl_rpc_unary(ch, M_HEARTBEAT, &req.base, &sluice__heartbeat_response__descriptor, 5000, 0,
                     &resp, &st);
    ck_assert_msg(r == 0, "%s", st.details);
    protobuf_c_message_free_unpacked(resp, NULL);
    free(req.failure);

    /* A reply over the client's limit is refused by the client. */
    sl_rpc_channel_t *small = NULL;
    char err[128];
    small = sl_rpc_channel_new(fx.addr, 1000, NULL, 1, err, sizeof(err));
    ck_assert_ptr_nonnull(small);
    Sluice__HeartbeatRequest req2 = SLUICE__HEARTBEAT_REQUEST__INIT;
    req2.version = SL_PROTOCOL_VERSION;
    char buf[901];
    memset(buf, 'y', 900);
    buf[900] = '\0';
    req2.failure = buf;
    r = sl_rpc_unary(small, M_HEARTBEAT, &req2.base, &sluice__heartbeat_response__descriptor,
                     5000, 0, &resp, &st);
    ck_assert_int_eq(r, 0);
    protobuf_c_message_free_unpacked(resp, NULL);
    ck_assert_int_eq(sl_rpc_server_add_unary(srv, "/x/y", &sluice__heartbeat_request__descriptor,
                                             on_heartbeat, NULL),
                     -EBUSY);
    sl_rpc_channel_free(small);
    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);
    ctx_destroy(&ctx);
}
END_TEST

START_TEST(test_big_roundtrip)
{
    /* 20 MB both ways through a unary call... */
    Sluice__HeartbeatRequest req = SLUICE__HEARTBEAT_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.worker_id = 77;
    req.failure = malloc(BIG_BYTES + 1);
    for (size_t i = 0; i < BIG_BYTES; i++) {
        req.failure[i] = (char)('a' + i % 26);
    }
    req.failure[BIG_BYTES] = '\0';
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    int r = sl_rpc_unary(fx.ch, M_HEARTBEAT, &req.base, &sluice__heartbeat_response__descriptor,
                         20000, 0, &m, &st);
    ck_assert_msg(r == 0, "%s %s", sl_rpc_code_name(st.code), st.details);
    Sluice__HeartbeatResponse *resp = (Sluice__HeartbeatResponse *)m;
    ck_assert_uint_eq(resp->n_jobs, 1);
    ck_assert_uint_eq(resp->jobs[0]->job_id, 77);
    ck_assert_uint_eq(strlen(resp->jobs[0]->spec_json), BIG_BYTES);
    ck_assert(memcmp(resp->jobs[0]->spec_json, req.failure, BIG_BYTES) == 0);
    protobuf_c_message_free_unpacked(m, NULL);
    free(req.failure);

    /* ... and down a stream, as image batches travel. */
    sl_rpc_cstream_t *cs = open_fetch(fx.ch, SL_PROTOCOL_VERSION, FETCH_BIG, 1);
    Sluice__Batch *b = recv_batch(cs, 20000);
    ck_assert_uint_eq(b->n_samples, 1);
    ck_assert_uint_eq(b->samples[0]->data.len, BIG_BYTES);
    for (size_t i = 0; i < BIG_BYTES; i += 4099) {
        ck_assert_uint_eq(b->samples[0]->data.data[i], (uint8_t)(i * 7 + 3));
    }
    protobuf_c_message_free_unpacked(&b->base, NULL);
    ProtobufCMessage *end = NULL;
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &end, 5000, &st), 1);
    ck_assert_int_eq(st.code, SL_RPC_OK);
    sl_rpc_cstream_free(cs);
}
END_TEST

START_TEST(test_deadline_exceeded)
{
    sl_rpc_status_t st;
    int64_t t0 = now_ms();
    int r = call_register(fx.ch, SL_PROTOCOL_VERSION, "slow", 1, 200, 0, &st, NULL);
    int64_t dt = now_ms() - t0;
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_DEADLINE_EXCEEDED);
    ck_assert_int_ge(dt, 150);
    ck_assert_int_lt(dt, 900);
}
END_TEST

START_TEST(test_server_down)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
    sl_rpc_channel_t *ch = open_channel(addr, NULL);
    sl_rpc_status_t st;
    int64_t t0 = now_ms();
    int r = call_register(ch, SL_PROTOCOL_VERSION, "h", 1, 5000, 0, &st, NULL);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAVAILABLE);
    ck_assert_int_lt(now_ms() - t0, 1000);

    /* A stream fails at open. */
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    sl_rpc_cstream_t *cs = NULL;
    r = sl_rpc_cstream_open(ch, M_FETCH, &req.base, &sluice__batch__descriptor, 5000, &cs, &st);
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAVAILABLE);
    ck_assert_ptr_null(cs);
    sl_rpc_channel_free(ch);
}
END_TEST

typedef struct wfr_arg_s {
    sl_rpc_channel_t *ch;
    int rc;
    sl_rpc_status_t st;
} wfr_arg_t;

static void *wfr_caller(void *p)
{
    wfr_arg_t *a = p;
    a->rc = call_register(a->ch, SL_PROTOCOL_VERSION, "h", 1, 10000, 1, &a->st, NULL);
    return NULL;
}

START_TEST(test_wait_for_ready)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
    sl_rpc_channel_t *ch = open_channel(addr, NULL);
    sl_rpc_status_t st;
    int64_t t0 = now_ms();
    int r = call_register(ch, SL_PROTOCOL_VERSION, "h", 1, 300, 1, &st, NULL);
    int64_t dt = now_ms() - t0;
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_DEADLINE_EXCEEDED);
    ck_assert_int_ge(dt, 250);

    /* The server comes up while the call waits: the call succeeds. */
    wfr_arg_t a = {ch, 99, {0}};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wfr_caller, &a), 0);
    usleep(300 * 1000);
    test_ctx_t ctx;
    ctx_init(&ctx);
    char bound[64];
    sl_rpc_server_t *srv = start_server(addr, 0, 0, NULL, &ctx, bound, sizeof(bound), NULL);
    ck_assert_str_eq(bound, addr);
    pthread_join(t, NULL);
    ck_assert_msg(a.rc == 0, "%s %s", sl_rpc_code_name(a.st.code), a.st.details);
    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);
    ctx_destroy(&ctx);
}
END_TEST

START_TEST(test_port_in_use)
{
    test_ctx_t ctx;
    ctx_init(&ctx);
    int rc = 0;
    char addr[64];
    sl_rpc_server_t *srv = start_server(fx.addr, 0, 0, NULL, &ctx, addr, sizeof(addr), &rc);
    ck_assert_int_eq(rc, -EADDRINUSE);
    ck_assert_ptr_null(srv);
    /* The first server is unaffected. */
    sl_rpc_status_t st;
    ck_assert_int_eq(call_register(fx.ch, SL_PROTOCOL_VERSION, "h", 1, 5000, 0, &st, NULL), 0);
    /* A bad address is not "in use". */
    srv = start_server("no-such-host.invalid:0", 0, 0, NULL, &ctx, addr, sizeof(addr), &rc);
    ck_assert_ptr_null(srv);
    ck_assert_int_ne(rc, -EADDRINUSE);
    ck_assert_int_lt(rc, 0);
    ctx_destroy(&ctx);
}
END_TEST

START_TEST(test_restart_many)
{
    for (int i = 0; i < 10; i++) {
        test_ctx_t ctx;
        ctx_init(&ctx);
        char addr[64];
        sl_rpc_server_t *srv =
            start_server("127.0.0.1:0", 0, 0, NULL, &ctx, addr, sizeof(addr), NULL);
        sl_rpc_channel_t *ch = open_channel(addr, NULL);
        sl_rpc_status_t st;
        ck_assert_int_eq(call_register(ch, SL_PROTOCOL_VERSION, "h", 1, 5000, 0, &st, NULL), 0);
        if (i % 2 == 0) {
            sl_rpc_server_shutdown(srv, 100);
            sl_rpc_server_shutdown(srv, 100); /* idempotent */
        }
        sl_rpc_channel_free(ch);
        sl_rpc_server_free(srv);
        ctx_destroy(&ctx);
    }
    /* Never started. */
    sl_rpc_server_opts_t o = {.listen = "127.0.0.1:0"};
    sl_rpc_server_t *srv = sl_rpc_server_new(&o, NULL, 0);
    ck_assert_ptr_nonnull(srv);
    ck_assert_int_eq(sl_rpc_server_add_unary(srv, M_REGISTER,
                                             &sluice__batch__descriptor, on_register, NULL),
                     -EINVAL); /* Batch has no `uint32 version = 1` */
    sl_rpc_server_free(srv);
    sl_rpc_server_free(NULL);
    sl_rpc_channel_free(NULL);
    sl_rpc_cstream_free(NULL);
}
END_TEST

/* ------------------------------------------------------------ stream tests */

START_TEST(test_stream_credits)
{
    sl_rpc_cstream_t *cs = open_fetch(fx.ch, SL_PROTOCOL_VERSION, FETCH_CREDITS, 2);
    uint64_t next = 0;
    for (int i = 0; i < 2; i++) {
        Sluice__Batch *b = recv_batch(cs, 5000);
        ck_assert_uint_eq(b->split_id, next++);
        protobuf_c_message_free_unpacked(&b->base, NULL);
    }
    /* Out of credits: nothing more comes; the read stays pending. */
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 300, &st), -ETIMEDOUT);
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 0, &st), -ETIMEDOUT);
    grant(cs, 3);
    for (int i = 0; i < 3; i++) {
        Sluice__Batch *b = recv_batch(cs, 5000);
        ck_assert_uint_eq(b->split_id, next++);
        protobuf_c_message_free_unpacked(&b->base, NULL);
    }
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 200, &st), -ETIMEDOUT);
    grant(cs, 1);
    grant(cs, 100); /* two sends back to back: the second waits for the first */
    while (next < FETCH_N) {
        Sluice__Batch *b = recv_batch(cs, 5000);
        ck_assert_uint_eq(b->split_id, next++);
        protobuf_c_message_free_unpacked(&b->base, NULL);
    }
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 5000, &st), 1);
    ck_assert_int_eq(st.code, SL_RPC_OK);
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 5000, &st), 1); /* stays ended */
    Sluice__FetchRequest more = SLUICE__FETCH_REQUEST__INIT;
    more.version = SL_PROTOCOL_VERSION;
    ck_assert_int_eq(sl_rpc_cstream_send(cs, &more.base, 0), -EPIPE);
    sl_rpc_cstream_free(cs);
    ck_assert_int_eq(ctx_wait_done(&fx.ctx, 5000), 0);
}
END_TEST

START_TEST(test_stream_status_details)
{
    sl_rpc_cstream_t *cs = open_fetch(fx.ch, SL_PROTOCOL_VERSION, FETCH_DETAILS, 1);
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 5000, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_NOT_FOUND);
    ck_assert_str_eq(st.details, "no job 5 here");
    sl_rpc_cstream_free(cs);
}
END_TEST

START_TEST(test_stream_client_cancel)
{
    sl_rpc_cstream_t *cs = open_fetch(fx.ch, SL_PROTOCOL_VERSION, FETCH_FLOOD, 0);
    for (int i = 0; i < 3; i++) {
        Sluice__Batch *b = recv_batch(cs, 5000);
        ck_assert_uint_eq(b->split_id, (uint64_t)i);
        protobuf_c_message_free_unpacked(&b->base, NULL);
    }
    sl_rpc_cstream_cancel(cs);
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    int r;
    /* Messages already received may still come out before the end. */
    while ((r = sl_rpc_cstream_recv(cs, &m, 5000, &st)) == 0) {
        protobuf_c_message_free_unpacked(m, NULL);
    }
    ck_assert_int_eq(r, -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_CANCELLED);
    sl_rpc_cstream_free(cs);
    ck_assert_int_eq(ctx_wait_done(&fx.ctx, 5000), -ECANCELED);
}
END_TEST

START_TEST(test_stream_free_while_open)
{
    /* Freeing an open stream (no cancel first) cancels it. */
    sl_rpc_cstream_t *cs = open_fetch(fx.ch, SL_PROTOCOL_VERSION, FETCH_WAIT, 0);
    ctx_wait_started(&fx.ctx);
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 50, &st), -ETIMEDOUT); /* leaves a read posted */
    sl_rpc_cstream_free(cs);
    ck_assert_int_eq(ctx_wait_done(&fx.ctx, 5000), -ECANCELED);
}
END_TEST

START_TEST(test_stream_half_close_and_bad_messages)
{
    /* A later message with the wrong version ends the call with
     * FAILED_PRECONDITION; the handler saw -EBADMSG. */
    sl_rpc_cstream_t *cs = open_fetch(fx.ch, SL_PROTOCOL_VERSION, FETCH_RECV_ALL, 0);
    grant(cs, 1);
    Sluice__FetchRequest bad = SLUICE__FETCH_REQUEST__INIT;
    bad.version = 3;
    ck_assert_int_eq(sl_rpc_cstream_send(cs, &bad.base, 5000), 0);
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 5000, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_FAILED_PRECONDITION);
    ck_assert_str_eq(st.details, "protocol version 3, this server speaks 1");
    sl_rpc_cstream_free(cs);
    ck_assert_int_eq(ctx_wait_done(&fx.ctx, 5000), -EBADMSG);

    /* The first message with the wrong version: refused before the handler. */
    ctx_reset_stream(&fx.ctx);
    cs = open_fetch(fx.ch, 2, FETCH_CREDITS, 1);
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 5000, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_FAILED_PRECONDITION);
    ck_assert_str_eq(st.details, "protocol version 2, this server speaks 1");
    sl_rpc_cstream_free(cs);
    pthread_mutex_lock(&fx.ctx.mu);
    ck_assert_int_eq(fx.ctx.stream_started, 0);
    pthread_mutex_unlock(&fx.ctx.mu);
}
END_TEST

START_TEST(test_stream_server_shutdown)
{
    sl_rpc_cstream_t *cs = open_fetch(fx.ch, SL_PROTOCOL_VERSION, FETCH_WAIT, 0);
    ctx_wait_started(&fx.ctx);
    int64_t t0 = now_ms();
    sl_rpc_server_shutdown(fx.srv, 200);
    int64_t dt = now_ms() - t0;
    ck_assert_int_ge(dt, 150);
    ck_assert_int_lt(dt, 2000);
    ck_assert_int_eq(ctx_wait_done(&fx.ctx, 0), -ECANCELED);
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 5000, &st), -ECOMM);
    ck_assert_msg(st.code == SL_RPC_CANCELLED || st.code == SL_RPC_UNAVAILABLE, "%s %s",
                  sl_rpc_code_name(st.code), st.details);
    sl_rpc_cstream_free(cs);
    /* New calls fail fast. */
    ck_assert_int_eq(call_register(fx.ch, SL_PROTOCOL_VERSION, "h", 1, 2000, 0, &st, NULL), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAVAILABLE);
}
END_TEST

START_TEST(test_stream_limit)
{
    test_ctx_t ctx;
    ctx_init(&ctx);
    char addr[64];
    sl_rpc_server_t *srv = start_server("127.0.0.1:0", 0, 1, NULL, &ctx, addr, sizeof(addr), NULL);
    sl_rpc_channel_t *ch = open_channel(addr, NULL);
    sl_rpc_cstream_t *a = open_fetch(ch, SL_PROTOCOL_VERSION, FETCH_WAIT, 0);
    ctx_wait_started(&ctx);
    sl_rpc_cstream_t *b = open_fetch(ch, SL_PROTOCOL_VERSION, FETCH_WAIT, 0);
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    ck_assert_int_eq(sl_rpc_cstream_recv(b, &m, 5000, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_RESOURCE_EXHAUSTED);
    sl_rpc_cstream_free(b);
    sl_rpc_cstream_free(a);
    ck_assert_int_eq(ctx_wait_done(&ctx, 5000), -ECANCELED);
    /* The slot is free again once the handler thread has ended (shortly
     * after it recorded its result). */
    ctx_reset_stream(&ctx);
    Sluice__Batch *batch = NULL;
    for (int tries = 0; batch == NULL; tries++) {
        ck_assert_int_lt(tries, 100);
        a = open_fetch(ch, SL_PROTOCOL_VERSION, FETCH_CREDITS, 100);
        int r = sl_rpc_cstream_recv(a, &m, 5000, &st);
        if (r == 0) {
            batch = (Sluice__Batch *)m;
            break;
        }
        ck_assert_int_eq(st.code, SL_RPC_RESOURCE_EXHAUSTED);
        sl_rpc_cstream_free(a);
        usleep(10 * 1000);
    }
    ck_assert_uint_eq(batch->split_id, 0);
    protobuf_c_message_free_unpacked(&batch->base, NULL);
    for (int i = 1; i < FETCH_N; i++) {
        batch = recv_batch(a, 5000);
        ck_assert_uint_eq(batch->split_id, (uint64_t)i);
        protobuf_c_message_free_unpacked(&batch->base, NULL);
    }
    ck_assert_int_eq(sl_rpc_cstream_recv(a, &m, 5000, &st), 1);
    sl_rpc_cstream_free(a);
    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);
    ctx_destroy(&ctx);
}
END_TEST


/* ------------------------------------------------------------ security */

static int secure_call(const char *addr, const sl_rpc_security_t *sec, sl_rpc_status_t *st)
{
    char err[256] = "";
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, 0, sec, 1, err, sizeof(err));
    ck_assert_msg(ch != NULL, "channel_new: %s", err);
    int r = call_register(ch, SL_PROTOCOL_VERSION, "h", 1, 5000, 0, st, NULL);
    sl_rpc_channel_free(ch);
    return r;
}

/* Tenants: named tokens admitted besides the server's own, each call knowing
 * which; the set replaced at run time (a revoked token refused at once). */
START_TEST(test_tenant_tokens)
{
    test_ctx_t ctx;
    ctx_init(&ctx);
    char addr[64], err[256];
    sl_rpc_security_t ssec = {.token = "cluster-token"};
    sl_rpc_server_t *srv =
        start_server("127.0.0.1:0", 0, 0, &ssec, &ctx, addr, sizeof(addr), NULL);
    sl_rpc_tenant_t two[] = {{"vision", "vision-token"}, {"speech", "speech-token"}};
    ck_assert_int_eq(sl_rpc_server_set_tenants(srv, two, 2, err, sizeof(err)), 0);
    sl_rpc_status_t st;
    sl_rpc_security_t cluster = {.token = "cluster-token"}, vision = {.token = "vision-token"},
                      speech = {.token = "speech-token"}, other = {.token = "other-token"};
    ck_assert_int_eq(secure_call(addr, &vision, &st), 0);
    ck_assert_str_eq(ctx.tenant, "vision");
    ck_assert_int_eq(secure_call(addr, &speech, &st), 0);
    ck_assert_str_eq(ctx.tenant, "speech");
    ck_assert_int_eq(secure_call(addr, &cluster, &st), 0);
    ck_assert_str_eq(ctx.tenant, "");
    ck_assert_int_eq(secure_call(addr, &other, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);
    ck_assert_int_eq(secure_call(addr, NULL, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);
    /* Revoke speech: refused from the next call on; vision still in. */
    ck_assert_int_eq(sl_rpc_server_set_tenants(srv, two, 1, err, sizeof(err)), 0);
    ck_assert_int_eq(secure_call(addr, &speech, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);
    ck_assert_int_eq(secure_call(addr, &vision, &st), 0);
    /* A bad set changes nothing. */
    sl_rpc_tenant_t bad[] = {{"", "x-token"}};
    ck_assert_int_ne(sl_rpc_server_set_tenants(srv, bad, 1, err, sizeof(err)), 0);
    ck_assert_int_eq(secure_call(addr, &vision, &st), 0);
    sl_rpc_server_free(srv);
    ctx_destroy(&ctx);

    /* A server without a token of its own but with tenants admits only them. */
    ctx_init(&ctx);
    srv = start_server("127.0.0.1:0", 0, 0, NULL, &ctx, addr, sizeof(addr), NULL);
    ck_assert_int_eq(secure_call(addr, NULL, &st), 0); /* open */
    ck_assert_int_eq(sl_rpc_server_set_tenants(srv, two, 2, err, sizeof(err)), 0);
    ck_assert_int_eq(secure_call(addr, NULL, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);
    ck_assert_int_eq(secure_call(addr, &vision, &st), 0);
    sl_rpc_server_free(srv);
    ctx_destroy(&ctx);
}
END_TEST

START_TEST(test_token)
{
    test_ctx_t ctx;
    ctx_init(&ctx);
    char addr[64];
    sl_rpc_security_t ssec = {.token = "s3cret"};
    sl_rpc_server_t *srv =
        start_server("127.0.0.1:0", 0, 0, &ssec, &ctx, addr, sizeof(addr), NULL);
    sl_rpc_status_t st;
    sl_rpc_security_t good = {.token = "s3cret"}, bad = {.token = "s3cre7"};
    ck_assert_int_eq(secure_call(addr, &good, &st), 0);
    ck_assert_int_eq(secure_call(addr, &bad, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);
    ck_assert_int_eq(secure_call(addr, NULL, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);

    /* Streams and unknown methods are checked too. */
    char err[128];
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, 0, &bad, 0, err, sizeof(err));
    ck_assert_ptr_nonnull(ch);
    sl_rpc_cstream_t *cs = open_fetch(ch, SL_PROTOCOL_VERSION, FETCH_CREDITS, 100);
    ProtobufCMessage *m = NULL;
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 5000, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);
    sl_rpc_cstream_free(cs);
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    ck_assert_int_eq(sl_rpc_unary(ch, "/no/such", &req.base,
                                  &sluice__register_worker_response__descriptor, 5000, 0, &m,
                                  &st),
                     -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);
    sl_rpc_channel_free(ch);
    ch = sl_rpc_channel_new(addr, 0, &good, 0, err, sizeof(err));
    cs = open_fetch(ch, SL_PROTOCOL_VERSION, FETCH_CREDITS, 100);
    for (int i = 0; i < FETCH_N; i++) {
        Sluice__Batch *b = recv_batch(cs, 5000);
        protobuf_c_message_free_unpacked(&b->base, NULL);
    }
    ck_assert_int_eq(sl_rpc_cstream_recv(cs, &m, 5000, &st), 1);
    sl_rpc_cstream_free(cs);
    sl_rpc_channel_free(ch);

    /* A token that cannot be a header value is refused up front. */
    sl_rpc_security_t nl = {.token = "a\nb"};
    ck_assert_ptr_null(sl_rpc_channel_new(addr, 0, &nl, 0, err, sizeof(err)));
    sl_rpc_server_free(srv);
    ctx_destroy(&ctx);
}
END_TEST

START_TEST(test_tls)
{
    char cert[128], key[128], ca[128], ca2[128], ccert[128], ckey[128], rogue[128];
    pki("server.pem", cert, sizeof(cert));
    pki("server.key", key, sizeof(key));
    pki("ca.pem", ca, sizeof(ca));
    pki("ca2.pem", ca2, sizeof(ca2));
    pki("client.pem", ccert, sizeof(ccert));
    pki("client.key", ckey, sizeof(ckey));
    pki("rogue.pem", rogue, sizeof(rogue));

    test_ctx_t ctx;
    ctx_init(&ctx);
    char addr[64];
    sl_rpc_security_t ssec = {.tls_cert = cert, .tls_key = key, .token = "tok"};
    sl_rpc_server_t *srv =
        start_server("127.0.0.1:0", 0, 0, &ssec, &ctx, addr, sizeof(addr), NULL);
    sl_rpc_status_t st;
    sl_rpc_security_t trust = {.tls_ca = ca, .token = "tok"};
    ck_assert_msg(secure_call(addr, &trust, &st) == 0, "%s %s", sl_rpc_code_name(st.code),
                  st.details);
    char local[80];
    snprintf(local, sizeof(local), "localhost:%s", strrchr(addr, ':') + 1);
    ck_assert_msg(secure_call(local, &trust, &st) == 0, "%s", st.details);
    /* TLS and the token are independent checks. */
    sl_rpc_security_t notok = {.tls_ca = ca};
    ck_assert_int_eq(secure_call(addr, &notok, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAUTHENTICATED);
    /* A plaintext client, or one trusting another CA, gets nowhere. */
    sl_rpc_security_t plain = {.token = "tok"}, other = {.tls_ca = ca2, .token = "tok"};
    ck_assert_int_eq(secure_call(addr, &plain, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAVAILABLE);
    ck_assert_int_eq(secure_call(addr, &other, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAVAILABLE);
    /* Big messages over TLS. */
    char err[256];
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, 0, &trust, 0, err, sizeof(err));
    sl_rpc_cstream_t *cs = open_fetch(ch, SL_PROTOCOL_VERSION, FETCH_BIG, 1);
    Sluice__Batch *b = recv_batch(cs, 20000);
    ck_assert_uint_eq(b->samples[0]->data.len, BIG_BYTES);
    protobuf_c_message_free_unpacked(&b->base, NULL);
    sl_rpc_cstream_free(cs);
    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);

    /* Mutual TLS: the server requires a client certificate from its CA. */
    sl_rpc_security_t msec = {.tls_cert = cert, .tls_key = key, .tls_ca = ca};
    srv = start_server("127.0.0.1:0", 0, 0, &msec, &ctx, addr, sizeof(addr), NULL);
    sl_rpc_security_t with = {.tls_ca = ca, .tls_cert = ccert, .tls_key = ckey};
    sl_rpc_security_t without = {.tls_ca = ca};
    sl_rpc_security_t bad = {.tls_ca = ca, .tls_cert = rogue, .tls_key = ckey};
    ck_assert_msg(secure_call(addr, &with, &st) == 0, "%s", st.details);
    ck_assert_int_eq(secure_call(addr, &without, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAVAILABLE);
    ck_assert_int_eq(secure_call(addr, &bad, &st), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_UNAVAILABLE);
    sl_rpc_server_free(srv);

    /* Configuration errors are reported, not crashed on. */
    sl_rpc_security_t nokey = {.tls_cert = cert};
    sl_rpc_server_opts_t o = {.listen = "127.0.0.1:0", .security = &nokey};
    ck_assert_ptr_null(sl_rpc_server_new(&o, err, sizeof(err)));
    ck_assert(strstr(err, "key") != NULL);
    sl_rpc_security_t missing = {.tls_cert = "/nonexistent.pem", .tls_key = key};
    o.security = &missing;
    ck_assert_ptr_null(sl_rpc_server_new(&o, err, sizeof(err)));
    ck_assert(strstr(err, "/nonexistent.pem") != NULL);
    sl_rpc_security_t cmissing = {.tls_ca = "/nonexistent-ca.pem"};
    ck_assert_ptr_null(sl_rpc_channel_new(addr, 0, &cmissing, 0, err, sizeof(err)));
    ck_assert(strstr(err, "/nonexistent-ca.pem") != NULL);
    ctx_destroy(&ctx);
}
END_TEST

/* ------------------------------------------------------------ status */

/* The one errno -> status table: what every handler's error becomes on the
 * wire. Clients act on some of these codes (NOT_FOUND: a job is gone;
 * INVALID_ARGUMENT: a usage error; UNAVAILABLE: retry), so a row that moves
 * changes behaviour. */
START_TEST(test_status_from_errno)
{
    static const struct {
        int rc, code;
    } rows[] = {
        {0, SL_RPC_OK},
        {-EINVAL, SL_RPC_INVALID_ARGUMENT},
        {-E2BIG, SL_RPC_INVALID_ARGUMENT},
        {-EFBIG, SL_RPC_INVALID_ARGUMENT},
        {-EBADMSG, SL_RPC_INVALID_ARGUMENT},
        {-ETIMEDOUT, SL_RPC_DEADLINE_EXCEEDED},
        {-ENOENT, SL_RPC_NOT_FOUND},
        {-EEXIST, SL_RPC_ALREADY_EXISTS},
        {-EACCES, SL_RPC_PERMISSION_DENIED},
        {-EPERM, SL_RPC_PERMISSION_DENIED},
        {-ENOMEM, SL_RPC_RESOURCE_EXHAUSTED},
        {-ENOBUFS, SL_RPC_RESOURCE_EXHAUSTED},
        {-ENOSPC, SL_RPC_RESOURCE_EXHAUSTED},
        {-ESTALE, SL_RPC_FAILED_PRECONDITION},
        {-EPROTO, SL_RPC_FAILED_PRECONDITION},
        {-ECANCELED, SL_RPC_CANCELLED},
        {-ENOSYS, SL_RPC_UNIMPLEMENTED},
        {-EIO, SL_RPC_UNAVAILABLE},
        {-EAGAIN, SL_RPC_UNAVAILABLE},
        {-ESHUTDOWN, SL_RPC_UNAVAILABLE},
        {-EKEYREJECTED, SL_RPC_UNAUTHENTICATED},
        {-EDOM, SL_RPC_INTERNAL},          /* not in the table */
        {SL_RPC_NOT_FOUND, SL_RPC_INTERNAL}, /* a status passed as an errno: a bug */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        ck_assert_msg(sl_rpc_status_from_errno(rows[i].rc) == rows[i].code, "errno %d: %s, want %s",
                      rows[i].rc, sl_rpc_code_name(sl_rpc_status_from_errno(rows[i].rc)),
                      sl_rpc_code_name(rows[i].code));
    }
    ck_assert_str_eq(sl_rpc_code_name(SL_RPC_UNAUTHENTICATED), "UNAUTHENTICATED");
    ck_assert_str_eq(sl_rpc_code_name(17), "UNKNOWN_CODE");
}
END_TEST

/* ------------------------------------------------------------ main */

/* LeakSanitizer hook: gRPC's c-ares resolver keeps 10 bytes after resolving
 * "localhost" (test_tls); that is libcares', not ours. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
    return "print_suppressions=0";
}
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libcares.so\n";
}

int main(void)
{
    int have_pki = make_pki() == 0;
    sl_rpc_init();
    Suite *s = suite_create("rpc");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_unary_roundtrip);
    tcase_add_test(tc, test_unary_concurrent);
    tcase_add_test(tc, test_unary_queue_full);
    tcase_add_test(tc, test_unknown_method);
    tcase_add_test(tc, test_wrong_version);
    tcase_add_test(tc, test_garbage_request);
    tcase_add_test(tc, test_oversized_message);
    tcase_add_test(tc, test_big_roundtrip);
    tcase_add_test(tc, test_deadline_exceeded);
    tcase_add_test(tc, test_server_down);
    tcase_add_test(tc, test_wait_for_ready);
    tcase_add_test(tc, test_port_in_use);
    tcase_add_test(tc, test_restart_many);
    tcase_add_test(tc, test_stream_credits);
    tcase_add_test(tc, test_stream_status_details);
    tcase_add_test(tc, test_stream_client_cancel);
    tcase_add_test(tc, test_stream_free_while_open);
    tcase_add_test(tc, test_stream_half_close_and_bad_messages);
    tcase_add_test(tc, test_stream_server_shutdown);
    tcase_add_test(tc, test_stream_limit);
    suite_add_tcase(s, tc);
    TCase *sec = tcase_create("security");
    tcase_set_timeout(sec, 60);
    tcase_add_test(sec, test_token);
    tcase_add_test(sec, test_tenant_tokens);
    if (have_pki) {
        tcase_add_test(sec, test_tls);
    } else {
        fprintf(stderr, "test_rpc: openssl could not make test certificates: TLS untested\n");
    }
    suite_add_tcase(s, sec);
    TCase *status = tcase_create("status");
    tcase_add_test(status, test_status_from_errno);
    suite_add_tcase(s, status);
    int rc = fx_run_suite(s, 1); /* no fork: gRPC is initialised */
    sl_rpc_shutdown();
    remove_pki();
    return rc == EXIT_SUCCESS && have_pki ? EXIT_SUCCESS : EXIT_FAILURE;
}
