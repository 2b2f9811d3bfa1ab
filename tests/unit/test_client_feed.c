/* test_client_feed: the consumer's feed (client/lib/job.c).
 * - With the executor full of the client's own share: a received sample
 *   that needs no more units goes straight to the batcher, so it must not
 *   wait for room in the executor: its message holds a credit of the
 *   worker's stream, and the worker sends nothing more until it is consumed.
 * - While messages keep arriving (every one the consumer finishes returns a
 *   credit, and the next comes in while it works): a pump still returns, so
 *   the consumer collects the executor, starts its own splits and hands out
 *   batches. A pump that drained the queue until it was empty never
 *   returned while the workers were faster than the client.
 *
 * The job is opened in local mode and made to look remote
 * (tests/unit/fixtures_client.h). Local samples of large images (a 9-megapixel
 * decode each, tens of ms) fill the executor; one pump right after must take
 * the finished message. If a local sample happened to finish first the old
 * behaviour would pass too, but never the other way round: the test cannot
 * fail falsely. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/lib/client_impl.h"
#include "client/lib/sluice.h"
#include "common/base/log.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_client.h"

#define NIMG 4
#define BIG 3000 /* px: a decode takes tens of ms */

static char g_root[FX_TMPDIR_LEN];
static char g_spec[FX_TMPDIR_LEN + 32];

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_decode_job_files(g_root, NIMG, BIG, BIG, g_spec, sizeof(g_spec)), 0);
}

static void teardown(void) { fx_rmtree(g_root); }

/* A worker's message for split 9: n finished (decoded) samples at positions
 * pos, pos + 1, ... (mod NIMG - 1) of epoch 0, as the fetcher queues it
 * (in_head/in_tail under job->mu). */
static cl_msg_t *finished_msg(uint32_t pos, size_t n)
{
    static uint8_t pixels[2 * 2 * 3];
    Sluice__Sample smp[64];
    Sluice__Sample *ps[64];
    ck_assert_uint_le(n, 64);
    Sluice__Batch b = SLUICE__BATCH__INIT;
    for (size_t i = 0; i < n; i++) {
        sluice__sample__init(&smp[i]);
        smp[i].epoch = 0;
        smp[i].position = (pos + i) % (NIMG - 1);
        smp[i].dtype = SL_DT_U8;
        smp[i].layout = SL_LAYOUT_HWC;
        smp[i].h = 2;
        smp[i].w = 2;
        smp[i].c = 3;
        smp[i].data.data = pixels;
        smp[i].data.len = sizeof(pixels);
        ps[i] = &smp[i];
    }
    b.job_id = 1;
    b.split_id = 9;
    b.stage_to = 1; /* every unit of the spec ran */
    b.n_samples = n;
    b.samples = ps;
    size_t len = sluice__batch__get_packed_size(&b);
    uint8_t *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    sluice__batch__pack(&b, buf);
    cl_msg_t *msg = calloc(1, sizeof(*msg));
    ck_assert_ptr_nonnull(msg);
    msg->batch = (Sluice__Batch *)protobuf_c_message_unpack(&sluice__batch__descriptor, NULL, len,
                                                            buf);
    free(buf);
    ck_assert_ptr_nonnull(msg->batch);
    msg->worker_id = 5;
    return msg;
}

/* A job of one executor thread made to look remote. */
static sluice_job_t *open_remote(void)
{
    char err[512];
    sluice_job_t *job = fx_remote_job_open(g_spec, g_root, 1, err, sizeof(err));
    ck_assert_msg(job != NULL, "%s", err);
    return job;
}

START_TEST(test_finished_sample_not_held_by_full_executor)
{
    sluice_job_t *job = open_remote();

    /* The client's own share fills every place in the executor. */
    unsigned cap = cl_line_capacity(job->consumer.line);
    for (unsigned i = 0; i < cap; i++) {
        sl_sample_t s;
        ck_assert_int_eq(cl_line_sample(job->consumer.line, 0, i % (NIMG - 1), 0, &s), 0);
        ck_assert_int_eq(cl_line_run(job->consumer.line, &s, 0), 0);
    }
    ck_assert_uint_eq(cl_line_room(job->consumer.line), 0);

    cl_msg_t *msg = finished_msg(NIMG - 1, 1);
    pthread_mutex_lock(&job->mu);
    job->fetch.in_head = job->fetch.in_tail = msg;
    pthread_mutex_unlock(&job->mu);
    ck_assert_int_eq(cl_job_pump(job), 0);
    pthread_mutex_lock(&job->mu);
    int taken = job->fetch.in_head == NULL;
    pthread_mutex_unlock(&job->mu);
    ck_assert_msg(taken,
                  "a finished message waited for room in a full executor (%u of %u "
                  "in flight)",
                  cl_line_inflight(job->consumer.line), cap);
    ck_assert_uint_eq(job->consumer.from_remote, 1);

    fx_remote_job_close(job);
}
END_TEST

/* A fetcher faster than the consumer: it keeps up to FEED_QUEUED messages
 * queued from FEED_MSGS made beforehand, until told to stop or out of
 * messages. Queueing one takes it a lock and a pointer; taking one (64
 * samples into the batcher) takes the consumer far longer, so the queue
 * does not run dry while the feeder has messages. */
#define FEED_MSGS 2000
#define FEED_QUEUED 64

typedef struct {
    sluice_job_t *job;
    cl_msg_t **msgs;
    size_t next;
    int stop; /* under job->mu */
} feeder_t;

static void *feeder_main(void *arg)
{
    feeder_t *f = arg;
    sluice_job_t *job = f->job;
    for (;;) {
        pthread_mutex_lock(&job->mu);
        int stop = f->stop;
        size_t queued = 0;
        for (const cl_msg_t *m = job->fetch.in_head; m != NULL && queued < FEED_QUEUED;
             m = m->next) {
            queued++;
        }
        if (!stop && queued < FEED_QUEUED && f->next < FEED_MSGS) {
            cl_msg_t *msg = f->msgs[f->next++];
            if (job->fetch.in_tail != NULL) {
                job->fetch.in_tail->next = msg;
            } else {
                job->fetch.in_head = msg;
            }
            job->fetch.in_tail = msg;
        }
        int ran_out = f->next == FEED_MSGS;
        pthread_mutex_unlock(&job->mu);
        if (stop || ran_out) {
            return NULL;
        }
    }
}

START_TEST(test_pump_returns_while_messages_keep_coming)
{
    sluice_job_t *job = open_remote();
    feeder_t f = {.job = job, .msgs = calloc(FEED_MSGS, sizeof(cl_msg_t *))};
    ck_assert_ptr_nonnull(f.msgs);
    for (size_t i = 0; i < FEED_MSGS; i++) {
        f.msgs[i] = finished_msg((uint32_t)i, 64);
    }
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, feeder_main, &f), 0);
    for (;;) { /* the queue is full before the first pump */
        pthread_mutex_lock(&job->mu);
        size_t queued = f.next;
        pthread_mutex_unlock(&job->mu);
        if (queued >= FEED_QUEUED) {
            break;
        }
        sched_yield();
    }
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(cl_job_pump(job), 0);
    }
    pthread_mutex_lock(&job->mu);
    f.stop = 1;
    size_t queued = 0;
    for (const cl_msg_t *m = job->fetch.in_head; m != NULL; m = m->next) {
        queued++;
    }
    size_t taken = f.next - queued;
    pthread_mutex_unlock(&job->mu);
    pthread_join(th, NULL);
    /* One message per pump: a pump that drained the queue would have taken
     * what the feeder added meanwhile, up to all FEED_MSGS. */
    ck_assert_msg(taken == 3, "three pumps took %zu messages (the feeder queued %zu)", taken,
                  f.next);
    for (size_t i = f.next; i < FEED_MSGS; i++) {
        cl_msg_free(f.msgs[i]);
    }
    free(f.msgs);
    fx_remote_job_close(job);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_feed");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_finished_sample_not_held_by_full_executor);
    tcase_add_test(tc, test_pump_returns_while_messages_keep_coming);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
