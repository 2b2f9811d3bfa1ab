/* The client keeps its pipeline busy while the training loop works on a
 * batch: sluice_next_batch refills the executor before it returns, and the
 * executor has room for a whole batch beyond its threads' window. Without
 * that, a loop that trains between batches gets only what was in flight
 * when it left next_batch (the "off" plan then ran at ~60 % of its speed
 * under a paced consumer). Observed through the executor's per-unit sample
 * counts, not through timing: the test only needs the work to finish. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "client/lib/client_impl.h"
#include "client/lib/sluice.h"
#include "common/base/log.h"
#include "common/engine/pipeline.h"
#include "tests/unit/fixtures.h"

#define NIMG 640
#define BATCH 32

static char g_root[FX_TMPDIR_LEN];

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_make_imagefolder(g_root, NIMG, 24, 16), 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/spec.json", g_root);
    char spec[256];
    snprintf(spec, sizeof(spec),
             "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
             " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": %d}",
             BATCH);
    ck_assert_int_eq(fx_write_file(path, spec, strlen(spec)), 0);
}

static void teardown(void) { fx_rmtree(g_root); }

static uint64_t decoded(sluice_job_t *job)
{
    sl_unit_stat_t st[SL_PIPE_MAX_UNITS];
    memset(st, 0, sizeof(st));
    cl_line_unit_stats(job->consumer.line, st);
    return st[0].samples;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(test_next_batch_leaves_a_batch_in_the_making)
{
    char spec[600];
    snprintf(spec, sizeof(spec), "%s/spec.json", g_root);
    sluice_options_t o = {.data_root = g_root, .threads = 1};
    sluice_job_t *job = NULL;
    char err[512];
    ck_assert_msg(sluice_open(spec, &o, &job, err, sizeof(err)) == 0, "open: %s", err);
    /* The old window (threads * 8 + 8) was smaller than a batch. */
    ck_assert_uint_ge(cl_line_capacity(job->consumer.line), BATCH + 1 * 8 + 8);

    sluice_batch_t *b = NULL;
    ck_assert_int_eq(sluice_next_batch(job, &b), 0);
    ck_assert_uint_eq(b->n, BATCH);
    /* The loop "trains" without calling the library: the next batch must
     * be made meanwhile, up to at least a whole batch beyond this one. */
    uint64_t want = 2 * BATCH + 8; /* old window: at most 2 * BATCH - 1 */
    for (int i = 0; i < 1000 && decoded(job) < want; i++) {
        sleep_ms(10);
    }
    ck_assert_uint_ge(decoded(job), want);
    sluice_release_batch(job, b);

    /* ... but never more than the executor's room ahead of the loop: a
     * refill that also collected let the batcher run ahead without bound
     * (caught by the soak as +1 MB/s of RSS). Everything is still
     * delivered exactly once. */
    uint64_t n = BATCH;
    /* the executor full, one batch ready and a partial one in the batcher */
    uint64_t room = cl_line_capacity(job->consumer.line) + 2 * BATCH;
    int rc;
    while ((rc = sluice_next_batch(job, &b)) == 0) {
        n += b->n;
        /* Refilled on the way out, also when the pump's last step was a
         * collect or the batch was ready on entry: full, unless every
         * position has been fed. */
        ck_assert(cl_line_inflight(job->consumer.line) == cl_line_capacity(job->consumer.line) ||
                  job->consumer.local_epoch >= job->spec.epochs);
        sluice_release_batch(job, b);
        uint64_t last = 0;
        for (int i = 0, still = 0; i < 200 && still < 3; i++) {
            sleep_ms(10);
            uint64_t d = decoded(job);
            still = d == last ? still + 1 : 0;
            last = d;
        }
        ck_assert_msg(decoded(job) <= n + room, "%llu decoded, %llu delivered, room %llu",
                      (unsigned long long)decoded(job), (unsigned long long)n,
                      (unsigned long long)room);
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_uint_eq(n, NIMG);
    sluice_close(job);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_prefetch");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_next_batch_leaves_a_batch_in_the_making);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
