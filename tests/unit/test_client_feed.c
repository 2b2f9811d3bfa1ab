/* test_client_feed: the consumer's feed (client/lib/job.c) with the executor
 * full of the client's own share. A received sample that needs no more
 * units goes straight to the batcher, so it must not wait for room in the
 * executor: its message holds a credit of the worker's stream, and the
 * worker sends nothing more until it is consumed.
 *
 * The job is opened in local mode and made to look remote as the fuzz
 * harness does (tests/fuzz/fuzz_remote.c): job->disp set, never
 * dereferenced on this path. Local samples of large images (a 9-megapixel
 * decode each, tens of ms) fill the executor; one pump right after must take
 * the finished message. If a local sample happened to finish first the old
 * behaviour would pass too, but never the other way round: the test cannot
 * fail falsely. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/sluice.h"
#include "common/base/log.h"
#include "tests/unit/fixtures.h"

#define NIMG 4
#define BIG 3000 /* px: a decode takes tens of ms */

static char g_root[FX_TMPDIR_LEN];
static char g_spec[FX_TMPDIR_LEN + 32];
static int g_fake_channel; /* job->disp points here; never dereferenced */

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_make_imagefolder(g_root, NIMG, BIG, BIG), 0);
    static const char spec[] = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
                               " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 2}";
    snprintf(g_spec, sizeof(g_spec), "%s/spec.json", g_root);
    ck_assert_int_eq(fx_write_file(g_spec, spec, sizeof(spec) - 1), 0);
}

static void teardown(void) { fx_rmtree(g_root); }

/* A worker's message for split 9: one finished (decoded) sample at position
 * pos of epoch 0, as the fetcher queues it. */
static cl_msg_t *finished_msg(uint32_t pos)
{
    static uint8_t pixels[2 * 2 * 3];
    Sluice__Sample smp = SLUICE__SAMPLE__INIT;
    Sluice__Sample *ps[1] = {&smp};
    Sluice__Batch b = SLUICE__BATCH__INIT;
    smp.epoch = 0;
    smp.position = pos;
    smp.dtype = SL_DT_U8;
    smp.layout = SL_LAYOUT_HWC;
    smp.h = 2;
    smp.w = 2;
    smp.c = 3;
    smp.data.data = pixels;
    smp.data.len = sizeof(pixels);
    b.job_id = 1;
    b.split_id = 9;
    b.stage_to = 1; /* every unit of the spec ran */
    b.n_samples = 1;
    b.samples = ps;
    size_t n = sluice__batch__get_packed_size(&b);
    uint8_t *buf = malloc(n);
    ck_assert_ptr_nonnull(buf);
    sluice__batch__pack(&b, buf);
    cl_msg_t *msg = calloc(1, sizeof(*msg));
    ck_assert_ptr_nonnull(msg);
    msg->batch = (Sluice__Batch *)protobuf_c_message_unpack(&sluice__batch__descriptor, NULL, n,
                                                            buf);
    free(buf);
    ck_assert_ptr_nonnull(msg->batch);
    msg->worker_id = 5;
    return msg;
}

START_TEST(test_finished_sample_not_held_by_full_executor)
{
    sluice_options_t opts = {.data_root = g_root, .threads = 1};
    sluice_job_t *job = NULL;
    char err[512];
    ck_assert_msg(sluice_open(g_spec, &opts, &job, err, sizeof(err)) == 0, "%s", err);
    job->disp = (sl_rpc_channel_t *)(void *)&g_fake_channel;

    /* The client's own share fills every place in the executor. */
    unsigned cap = cl_line_capacity(job->line);
    for (unsigned i = 0; i < cap; i++) {
        sl_sample_t s;
        ck_assert_int_eq(cl_line_sample(job->line, 0, i % (NIMG - 1), 0, &s), 0);
        ck_assert_int_eq(cl_line_run(job->line, &s, 0), 0);
    }
    ck_assert_uint_eq(cl_line_room(job->line), 0);

    cl_msg_t *msg = finished_msg(NIMG - 1);
    pthread_mutex_lock(&job->mu);
    job->in_head = job->in_tail = msg;
    pthread_mutex_unlock(&job->mu);
    ck_assert_int_eq(cl_job_pump(job), 0);
    pthread_mutex_lock(&job->mu);
    int taken = job->in_head == NULL;
    pthread_mutex_unlock(&job->mu);
    ck_assert_msg(taken, "a finished message waited for room in a full executor (%u of %u "
                         "in flight)", cl_line_inflight(job->line), cap);
    ck_assert_uint_eq(job->from_remote, 1);

    job->disp = NULL; /* sluice_close must not free the fake channel */
    sluice_close(job);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_feed");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_finished_sample_not_held_by_full_executor);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
