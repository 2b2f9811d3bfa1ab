/* The client's control thread (client/lib/control.c) against a fake dispatcher
 * over real gRPC: a worker that cannot be reached makes the client ask for a
 * retry naming that worker (AckSplits.retry_worker_id) each time its Fetch
 * stream fails, and restart the stream only after a per-worker backoff
 * (200 ms doubling to 2 s), not every 100 ms poll. gRPC suites run without
 * fork (gRPC's threads do not survive a fork after grpc_init). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/lib/client_impl.h"
#include "client/lib/sluice.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "proto/sluice.pb-c.h"
#include "tests/unit/fixtures.h"

#define NIMG 6
#define DEAD_WORKER 7
#define MAX_RETRIES 64

static char g_root[FX_TMPDIR_LEN];
static char g_dead[64]; /* a loopback address nobody listens on */

typedef struct fake_s {
    pthread_mutex_t mu;
    int nretries;
    double retry_at[MAX_RETRIES]; /* seconds since the first retry */
    int listed_split0;            /* every retry listed split 0 */
    int stray_retry;              /* a retry named another worker */
    double t_first;
} fake_t;

static fake_t g_fake = {.mu = PTHREAD_MUTEX_INITIALIZER, .listed_split0 = 1};

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_make_imagefolder(g_root, NIMG, 24, 16), 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/spec.json", g_root);
    const char spec[] = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
                        " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 2}";
    ck_assert_int_eq(fx_write_file(path, spec, strlen(spec)), 0);
    sl_rpc_init();
}

static void teardown(void)
{
    sl_rpc_shutdown();
    fx_rmtree(g_root);
}

static void fake_submit(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    (void)ctx;
    (void)req;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    Sluice__Plan plan = SLUICE__PLAN__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    resp.job_id = 42;
    resp.job_secret = (char *)"fake-job-secret-0123456789";
    plan.split = 1;
    plan.mode = "all";
    resp.plan = &plan;
    sl_rpc_reply_ok(reply, &resp.base);
}

/* One split, owned by a worker whose address refuses connections. */
static void fake_assignment(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    (void)ctx;
    (void)req;
    Sluice__GetAssignmentResponse resp = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    Sluice__Plan plan = SLUICE__PLAN__INIT;
    Sluice__SplitAssignment a = SLUICE__SPLIT_ASSIGNMENT__INIT;
    Sluice__SplitAssignment *pa[1] = {&a};
    Sluice__WorkerEndpoint e = SLUICE__WORKER_ENDPOINT__INIT;
    Sluice__WorkerEndpoint *pe[1] = {&e};
    resp.version = SL_PROTOCOL_VERSION;
    plan.split = 1;
    plan.mode = "all";
    resp.plan = &plan;
    a.job_id = 42;
    a.split_id = 0;
    a.begin = 0;
    a.end = NIMG;
    a.stage_to = 1;
    a.worker_id = DEAD_WORKER;
    resp.n_splits = 1;
    resp.splits = pa;
    e.worker_id = DEAD_WORKER;
    e.address = g_dead;
    resp.n_workers = 1;
    resp.workers = pe;
    resp.failure = "";
    sl_rpc_reply_ok(reply, &resp.base);
}

static void fake_ack(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    fake_t *f = ctx;
    const Sluice__AckSplitsRequest *r = (const Sluice__AckSplitsRequest *)req;
    pthread_mutex_lock(&f->mu);
    if (r->retry_worker_id != 0) {
        if (r->retry_worker_id != DEAD_WORKER) {
            f->stray_retry = 1;
        }
        if (f->nretries == 0) {
            f->t_first = now_sec();
        }
        if (f->nretries < MAX_RETRIES) {
            f->retry_at[f->nretries] = now_sec() - f->t_first;
        }
        f->nretries++;
        if (r->n_retry_split_ids != 1 || r->retry_split_ids[0] != 0) {
            f->listed_split0 = 0;
        }
    }
    pthread_mutex_unlock(&f->mu);
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    sl_rpc_reply_ok(reply, &resp.base);
}

static void fake_close(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    (void)ctx;
    (void)req;
    Sluice__CloseJobResponse resp = SLUICE__CLOSE_JOB_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    sl_rpc_reply_ok(reply, &resp.base);
}

static void fake_rates(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    (void)ctx;
    (void)req;
    Sluice__ReportRatesResponse resp = SLUICE__REPORT_RATES_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    sl_rpc_reply_ok(reply, &resp.base);
}

START_TEST(test_backoff_steps)
{
    ck_assert_int_eq(cl_backoff_next(0), CL_BACKOFF_MIN_MS);
    ck_assert_int_eq(cl_backoff_next(200), 400);
    ck_assert_int_eq(cl_backoff_next(400), 800);
    ck_assert_int_eq(cl_backoff_next(800), 1600);
    ck_assert_int_eq(cl_backoff_next(1600), CL_BACKOFF_MAX_MS);
    ck_assert_int_eq(cl_backoff_next(CL_BACKOFF_MAX_MS), CL_BACKOFF_MAX_MS);
}
END_TEST

/* A dispatcher of fakes on loopback, its address in addr: SubmitJob,
 * CloseJob and ReportRates answered from arg, GetAssignment and AckSplits
 * by the test's own. */
static sl_rpc_server_t *fake_dispatcher(void *arg, sl_rpc_unary_fn assign, sl_rpc_unary_fn ack,
                                        void *ack_arg, char *addr, size_t addrlen)
{
    char err[256];
    sl_rpc_server_opts_t so = {.listen = "127.0.0.1:0", .handler_threads = 2};
    sl_rpc_server_t *d = sl_rpc_server_new(&so, err, sizeof(err));
    ck_assert_msg(d != NULL, "%s", err);
    sl_rpc_server_add_unary(d, "/sluice.Dispatcher/SubmitJob",
                            &sluice__submit_job_request__descriptor, fake_submit, arg);
    sl_rpc_server_add_unary(d, "/sluice.Dispatcher/GetAssignment",
                            &sluice__get_assignment_request__descriptor, assign, arg);
    sl_rpc_server_add_unary(d, "/sluice.Dispatcher/AckSplits",
                            &sluice__ack_splits_request__descriptor, ack, ack_arg);
    sl_rpc_server_add_unary(d, "/sluice.Dispatcher/CloseJob",
                            &sluice__close_job_request__descriptor, fake_close, arg);
    sl_rpc_server_add_unary(d, "/sluice.Dispatcher/ReportRates",
                            &sluice__report_rates_request__descriptor, fake_rates, arg);
    ck_assert_msg(sl_rpc_server_start(d, addr, addrlen, err, sizeof(err)) == 0, "%s", err);
    return d;
}

START_TEST(test_dead_worker_backoff_and_retry)
{
    char err[256];
    /* A free port, released: connecting to it is refused at once. */
    sl_rpc_server_opts_t so = {.listen = "127.0.0.1:0", .handler_threads = 2};
    sl_rpc_server_t *tmp = sl_rpc_server_new(&so, err, sizeof(err));
    ck_assert_ptr_nonnull(tmp);
    ck_assert_int_eq(sl_rpc_server_start(tmp, g_dead, sizeof(g_dead), err, sizeof(err)), 0);
    sl_rpc_server_free(tmp);

    char daddr[64];
    sl_rpc_server_t *d = fake_dispatcher(&g_fake, fake_assignment, fake_ack, &g_fake, daddr,
                                         sizeof(daddr));

    char spec[600];
    snprintf(spec, sizeof(spec), "%s/spec.json", g_root);
    sluice_options_t o = {.dispatcher = daddr, .data_root = g_root, .threads = 1,
                          .offload = "all", .timeout_ms = 2000};
    sluice_job_t *job = NULL;
    ck_assert_msg(sluice_open(spec, &o, &job, err, sizeof(err)) == 0, "open: %s", err);
    /* Restarts at ~0, 0.3, 0.8, 1.7, 3.4 s (poll 100 ms + 200/400/800/1600
     * ms); without a backoff there would be one every ~200 ms. */
    usleep(2900 * 1000);
    sluice_close(job);
    sl_rpc_server_free(d);

    pthread_mutex_lock(&g_fake.mu);
    int n = g_fake.nretries;
    ck_assert_int_eq(g_fake.stray_retry, 0);
    ck_assert_int_eq(g_fake.listed_split0, 1);
    /* Bounds a loaded machine cannot break: it only makes things later. */
    ck_assert_msg(n >= 2 && n <= 6, "%d retries in 2.9 s", n);
    double least = 0;
    for (int i = 1, wait = 0; i < n && i < MAX_RETRIES; i++) {
        wait = cl_backoff_next(wait);
        least += wait / 1000.0;
        ck_assert_msg(g_fake.retry_at[i] >= least - 0.02, "retry %d at %.3f s, before %.3f s", i,
                      g_fake.retry_at[i], least);
    }
    pthread_mutex_unlock(&g_fake.mu);
}
END_TEST


/* ------------------------------------------------------------ received */

/* Multi-rank acknowledgement on consumption (docs/protocol.md): a split
 * whose samples are all in the batcher is reported received (its slot is
 * freed) but acknowledged only once the loop has taken them. The fake lists
 * split 0 = the rank's 3 positions as the client's own until it has the
 * received report, and once more on request (a re-assignment, which must be
 * reported again). Its first AckSplits carrying received ids fails. */
typedef struct rfake_s {
    pthread_mutex_t mu;
    int failed_once;
    int received_ok;    /* reports of split 0 answered OK */
    int acked;          /* acks of split 0 */
    int stray;          /* an id other than 0 */
    int received_after_ack;
    int relist;         /* list split 0 once more */
} rfake_t;

static rfake_t g_r = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void rfake_assignment(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    rfake_t *f = ctx;
    (void)req;
    Sluice__GetAssignmentResponse resp = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    Sluice__Plan plan = SLUICE__PLAN__INIT;
    Sluice__SplitAssignment a = SLUICE__SPLIT_ASSIGNMENT__INIT;
    Sluice__SplitAssignment bad = SLUICE__SPLIT_ASSIGNMENT__INIT;
    Sluice__SplitAssignment *pa[2] = {&a, &bad};
    resp.version = SL_PROTOCOL_VERSION;
    plan.split = 1;
    plan.mode = "all";
    resp.plan = &plan;
    resp.failure = "";
    a.job_id = 42;
    a.split_id = 0;
    a.begin = 0;
    a.end = NIMG / 2;
    a.worker_id = 0;
    /* A broken one: beyond the rank's positions, must be ignored. */
    bad.job_id = 42;
    bad.split_id = 1;
    bad.begin = 0;
    bad.end = NIMG;
    bad.worker_id = 0;
    pthread_mutex_lock(&f->mu);
    if (f->received_ok == 0 || f->relist) {
        resp.n_splits = 2;
        resp.splits = pa;
        f->relist = 0;
    }
    pthread_mutex_unlock(&f->mu);
    sl_rpc_reply_ok(reply, &resp.base);
}

static void rfake_ack(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    rfake_t *f = ctx;
    const Sluice__AckSplitsRequest *r = (const Sluice__AckSplitsRequest *)req;
    pthread_mutex_lock(&f->mu);
    if (r->n_received_split_ids > 0 && !f->failed_once) {
        f->failed_once = 1;
        pthread_mutex_unlock(&f->mu);
        sl_rpc_reply_error(reply, SL_RPC_UNAVAILABLE, "journal write failed");
        return;
    }
    for (size_t i = 0; i < r->n_received_split_ids; i++) {
        f->stray |= r->received_split_ids[i] != 0;
        f->received_ok += r->received_split_ids[i] == 0;
        f->received_after_ack |= f->acked > 0;
    }
    for (size_t i = 0; i < r->n_split_ids; i++) {
        f->stray |= r->split_ids[i] != 0;
        f->acked += r->split_ids[i] == 0;
    }
    pthread_mutex_unlock(&f->mu);
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    sl_rpc_reply_ok(reply, &resp.base);
}

static int rfake_get(int *field)
{
    pthread_mutex_lock(&g_r.mu);
    int v = *field;
    pthread_mutex_unlock(&g_r.mu);
    return v;
}

/* Polls until *field >= want (5 s at most), pumping the job when asked. */
static int rfake_wait(sluice_job_t *job, int *field, int want, int pump)
{
    for (int i = 0; i < 500 && rfake_get(field) < want; i++) {
        if (pump) {
            ck_assert_int_eq(cl_job_pump(job), 0);
        }
        usleep(10 * 1000);
    }
    return rfake_get(field);
}

START_TEST(test_received_before_consumed)
{
    char err[256];
    char daddr[64];
    sl_rpc_server_t *d = fake_dispatcher(&g_r, rfake_assignment, rfake_ack, &g_r, daddr,
                                         sizeof(daddr));

    char spec[600];
    snprintf(spec, sizeof(spec), "%s/spec.json", g_root);
    sluice_options_t o = {.dispatcher = daddr, .data_root = g_root, .threads = 1,
                          .offload = "all", .timeout_ms = 2000, .rank = 0, .world_size = 2};
    sluice_job_t *job = NULL;
    ck_assert_msg(sluice_open(spec, &o, &job, err, sizeof(err)) == 0, "open: %s", err);
    ck_assert_int_eq(job->ack_on_pop, 1);
    ck_assert_uint_eq(job->positions, NIMG / 2);

    /* Every sample into the batcher, none taken: received (after the failed
     * call, again), not acknowledged. */
    ck_assert_int_eq(rfake_wait(job, &g_r.received_ok, 1, 1), 1);
    usleep(300 * 1000); /* a few more polls: still no ack, no repeat */
    ck_assert_int_eq(rfake_get(&g_r.failed_once), 1);
    ck_assert_int_eq(rfake_get(&g_r.received_ok), 1);
    ck_assert_int_eq(rfake_get(&g_r.acked), 0);

    /* Handed out again after the report: reported again. */
    pthread_mutex_lock(&g_r.mu);
    g_r.relist = 1;
    pthread_mutex_unlock(&g_r.mu);
    ck_assert_int_eq(rfake_wait(job, &g_r.received_ok, 2, 0), 2);
    ck_assert_int_eq(rfake_get(&g_r.acked), 0);

    /* The loop takes both batches: now it is acknowledged, once. */
    sluice_batch_t *b = NULL;
    uint32_t taken = 0;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sluice_next_batch(job, &b), 0);
        taken += b->n;
        sluice_release_batch(job, b);
    }
    ck_assert_uint_eq(taken, NIMG / 2);
    ck_assert_int_eq(rfake_wait(job, &g_r.acked, 1, 0), 1);
    sluice_close(job);
    sl_rpc_server_free(d);
    ck_assert_int_eq(g_r.acked, 1);
    ck_assert_int_eq(g_r.received_ok, 2);
    ck_assert_int_eq(g_r.stray, 0);
    ck_assert_int_eq(g_r.received_after_ack, 0);
}
END_TEST

/* ------------------------------------------------------------ pace */

/* The control thread's pace (client/lib/pace.h): an assignment that stays
 * the same (one split on a worker the client is not told how to reach, so
 * nothing else happens) is asked for ever less often, up to every
 * CL_PACE_QUIET_MAX_MS; one that changes every time (the plan's version)
 * every CL_PACE_MIN_MS, as the poll always was. */
typedef struct pfake_s {
    pthread_mutex_t mu;
    int calls;
    int news; /* bump the plan's version on every call */
    uint32_t version;
} pfake_t;

static pfake_t g_p = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void pfake_assignment(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    pfake_t *f = ctx;
    (void)req;
    Sluice__GetAssignmentResponse resp = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    Sluice__Plan plan = SLUICE__PLAN__INIT;
    Sluice__SplitAssignment a = SLUICE__SPLIT_ASSIGNMENT__INIT;
    Sluice__SplitAssignment *pa[1] = {&a};
    resp.version = SL_PROTOCOL_VERSION;
    plan.split = 1;
    plan.mode = "all";
    pthread_mutex_lock(&f->mu);
    f->calls++;
    f->version += f->news;
    plan.version = f->version;
    pthread_mutex_unlock(&f->mu);
    resp.plan = &plan;
    a.job_id = 42;
    a.split_id = 0;
    a.end = NIMG;
    a.stage_to = 1;
    a.worker_id = DEAD_WORKER;
    resp.n_splits = 1;
    resp.splits = pa;
    resp.failure = "";
    sl_rpc_reply_ok(reply, &resp.base);
}

/* GetAssignment calls in the next ms milliseconds, with news or without. */
static int pfake_calls_over(int news, int ms)
{
    pthread_mutex_lock(&g_p.mu);
    g_p.news = news;
    int before = g_p.calls;
    pthread_mutex_unlock(&g_p.mu);
    usleep((useconds_t)ms * 1000);
    pthread_mutex_lock(&g_p.mu);
    int n = g_p.calls - before;
    pthread_mutex_unlock(&g_p.mu);
    return n;
}

START_TEST(test_quiet_assignment_slows_the_poll)
{
    char err[256];
    char daddr[64];
    sl_rpc_server_t *d = fake_dispatcher(&g_p, pfake_assignment, fake_ack, &g_fake, daddr,
                                         sizeof(daddr));
    char spec[600];
    snprintf(spec, sizeof(spec), "%s/spec.json", g_root);
    sluice_options_t o = {.dispatcher = daddr,
                          .data_root = g_root,
                          .threads = 1,
                          .offload = "all",
                          .timeout_ms = 2000};
    sluice_job_t *job = NULL;
    ck_assert_msg(sluice_open(spec, &o, &job, err, sizeof(err)) == 0, "open: %s", err);

    /* Quiet: ~0, 0.1, 0.3, 0.7, 1.2, ... then every 0.5 s (some rounds
     * earlier, for the once-a-second ReportRates): at most ~9 in 3 s where
     * the fixed 100 ms poll made 30. Load only makes calls later, fewer. */
    int quiet = pfake_calls_over(0, 3000);
    /* News every call: back to every 100 ms, ~15 in 1.5 s. */
    int busy = pfake_calls_over(1, 1500);
    /* Quiet again: the pace slows down again (~4-5 in 2 s). */
    int again = pfake_calls_over(0, 2000);
    sluice_close(job);
    sl_rpc_server_free(d);
    ck_assert_msg(quiet >= 2 && quiet <= 12, "%d GetAssignment calls in a quiet 3 s", quiet);
    ck_assert_msg(busy >= 6, "%d GetAssignment calls in 1.5 s of news", busy);
    ck_assert_msg(again <= 10, "%d GetAssignment calls in a quiet 2 s after news", again);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_control");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_backoff_steps);
    tcase_add_test(tc, test_dead_worker_backoff_and_retry);
    tcase_add_test(tc, test_received_before_consumed);
    tcase_add_test(tc, test_quiet_assignment_slows_the_poll);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 1);
}
