/* Worker over real gRPC on loopback: the Fetch stream (credits, NOT_FOUND,
 * FAILED_PRECONDITION, one stream per job, close -> OK, client cancel ->
 * the job's work is dropped) and the control loop against a fake dispatcher
 * (register, known=false -> register again, jobs and splits from heartbeats,
 * failed_jobs reported). gRPC suites run without fork: gRPC's threads do not
 * survive a fork after grpc_init. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/clock.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "common/data/source.h"
#include "proto/sluice.pb-c.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_worker.h"
#include "worker/control.h"
#include "worker/stream.h"
#include "worker/tasks.h"

#define NIMG 12

static char g_root[FX_TMPDIR_LEN];
static uint64_t g_fp;

static const char SPEC[] =
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 3},"
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 16}],"
    " \"batch_size\": 2}";

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_make_imagefolder(g_root, NIMG, 40, 30), 0);
    sl_source_t *src = NULL;
    char err[256];
    ck_assert_int_eq(sl_source_open(g_root, SL_SRC_IMAGEFOLDER, "train", &src, err, sizeof(err)),
                     0);
    g_fp = sl_source_fingerprint(src);
    sl_source_free(src);
    sl_rpc_init();
}

static void teardown(void)
{
    sl_rpc_shutdown();
    fx_rmtree(g_root);
}

static wk_tasks_t *new_tasks(void)
{
    wk_tasks_opts_t o = {
        .data_root = g_root, .threads = 2, .buffer_bytes = 64u << 20, .max_message_bytes = 1 << 20};
    wk_tasks_t *t = wk_tasks_new(&o);
    ck_assert_ptr_nonnull(t);
    return t;
}

static void add_job(wk_tasks_t *t, uint64_t id, uint64_t fp)
{
    Sluice__JobSpec js = SLUICE__JOB_SPEC__INIT;
    js.job_id = id;
    js.spec_json = (char *)SPEC;
    js.source_fingerprint = fp;
    js.num_samples = NIMG;
    wk_tasks_add_job(t, &js);
}

static void assign(wk_tasks_t *t, uint64_t job, uint64_t split, uint64_t b, uint64_t e)
{
    Sluice__SplitAssignment a = SLUICE__SPLIT_ASSIGNMENT__INIT;
    a.job_id = job;
    a.split_id = split;
    a.begin = b;
    a.end = e;
    a.stage_to = 1;
    wk_tasks_assign(t, &a);
}

static sl_rpc_server_t *start_worker_server(wk_tasks_t *t, char *addr, size_t len)
{
    char err[256];
    sl_rpc_server_opts_t so = {.listen = "127.0.0.1:0", .max_msg_bytes = 2 << 20};
    sl_rpc_server_t *srv = sl_rpc_server_new(&so, err, sizeof(err));
    ck_assert_ptr_nonnull(srv);
    ck_assert_int_eq(sl_rpc_server_add_stream(srv, WK_FETCH_METHOD,
                                              &sluice__fetch_request__descriptor,
                                              wk_stream_fetch, t),
                     0);
    ck_assert_int_eq(sl_rpc_server_start(srv, addr, len, err, sizeof(err)), 0);
    return srv;
}

static sl_rpc_cstream_t *open_fetch(sl_rpc_channel_t *ch, uint64_t job, uint32_t credits)
{
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    req.credits = credits;
    sl_rpc_cstream_t *cs = NULL;
    sl_rpc_status_t st;
    ck_assert_int_eq(sl_rpc_cstream_open(ch, WK_FETCH_METHOD, &req.base,
                                         &sluice__batch__descriptor, 30000, &cs, &st),
                     0);
    return cs;
}

static void grant(sl_rpc_cstream_t *cs, uint32_t credits)
{
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.credits = credits;
    ck_assert_int_eq(sl_rpc_cstream_send(cs, &req.base, 2000), 0);
}

/* Next Batch within ms: 0 with *ret, -ETIMEDOUT, or 1 at the end (status in st). */
static int next_batch(sl_rpc_cstream_t *cs, int ms, Sluice__Batch **ret, sl_rpc_status_t *st)
{
    ProtobufCMessage *m = NULL;
    int rc = sl_rpc_cstream_recv(cs, &m, ms, st);
    if (rc == 0) {
        *ret = (Sluice__Batch *)m;
    }
    return rc;
}

/* Waits for the end of the stream and returns its status code. */
static int end_code(sl_rpc_cstream_t *cs, int ms, sl_rpc_status_t *st)
{
    Sluice__Batch *b = NULL;
    int rc = next_batch(cs, ms, &b, st);
    if (rc == 0) {
        sluice__batch__free_unpacked(b, NULL);
    }
    ck_assert_msg(rc == 1 || rc == -ECOMM, "stream did not end: %d", rc);
    return st->code;
}

static int split_done_and_one_sent(const wk_job_info_t *r)
{
    return r->splits_done == 1 && r->msgs_sent >= 1;
}

static int not_loading(const wk_job_info_t *r) { return r->state != WK_JOB_LOADING; }

static int stream_broke(const wk_job_info_t *r)
{
    return r->streams_broken == 1 && !r->stream_attached;
}

static int revoked(const wk_job_info_t *r) { return r->buffered_msgs == 0; }

/* Split 5 of job 1 ran to the end and sits in the buffer. */
static int all_buffered(const wk_job_info_t *r)
{
    return r->buffered_msgs > 0 && r->splits_queued + r->splits_running == 0;
}

START_TEST(test_fetch_credits_and_close)
{
    wk_tasks_t *t = new_tasks();
    char addr[128], err[256];
    sl_rpc_server_t *srv = start_worker_server(t, addr, sizeof(addr));
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, 2 << 20, NULL, 1, err, sizeof(err));
    ck_assert_ptr_nonnull(ch);

    /* The stream opens before the job is known (heartbeat lag): it waits,
     * counted as an early fetch. */
    sl_rpc_cstream_t *cs = open_fetch(ch, 42, 1);
    wk_totals_t tot = {0};
    for (int64_t until = sl_mono_ms() + FX_WAIT_MS; sl_mono_ms() < until; usleep(5000)) {
        wk_tasks_totals(t, &tot);
        if (tot.early_fetches > 0) {
            break;
        }
    }
    ck_assert_uint_eq(tot.early_fetches, 1);
    add_job(t, 42, g_fp);
    assign(t, 42, 1, 0, NIMG); /* 12 samples, batch 2: 6 messages */

    sl_rpc_status_t st;
    Sluice__Batch *b = NULL;
    ck_assert_int_eq(next_batch(cs, 5000, &b, &st), 0);
    ck_assert_uint_eq(b->job_id, 42);
    ck_assert_uint_eq(b->split_id, 1);
    ck_assert_uint_eq(b->n_samples, 2);
    ck_assert_uint_eq(b->samples[0]->h, 16);
    ck_assert_uint_eq(b->samples[0]->data.len, 16 * 16 * 3);
    int positions[NIMG] = {0};
    for (size_t i = 0; i < b->n_samples; i++) {
        positions[b->samples[i]->position]++; /* completion order, not position order */
    }
    sluice__batch__free_unpacked(b, NULL);
    /* One credit, one message: once the split is done and its first message
     * noted sent, the other five wait in the buffer for credits. */
    wk_job_info_t r = fx_job_info_wait(t, 42, split_done_and_one_sent);
    ck_assert_uint_eq(r.splits_done, 1);
    ck_assert_uint_eq(r.msgs_sent, 1);
    ck_assert_uint_eq(r.buffered_msgs, 5);
    grant(cs, 100);
    int msgs = 1, done = 0;
    while (!done) {
        ck_assert_int_eq(next_batch(cs, 5000, &b, &st), 0);
        for (size_t i = 0; i < b->n_samples; i++) {
            positions[b->samples[i]->position]++;
        }
        done = b->split_done;
        msgs++;
        sluice__batch__free_unpacked(b, NULL);
    }
    ck_assert_int_eq(msgs, 6);
    for (int p = 0; p < NIMG; p++) {
        ck_assert_int_eq(positions[p], 1);
    }
    /* A second stream for the job waits, then ALREADY_EXISTS. */
    sl_rpc_cstream_t *cs2 = open_fetch(ch, 42, 1);
    ck_assert_int_eq(end_code(cs2, 10000, &st), SL_RPC_ALREADY_EXISTS);
    sl_rpc_cstream_free(cs2);

    /* The dispatcher closes the job: the stream ends OK. */
    wk_tasks_close_job(t, 42);
    ck_assert_int_eq(end_code(cs, 5000, &st), SL_RPC_OK);
    sl_rpc_cstream_free(cs);

    /* Unknown job: NOT_FOUND after the wait. Failed job: FAILED_PRECONDITION. */
    add_job(t, 43, g_fp ^ 0xff);
    ck_assert_int_eq(fx_job_info_wait(t, 43, not_loading).state, WK_JOB_FAILED);
    cs = open_fetch(ch, 43, 1);
    ck_assert_int_eq(end_code(cs, 10000, &st), SL_RPC_FAILED_PRECONDITION);
    ck_assert_ptr_nonnull(strstr(st.details, "fingerprint"));
    sl_rpc_cstream_free(cs);
    cs = open_fetch(ch, 77, 1);
    ck_assert_int_eq(end_code(cs, 10000, &st), SL_RPC_NOT_FOUND);
    sl_rpc_cstream_free(cs);

    sl_rpc_channel_free(ch);
    wk_tasks_stop(t);
    sl_rpc_server_free(srv);
    wk_tasks_free(t);
}
END_TEST

START_TEST(test_fetch_cancel_drops)
{
    wk_tasks_t *t = new_tasks();
    char addr[128], err[256];
    sl_rpc_server_t *srv = start_worker_server(t, addr, sizeof(addr));
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, 2 << 20, NULL, 1, err, sizeof(err));
    add_job(t, 9, g_fp);
    assign(t, 9, 1, 0, NIMG);
    assign(t, 9, 2, 0, 4);
    sl_rpc_cstream_t *cs = open_fetch(ch, 9, 1);
    sl_rpc_status_t st;
    Sluice__Batch *b = NULL;
    ck_assert_int_eq(next_batch(cs, 5000, &b, &st), 0);
    sluice__batch__free_unpacked(b, NULL);
    /* The client goes away with splits unfinished. */
    sl_rpc_cstream_free(cs);
    wk_job_info_t r = fx_job_info_wait(t, 9, stream_broke);
    ck_assert_uint_eq(r.streams_broken, 1);
    ck_assert_uint_eq(r.splits_queued + r.splits_running, 0);
    ck_assert_uint_eq(r.buffered_msgs, 0);
    /* A new stream works at once and serves a re-assigned split. */
    assign(t, 9, 2, 0, 4);
    cs = open_fetch(ch, 9, 10);
    int n = 0, done = 0;
    while (!done) {
        ck_assert_int_eq(next_batch(cs, 5000, &b, &st), 0);
        ck_assert_uint_eq(b->split_id, 2);
        n += (int)b->n_samples;
        done = b->split_done;
        sluice__batch__free_unpacked(b, NULL);
    }
    ck_assert_int_eq(n, 4);
    /* Worker shutdown with nothing of the job lost ends the stream OK ("worker
     * left": nothing to retry); with work dropped it would be UNAVAILABLE
     * (test_worker_tasks: test_two_jobs_revoke_and_leave). */
    wk_tasks_stop(t);
    ck_assert_int_eq(end_code(cs, 5000, &st), SL_RPC_OK);
    ck_assert_ptr_nonnull(strstr(st.details, "left"));
    sl_rpc_cstream_free(cs);
    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);
    wk_tasks_free(t);
}
END_TEST

/* ------------------------------------------------------------ fake dispatcher */

typedef struct fake_s {
    pthread_mutex_t mu;
    int registrations;
    int heartbeats;
    uint64_t last_id_offered; /* worker_id in the latest RegisterWorker */
    char address[128];
    int forget_once;  /* answer the next heartbeat known=false */
    int send_jobs;    /* next heartbeat carries two jobs and a split */
    uint64_t failed_seen;
    char failure_seen[512];
    int known_seen;
    int splits_seen;
    int qualified_seen; /* in_progress carried (job 1, split 5) */
    int revoke_once;    /* next heartbeat revokes (job 1, split 5) */
    int leaving_seen;   /* heartbeats with leaving = true */
    int leaving_empty;  /* ... of which reported nothing in progress */
    int hb_ms;          /* the interval it tells workers; 0 = 50 */
    int sent_seen;      /* heartbeats reporting a split sent */
    int jobs_at;        /* the count of heartbeats when send_jobs was answered */
    int sent_at;        /* ... when the first split sent was reported */
} fake_t;

static fake_t g_fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void fake_register(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    fake_t *f = ctx;
    const Sluice__RegisterWorkerRequest *r = (const Sluice__RegisterWorkerRequest *)req;
    Sluice__RegisterWorkerResponse resp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    pthread_mutex_lock(&f->mu);
    f->registrations++;
    f->last_id_offered = r->worker_id;
    snprintf(f->address, sizeof(f->address), "%s", r->address);
    resp.worker_id = 100 + (uint64_t)f->registrations;
    pthread_mutex_unlock(&f->mu);
    resp.version = SL_PROTOCOL_VERSION;
    resp.heartbeat_ms = f->hb_ms > 0 ? (uint32_t)f->hb_ms : 50;
    sl_rpc_reply_ok(reply, &resp.base);
}

static void fake_heartbeat(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    fake_t *f = ctx;
    const Sluice__HeartbeatRequest *r = (const Sluice__HeartbeatRequest *)req;
    Sluice__HeartbeatResponse resp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    resp.known = 1;
    Sluice__JobSpec js[2] = {SLUICE__JOB_SPEC__INIT, SLUICE__JOB_SPEC__INIT};
    Sluice__JobSpec *pjs[2] = {&js[0], &js[1]};
    Sluice__SplitAssignment a = SLUICE__SPLIT_ASSIGNMENT__INIT;
    Sluice__SplitAssignment *pa[1] = {&a};
    pthread_mutex_lock(&f->mu);
    f->heartbeats++;
    f->known_seen = (int)r->n_known_jobs;
    if (r->n_splits_in_progress > 0) {
        f->splits_seen = 1;
    }
    for (size_t i = 0; i < r->n_in_progress; i++) {
        if (r->in_progress[i]->job_id == 1 && r->in_progress[i]->split_id == 5) {
            f->qualified_seen = 1;
        }
    }
    if (r->n_sent > 0 && f->sent_seen++ == 0) {
        f->sent_at = f->heartbeats;
    }
    if (r->leaving) {
        f->leaving_seen++;
        f->leaving_empty += r->n_in_progress == 0 && r->n_splits_in_progress == 0;
    }
    Sluice__SplitAssignment rv = SLUICE__SPLIT_ASSIGNMENT__INIT;
    Sluice__SplitAssignment *prv[1] = {&rv};
    if (f->revoke_once) {
        f->revoke_once = 0;
        rv.job_id = 1;
        rv.split_id = 5;
        resp.n_revoked = 1;
        resp.revoked = prv;
    }
    if (r->n_failed_jobs > 0) {
        f->failed_seen = r->failed_jobs[0];
        snprintf(f->failure_seen, sizeof(f->failure_seen), "%s", r->failure);
    }
    if (f->forget_once) {
        f->forget_once = 0;
        resp.known = 0;
    } else if (f->send_jobs) {
        f->send_jobs = 0;
        f->jobs_at = f->heartbeats;
        js[0].job_id = 1;
        js[0].spec_json = (char *)SPEC;
        js[0].source_fingerprint = g_fp;
        js[0].num_samples = NIMG;
        js[1] = js[0];
        js[1].job_id = 2;
        js[1].source_fingerprint = g_fp + 1;
        resp.n_jobs = 2;
        resp.jobs = pjs;
        a.job_id = 1;
        a.split_id = 5;
        a.begin = 0;
        a.end = NIMG;
        a.stage_to = 1;
        resp.n_assign = 1;
        resp.assign = pa;
    }
    pthread_mutex_unlock(&f->mu);
    sl_rpc_reply_ok(reply, &resp.base);
}

static int fake_get(int *field)
{
    pthread_mutex_lock(&g_fake.mu);
    int v = *field;
    pthread_mutex_unlock(&g_fake.mu);
    return v;
}

static void fake_set(int *field, int v)
{
    pthread_mutex_lock(&g_fake.mu);
    *field = v;
    pthread_mutex_unlock(&g_fake.mu);
}

/* The fake dispatcher's server on listen ("127.0.0.1:0": a free port);
 * the bound address into daddr (which may hold listen). */
static sl_rpc_server_t *start_fake(const char *listen, char *daddr, size_t len)
{
    char err[256];
    char at[128];
    snprintf(at, sizeof(at), "%s", listen);
    sl_rpc_server_opts_t so = {.listen = at, .handler_threads = 2};
    sl_rpc_server_t *d = sl_rpc_server_new(&so, err, sizeof(err));
    ck_assert_ptr_nonnull(d);
    sl_rpc_server_add_unary(d, "/sluice.Dispatcher/RegisterWorker",
                            &sluice__register_worker_request__descriptor, fake_register,
                            &g_fake);
    sl_rpc_server_add_unary(d, "/sluice.Dispatcher/Heartbeat",
                            &sluice__heartbeat_request__descriptor, fake_heartbeat, &g_fake);
    ck_assert_int_eq(sl_rpc_server_start(d, daddr, len, err, sizeof(err)), 0);
    return d;
}

/* Waits up to FX_WAIT_MS for *field >= v; returns the value seen last. */
static int fake_wait(int *field, int v)
{
    int got = fake_get(field);
    for (int64_t until = sl_mono_ms() + FX_WAIT_MS; got < v && sl_mono_ms() < until;) {
        usleep(5000);
        got = fake_get(field);
    }
    return got;
}

/* Polls the control thread's status until ok(status) or FX_WAIT_MS. */
static wk_control_status_t status_wait(wk_control_t *c, int (*ok)(const wk_control_status_t *))
{
    wk_control_status_t cs;
    wk_control_get_status(c, &cs);
    for (int64_t until = sl_mono_ms() + FX_WAIT_MS; !ok(&cs) && sl_mono_ms() < until;) {
        usleep(5000);
        wk_control_get_status(c, &cs);
    }
    return cs;
}

static int two_failures(const wk_control_status_t *cs) { return cs->failures >= 2; }

static int second_id(const wk_control_status_t *cs) { return cs->worker_id == 102; }

/* Early heartbeats (worker/control.c sleep_ms). The fake tells the worker
 * to heartbeat every 10 s; then a Fetch for a job the worker has not been
 * told about makes it heartbeat at once -- the reply brings the job, and
 * the stream, which waits WK_FETCH_WAIT_MS (5 s) for it, gets its data --
 * and the split's last message going out makes it heartbeat again,
 * reporting it sent. On the 10 s interval alone the Fetch would fail
 * NOT_FOUND after 5 s. Each of those beats is counted: none comes between. */
START_TEST(test_early_heartbeats)
{
    pthread_mutex_lock(&g_fake.mu);
    int hb0 = g_fake.heartbeats;
    g_fake.hb_ms = 10000;
    g_fake.sent_seen = 0;
    g_fake.jobs_at = 0;
    g_fake.sent_at = 0;
    pthread_mutex_unlock(&g_fake.mu);
    char daddr[128], waddr[128], err[256];
    sl_rpc_server_t *d = start_fake("127.0.0.1:0", daddr, sizeof(daddr));
    wk_tasks_t *t = new_tasks();
    sl_rpc_server_t *ws = start_worker_server(t, waddr, sizeof(waddr));
    wk_control_opts_t co = {.dispatcher = daddr, .advertise = waddr, .threads = 2,
                            .max_message_bytes = 1 << 20};
    wk_control_t *c = wk_control_new(&co, t, err, sizeof(err));
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(wk_control_start(c), 0);
    /* Registered, and the first heartbeat follows at once. Then quiet: the
     * next beat is the one the Fetch below calls for (the pause only sets
     * how long a stray beat had to show up). */
    ck_assert_int_eq(fake_wait(&g_fake.heartbeats, hb0 + 1), hb0 + 1);
    usleep(300 * 1000);

    fake_set(&g_fake.send_jobs, 1);
    sl_rpc_channel_t *ch = sl_rpc_channel_new(waddr, 2 << 20, NULL, 1, err, sizeof(err));
    ck_assert_ptr_nonnull(ch);
    sl_rpc_cstream_t *cs = open_fetch(ch, 1, 64);
    ck_assert_int_eq(fake_wait(&g_fake.jobs_at, 1), hb0 + 2);
    sl_rpc_status_t st;
    for (int i = 0; i < NIMG / 2; i++) {
        Sluice__Batch *b = NULL;
        ck_assert_int_eq(next_batch(cs, FX_WAIT_MS, &b, &st), 0);
        sluice__batch__free_unpacked(b, NULL);
    }
    /* The split's last message is out: the very next beat reports it. */
    ck_assert_int_eq(fake_wait(&g_fake.sent_at, 1), hb0 + 3);

    sl_rpc_cstream_free(cs);
    sl_rpc_channel_free(ch);
    wk_control_free(c);
    sl_rpc_server_free(ws);
    sl_rpc_server_free(d);
    wk_tasks_free(t);
    fake_set(&g_fake.hb_ms, 0);
}
END_TEST

START_TEST(test_control_against_fake_dispatcher)
{
    char err[256];
    /* Reserve a port, then let the worker try it while nothing listens. */
    sl_rpc_server_opts_t so = {.listen = "127.0.0.1:0", .handler_threads = 2};
    sl_rpc_server_t *probe = sl_rpc_server_new(&so, err, sizeof(err));
    char daddr[128];
    ck_assert_int_eq(sl_rpc_server_start(probe, daddr, sizeof(daddr), err, sizeof(err)), 0);
    sl_rpc_server_free(probe);

    wk_tasks_t *t = new_tasks();
    wk_control_opts_t co = {.dispatcher = daddr, .advertise = "127.0.0.1:9999", .threads = 2,
                            .max_message_bytes = 1 << 20};
    wk_control_t *c = wk_control_new(&co, t, err, sizeof(err));
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(wk_control_start(c), 0);
    /* Nothing listens: RegisterWorker fails and is retried (100 ms, 200 ms ...). */
    wk_control_status_t cs = status_wait(c, two_failures);
    ck_assert_uint_ge(cs.failures, 2);
    ck_assert_int_eq(cs.state, WK_CTL_UNREGISTERED);

    sl_rpc_server_t *d = start_fake(daddr, daddr, sizeof(daddr));

    ck_assert_int_ge(fake_wait(&g_fake.heartbeats, 2), 2);
    ck_assert_int_eq(fake_get(&g_fake.registrations), 1);
    pthread_mutex_lock(&g_fake.mu);
    ck_assert_str_eq(g_fake.address, "127.0.0.1:9999");
    pthread_mutex_unlock(&g_fake.mu);

    /* The dispatcher forgets us: the worker registers again, offering its old id. */
    fake_set(&g_fake.forget_once, 1);
    ck_assert_int_eq(fake_wait(&g_fake.registrations, 2), 2);
    pthread_mutex_lock(&g_fake.mu);
    ck_assert_uint_eq(g_fake.last_id_offered, 101);
    pthread_mutex_unlock(&g_fake.mu);
    /* The fake counts the registration before the worker has read the reply:
     * wait for the worker to take its new id. */
    ck_assert_uint_eq(status_wait(c, second_id).worker_id, 102);

    /* Jobs and a split arrive on a heartbeat; the bad one comes back as failed. */
    fake_set(&g_fake.send_jobs, 1);
    for (int64_t until = sl_mono_ms() + FX_WAIT_MS; sl_mono_ms() < until; usleep(5000)) {
        pthread_mutex_lock(&g_fake.mu);
        int ok = g_fake.failed_seen == 2 && g_fake.known_seen == 2;
        pthread_mutex_unlock(&g_fake.mu);
        if (ok) {
            break;
        }
    }
    pthread_mutex_lock(&g_fake.mu);
    ck_assert_uint_eq(g_fake.failed_seen, 2);
    ck_assert_int_eq(g_fake.known_seen, 2);
    ck_assert_ptr_nonnull(strstr(g_fake.failure_seen, "job 2:"));
    pthread_mutex_unlock(&g_fake.mu);
    wk_job_info_t r = fx_job_info_wait(t, 1, all_buffered);
    ck_assert_int_eq(r.state, WK_JOB_READY);
    ck_assert_uint_eq(r.samples_done, NIMG);
    ck_assert_uint_eq(r.buffered_msgs, NIMG / 2);
    /* Buffered messages keep the split in progress, named with its job. */
    ck_assert_int_eq(fake_wait(&g_fake.qualified_seen, 1), 1);

    /* A job-qualified revocation drops the split's buffered messages. */
    fake_set(&g_fake.revoke_once, 1);
    ck_assert_uint_eq(fx_job_info_wait(t, 1, revoked).buffered_msgs, 0);

    /* Leaving: heartbeats say so at once; the final one, after quiesce,
     * reports nothing in progress and the thread ends. */
    wk_control_leave(c);
    ck_assert_int_ge(fake_wait(&g_fake.leaving_seen, 1), 1);
    wk_tasks_quiesce(t);
    int before = fake_get(&g_fake.leaving_empty);
    ck_assert_int_eq(wk_control_finish(c), 0);
    ck_assert_int_gt(fake_get(&g_fake.leaving_empty), before);
    wk_control_get_status(c, &cs);
    ck_assert_int_eq(cs.leaving, 1);

    wk_control_free(c);
    sl_rpc_server_free(d);
    wk_tasks_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_rpc");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fetch_credits_and_close);
    tcase_add_test(tc, test_fetch_cancel_drops);
    tcase_add_test(tc, test_control_against_fake_dispatcher);
    tcase_add_test(tc, test_early_heartbeats);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 1);
}
