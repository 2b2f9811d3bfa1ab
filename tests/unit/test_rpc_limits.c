/* Unit tests for the memory bounds of the rpc server (common/rpc) that a peer can
 * push against (docs/limits.md): max_recv_bytes (a larger request gets
 * RESOURCE_EXHAUSTED and the server stays up; replies may still be larger)
 * and max_queued_bytes (a request that would push the waiting unary
 * requests past the byte budget is refused; the queued ones still run).
 * Runs with CK_NOFORK: forking after grpc_init hangs (gRPC's threads do not
 * survive a fork). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/rpc/rpc.h"
#include "proto/sluice.pb-c.h"
#include "tests/unit/fixtures.h"

#define M_REGISTER "/sluice.Dispatcher/RegisterWorker"
#define M_HEARTBEAT "/sluice.Dispatcher/Heartbeat"
#define RECV_MAX (64u << 10)

typedef struct gate_s {
    pthread_mutex_t mu;
    int open;
    int waiting;
} gate_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* RegisterWorker: hostname "gate" blocks until the gate opens (at most 10 s);
 * the answer's worker_id is the hostname's length. */
static void on_register(void *ctx, const ProtobufCMessage *m, sl_rpc_reply_t *reply)
{
    gate_t *g = ctx;
    const Sluice__RegisterWorkerRequest *req = (const Sluice__RegisterWorkerRequest *)m;
    if (strcmp(req->hostname, "gate") == 0) {
        pthread_mutex_lock(&g->mu);
        g->waiting++;
        int64_t end = now_ms() + 10000;
        while (!g->open && now_ms() < end) {
            pthread_mutex_unlock(&g->mu);
            usleep(2000);
            pthread_mutex_lock(&g->mu);
        }
        pthread_mutex_unlock(&g->mu);
    }
    Sluice__RegisterWorkerResponse resp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    resp.worker_id = strlen(req->hostname);
    sl_rpc_reply_ok(reply, &resp.base);
}

/* Heartbeat: answers with a failure text of worker_id bytes (a reply larger
 * than the server may receive). */
static void on_heartbeat(void *ctx, const ProtobufCMessage *m, sl_rpc_reply_t *reply)
{
    (void)ctx;
    const Sluice__HeartbeatRequest *req = (const Sluice__HeartbeatRequest *)m;
    size_t n = (size_t)req->worker_id;
    char *text = malloc(n + 1);
    ck_assert_ptr_nonnull(text);
    memset(text, 'r', n);
    text[n] = '\0';
    Sluice__HeartbeatResponse resp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    Sluice__JobSpec job = SLUICE__JOB_SPEC__INIT;
    Sluice__JobSpec *jobs[1] = {&job};
    resp.version = SL_PROTOCOL_VERSION;
    job.spec_json = text;
    resp.n_jobs = 1;
    resp.jobs = jobs;
    sl_rpc_reply_ok(reply, &resp.base);
    free(text);
}

static sl_rpc_server_t *start_server(const sl_rpc_server_opts_t *o, gate_t *g, char *addr,
                                     size_t addrlen)
{
    char err[256];
    sl_rpc_server_t *srv = sl_rpc_server_new(o, err, sizeof(err));
    ck_assert_msg(srv != NULL, "%s", err);
    ck_assert_int_eq(sl_rpc_server_add_unary(srv, M_REGISTER,
                                             &sluice__register_worker_request__descriptor,
                                             on_register, g),
                     0);
    ck_assert_int_eq(sl_rpc_server_add_unary(srv, M_HEARTBEAT,
                                             &sluice__heartbeat_request__descriptor,
                                             on_heartbeat, g),
                     0);
    ck_assert_int_eq(sl_rpc_server_start(srv, addr, addrlen, err, sizeof(err)), 0);
    return srv;
}

static sl_rpc_channel_t *open_channel(const char *addr)
{
    char err[256];
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, 0, NULL, 0, err, sizeof(err));
    ck_assert_msg(ch != NULL, "%s", err);
    return ch;
}

/* RegisterWorker with a hostname of n bytes ("gate" when n == 0). */
static int call_register(sl_rpc_channel_t *ch, size_t n, sl_rpc_status_t *st,
                         uint64_t *ret_len)
{
    char *host = malloc(n + 5);
    ck_assert_ptr_nonnull(host);
    if (n == 0) {
        strcpy(host, "gate");
    } else {
        memset(host, 'h', n);
        host[n] = '\0';
    }
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.hostname = host;
    ProtobufCMessage *resp = NULL;
    int rc = sl_rpc_unary(ch, M_REGISTER, &req.base, &sluice__register_worker_response__descriptor,
                          20000, 0, &resp, st);
    if (rc == 0 && ret_len != NULL) {
        *ret_len = ((Sluice__RegisterWorkerResponse *)resp)->worker_id;
    }
    if (resp != NULL) {
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    free(host);
    return rc;
}

START_TEST(test_recv_limit)
{
    gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER, .open = 1};
    char addr[64];
    sl_rpc_server_opts_t o = {.listen = "127.0.0.1:0", .max_recv_bytes = RECV_MAX};
    sl_rpc_server_t *srv = start_server(&o, &g, addr, sizeof(addr));
    sl_rpc_channel_t *ch = open_channel(addr);
    sl_rpc_status_t st;
    uint64_t len = 0;

    /* Over the limit: refused by the transport, before any handler. */
    ck_assert_int_eq(call_register(ch, RECV_MAX + 1024, &st, NULL), -ECOMM);
    ck_assert_int_eq(st.code, SL_RPC_RESOURCE_EXHAUSTED);
    /* Just under it, and after the refusal: served (the server is alive). */
    ck_assert_int_eq(call_register(ch, RECV_MAX - 1024, &st, &len), 0);
    ck_assert_uint_eq(len, RECV_MAX - 1024);
    ck_assert_int_eq(call_register(ch, 10, &st, &len), 0);
    ck_assert_uint_eq(len, 10);

    /* Replies are bounded by max_msg_bytes, not max_recv_bytes. */
    Sluice__HeartbeatRequest hb = SLUICE__HEARTBEAT_REQUEST__INIT;
    hb.version = SL_PROTOCOL_VERSION;
    hb.worker_id = 16 * RECV_MAX;
    ProtobufCMessage *resp = NULL;
    ck_assert_int_eq(sl_rpc_unary(ch, M_HEARTBEAT, &hb.base,
                                  &sluice__heartbeat_response__descriptor, 20000, 0, &resp, &st),
                     0);
    const Sluice__HeartbeatResponse *r = (const Sluice__HeartbeatResponse *)resp;
    ck_assert_uint_eq(r->n_jobs, 1);
    ck_assert_uint_eq(strlen(r->jobs[0]->spec_json), 16 * RECV_MAX);
    protobuf_c_message_free_unpacked(resp, NULL);

    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);
}
END_TEST

typedef struct caller_s {
    sl_rpc_channel_t *ch;
    size_t n;
    int rc; /* 1 while running */
    sl_rpc_status_t st;
} caller_t;

static void *caller_main(void *p)
{
    caller_t *c = p;
    sl_rpc_status_t st;
    int rc = call_register(c->ch, c->n, &st, NULL);
    c->st = st;
    __atomic_store_n(&c->rc, rc, __ATOMIC_SEQ_CST); /* polled by the test thread */
    return NULL;
}

static void start_caller(caller_t *c, pthread_t *t, sl_rpc_channel_t *ch, size_t n)
{
    c->ch = ch;
    c->n = n;
    c->rc = 1;
    ck_assert_int_eq(pthread_create(t, NULL, caller_main, c), 0);
}

START_TEST(test_queue_byte_budget)
{
    /* One handler thread, blocked on the gate; a budget of 1.5 big requests.
     * Two big requests arrive together: one is queued, the other refused
     * with RESOURCE_EXHAUSTED naming the byte budget. A small one still
     * fits beside the queued one, and everything queued runs once the gate
     * opens. */
    enum { BIG = 600 << 10 };
    gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char addr[64];
    sl_rpc_server_opts_t o = {.listen = "127.0.0.1:0", .handler_threads = 1,
                              .max_recv_bytes = 1u << 20, .max_queued_bytes = BIG * 3 / 2};
    sl_rpc_server_t *srv = start_server(&o, &g, addr, sizeof(addr));
    sl_rpc_channel_t *ch = open_channel(addr);
    caller_t c[4];
    pthread_t t[4];

    start_caller(&c[0], &t[0], ch, 0); /* "gate": holds the only handler */
    int64_t end = now_ms() + 10000;
    for (;;) {
        pthread_mutex_lock(&g.mu);
        int w = g.waiting;
        pthread_mutex_unlock(&g.mu);
        if (w > 0 || now_ms() > end) {
            break;
        }
        usleep(2000);
    }
    ck_assert_int_eq(g.waiting, 1);
    start_caller(&c[1], &t[1], ch, BIG);
    start_caller(&c[2], &t[2], ch, BIG);
    /* Exactly one of the two is refused while the gate is still closed. */
    int refused = -1;
    end = now_ms() + 10000;
    while (refused < 0 && now_ms() < end) {
        for (int i = 1; i <= 2; i++) {
            if (__atomic_load_n(&c[i].rc, __ATOMIC_SEQ_CST) != 1) {
                refused = i;
            }
        }
        usleep(2000);
    }
    ck_assert_int_gt(refused, 0);
    pthread_join(t[refused], NULL);
    ck_assert_int_eq(c[refused].rc, -ECOMM);
    ck_assert_int_eq(c[refused].st.code, SL_RPC_RESOURCE_EXHAUSTED);
    ck_assert_msg(strstr(c[refused].st.details, "bytes") != NULL, "details: %s",
                  c[refused].st.details);
    int queued = 3 - refused;
    ck_assert_int_eq(__atomic_load_n(&c[queued].rc, __ATOMIC_SEQ_CST), 1);

    start_caller(&c[3], &t[3], ch, 100); /* fits beside the queued one */
    usleep(100 * 1000); /* let it be queued behind the gate; not asserted on */
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_mutex_unlock(&g.mu);
    pthread_join(t[0], NULL);
    pthread_join(t[queued], NULL);
    pthread_join(t[3], NULL);
    ck_assert_int_eq(c[0].rc, 0);
    ck_assert_int_eq(c[queued].rc, 0);
    ck_assert_int_eq(c[3].rc, 0);

    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);
}
END_TEST

int main(void)
{
    sl_rpc_init();
    Suite *s = suite_create("rpc_limits");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_recv_limit);
    tcase_add_test(tc, test_queue_byte_budget);
    suite_add_tcase(s, tc);
    int rc = fx_run_suite(s, 1); /* no fork: gRPC is initialised */
    sl_rpc_shutdown();
    return rc;
}
