/* The client's line (client/lib/line.h) on its own: epochs declared in
 * order as their samples are described, deterministic batches in (epoch,
 * position) order, duplicates dropped, the on_error policy (a failing
 * sample is not a skip), the most recent skips, a restarted rank's resume,
 * epochs numbered from a first epoch, and the prefix cache let go only
 * before the first sample. A real imagefolder and pipeline,
 * no job. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/line.h"
#include "common/base/log.h"
#include "common/order/ranks.h"
#include "tests/unit/fixtures.h"

#define NIMG 10
#define BATCH 4

static char g_root[FX_TMPDIR_LEN];

typedef struct {
    sl_spec_t spec;
    sl_source_t *src;
    sl_pipeline_t *pipe;
    cl_line_t *line;
} rig_t;

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_make_imagefolder(g_root, NIMG, 24, 16), 0);
}

static void teardown(void) { fx_rmtree(g_root); }

/* A line over the imagefolder of `epochs` epochs starting at first; extra:
 * more spec fields ("" or ", ..."). */
static void rig_open_at(rig_t *r, const char *extra, uint64_t first, unsigned epochs)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/spec.json", g_root);
    char spec[512];
    snprintf(spec, sizeof(spec),
             "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 7},"
             " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": %d, \"epochs\": %u%s}",
             BATCH, epochs, extra);
    ck_assert_int_eq(fx_write_file(path, spec, strlen(spec)), 0);
    char err[512];
    memset(r, 0, sizeof(*r));
    ck_assert_msg(sl_spec_parse_file(path, &r->spec, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(sl_source_open(g_root, r->spec.source_type, r->spec.source_path, &r->src,
                                    err, sizeof(err)),
                     0);
    ck_assert_int_eq(sl_pipeline_new(&r->spec, 0, &r->pipe, err, sizeof(err)), 0);
    cl_line_args_t a = {.spec = &r->spec, .pipe = r->pipe, .src = r->src, .num_samples = NIMG,
                        .positions = NIMG, .threads = 2, .first_epoch = first};
    ck_assert_int_eq(cl_line_new(&a, &r->line), 0);
}

static void rig_open(rig_t *r, const char *extra) { rig_open_at(r, extra, 0, 2); }

static void rig_close(rig_t *r)
{
    cl_line_free(r->line);
    sl_pipeline_free(r->pipe);
    sl_source_free(r->src);
}

START_TEST(test_deterministic_batches_in_order)
{
    rig_t r;
    rig_open(&r, ", \"deterministic\": true");
    ck_assert_uint_ge(cl_line_capacity(r.line), BATCH);
    sl_sample_t s;
    ck_assert_int_eq(cl_line_sample(r.line, 2, 0, 0, &s), -ERANGE);
    ck_assert_int_eq(cl_line_sample(r.line, 0, NIMG, 0, &s), -ERANGE);
    uint64_t epoch = 0, pos = 0, want_epoch = 0, want_pos = 0, expect_index[2][NIMG];
    while (!cl_line_done(r.line)) {
        while (epoch < 2 && cl_line_room(r.line) > 0) {
            ck_assert_int_eq(cl_line_sample(r.line, epoch, pos, 0, &s), 0);
            expect_index[epoch][pos] = s.index;
            ck_assert_int_eq(cl_line_run(r.line, &s, 0), 0);
            if (++pos == NIMG) {
                epoch++;
                pos = 0;
            }
        }
        cl_line_took_t t;
        int rc;
        while ((rc = cl_line_collect_one(r.line, 100, &t)) != -EAGAIN) {
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(t.skip, -1);
            ck_assert_int_eq(t.duplicate, 0);
        }
        sl_batch_t *b;
        while ((b = cl_line_pop(r.line)) != NULL) {
            /* NIMG = 10, BATCH = 4: 4, 4, 2 per epoch, never across epochs. */
            ck_assert_uint_eq(b->n, want_pos + BATCH <= NIMG ? BATCH : NIMG - want_pos);
            ck_assert_uint_eq(b->epoch, want_epoch);
            for (uint32_t i = 0; i < b->n; i++) {
                ck_assert_uint_eq(b->meta[i].position, want_pos);
                ck_assert_uint_eq(b->meta[i].index, expect_index[want_epoch][want_pos]);
                if (++want_pos == NIMG) {
                    want_epoch++;
                    want_pos = 0;
                }
            }
            sl_batch_free(b);
        }
    }
    ck_assert_uint_eq(want_epoch, 2);
    /* Batched already: describing it again says so; batching it counts a duplicate. */
    ck_assert_int_eq(cl_line_sample(r.line, 1, 3, 0, &s), 1);
    cl_line_took_t t;
    ck_assert_int_eq(cl_line_put(r.line, &s, "", NULL, NULL, &t), 0);
    ck_assert_int_eq(t.duplicate, 1);
    sl_batcher_stats_t st;
    cl_line_stats(r.line, &st);
    ck_assert_uint_eq(st.delivered, 2 * NIMG);
    ck_assert_uint_eq(st.duplicates, 1);
    sl_unit_stat_t us[SL_PIPE_MAX_UNITS];
    cl_line_unit_stats(r.line, us);
    ck_assert_uint_eq(us[0].samples, 2 * NIMG);
    rig_close(&r);
}
END_TEST

START_TEST(test_skips_and_on_error)
{
    rig_t r;
    rig_open(&r, "");
    sl_sample_t s;
    ck_assert_int_eq(cl_line_sample(r.line, 0, 5, 42, &s), 0);
    s.skip = SL_SKIP_CORRUPT;
    cl_line_took_t t;
    ck_assert_int_eq(cl_line_put(r.line, &s, "bad one", NULL, NULL, &t), 0);
    ck_assert_uint_eq(t.split_id, 42);
    ck_assert_int_eq(t.skip, SL_SKIP_CORRUPT);
    ck_assert_str_eq(t.detail, "bad one");
    ck_assert_str_eq(cl_line_first_skip(r.line), "bad one");
    sl_batcher_stats_t st;
    cl_line_stats(r.line, &st);
    ck_assert_uint_eq(st.skipped[SL_SKIP_CORRUPT], 1);
    rig_close(&r);

    rig_open(&r, ", \"on_error\": \"fail\"");
    ck_assert_int_eq(cl_line_sample(r.line, 0, 5, 0, &s), 0);
    s.skip = SL_SKIP_IO;
    ck_assert_int_eq(cl_line_put(r.line, &s, "unreadable", NULL, NULL, &t), -EIO);
    ck_assert_str_eq(t.detail, "unreadable");
    ck_assert_int_eq(cl_line_sample(r.line, 0, 5, 0, &s), 0); /* not batched */
    /* It stopped the job; nothing was skipped (the run's summary said "0
     * skipped" and then named a "first skipped sample"). */
    ck_assert_str_eq(cl_line_first_skip(r.line), "");
    ck_assert_str_eq(cl_line_failed_on(r.line), "unreadable");
    sluice_skip_t k[2];
    ck_assert_uint_eq(cl_line_recent_skips(r.line, k, 2), 0);
    rig_close(&r);
}
END_TEST

START_TEST(test_recent_skips_ring)
{
    rig_t r;
    rig_open_at(&r, "", 0, 8);
    sl_sample_t s;
    cl_line_took_t t;
    /* More skips than are kept, over several epochs; one repeated. */
    for (int i = 0; i < SLUICE_RECENT_SKIPS + 6; i++) {
        uint64_t epoch = (uint64_t)i / NIMG, pos = (uint64_t)i % NIMG;
        ck_assert_int_eq(cl_line_sample(r.line, epoch, pos, 0, &s), 0);
        s.skip = i % 2 ? SL_SKIP_TRUNCATED : SL_SKIP_NOT_JPEG;
        char detail[32];
        snprintf(detail, sizeof(detail), "skip %d", i);
        ck_assert_int_eq(cl_line_put(r.line, &s, detail, NULL, NULL, &t), 0);
        if (i == 3) { /* a duplicate of a skip is not another skip */
            ck_assert_int_eq(cl_line_sample(r.line, epoch, pos, 0, &s), 1);
            s.skip = SL_SKIP_CORRUPT;
            ck_assert_int_eq(cl_line_put(r.line, &s, "again", NULL, NULL, &t), 0);
            ck_assert_int_eq(t.duplicate, 1);
        }
    }
    sluice_skip_t k[SLUICE_RECENT_SKIPS + 2];
    size_t n = cl_line_recent_skips(r.line, k, SLUICE_RECENT_SKIPS + 2);
    ck_assert_uint_eq(n, SLUICE_RECENT_SKIPS);
    for (size_t j = 0; j < n; j++) { /* the newest SLUICE_RECENT_SKIPS, oldest first */
        int i = (int)j + 6;
        char detail[32];
        snprintf(detail, sizeof(detail), "skip %d", i);
        ck_assert_str_eq(k[j].detail, detail);
        ck_assert_str_eq(k[j].reason, i % 2 ? "truncated" : "not_jpeg");
        ck_assert_uint_eq(k[j].epoch, (uint64_t)i / NIMG);
        /* The path of the sample at that position of the epoch's order. */
        ck_assert_int_eq(cl_line_sample(r.line, k[j].epoch, (uint64_t)i % NIMG, 0, &s), 1);
        ck_assert_uint_eq(k[j].index, s.index);
        ck_assert_str_eq(k[j].path, sl_source_name(r.src, s.index));
    }
    ck_assert_str_eq(cl_line_first_skip(r.line), "skip 0");
    ck_assert_uint_eq(cl_line_recent_skips(r.line, k, 1), 1);
    ck_assert_str_eq(k[0].detail, "skip 69");
    rig_close(&r);
}
END_TEST

START_TEST(test_first_epoch)
{
    /* Epochs 3 and 4 (of the spec's 2, from 3): orders as in one job. */
    rig_t r;
    rig_open_at(&r, ", \"deterministic\": true", 3, 2);
    sl_sample_t s;
    ck_assert_int_eq(cl_line_sample(r.line, 2, 0, 0, &s), -ERANGE);
    ck_assert_int_eq(cl_line_sample(r.line, 5, 0, 0, &s), -ERANGE);
    uint64_t order[NIMG];
    for (uint64_t e = 3; e <= 4; e++) {
        sl_rank_order(&r.spec, e, NIMG, order, order);
        for (uint64_t p = 0; p < NIMG; p++) {
            ck_assert_int_eq(cl_line_sample(r.line, e, p, 0, &s), 0);
            ck_assert_uint_eq(s.index, order[p]);
            ck_assert_int_eq(cl_line_run(r.line, &s, 0), 0);
        }
        cl_line_took_t t;
        while (cl_line_collect_one(r.line, 1000, &t) != -EAGAIN) {
        }
    }
    uint64_t want = 3, got = 0;
    sl_batch_t *b;
    while ((b = cl_line_pop(r.line)) != NULL) {
        ck_assert_uint_eq(b->epoch, want);
        got += b->n;
        if (got == NIMG * (want - 2)) {
            want++;
        }
        sl_batch_free(b);
    }
    ck_assert_uint_eq(got, 2 * NIMG);
    ck_assert(cl_line_done(r.line));
    /* A resume before the first epoch starts at the first epoch. */
    rig_close(&r);
    rig_open_at(&r, "", 3, 2);
    cl_line_resume_at(r.line, 1);
    ck_assert_int_eq(cl_line_mark_done(r.line, 2, 0, 1), -EINVAL);
    ck_assert_int_eq(cl_line_mark_done(r.line, 3, 0, NIMG), NIMG);
    ck_assert_int_eq(cl_line_sample(r.line, 4, 0, 0, &s), 0);
    rig_close(&r);
}
END_TEST

START_TEST(test_resume)
{
    rig_t r;
    rig_open(&r, "");
    cl_line_resume_at(r.line, 1);
    ck_assert_int_eq(cl_line_mark_done(r.line, 1, 0, 6), 6);
    ck_assert_int_eq(cl_line_mark_done(r.line, 1, 4, 8), 2);
    ck_assert_int_eq(cl_line_mark_done(r.line, 1, 8, NIMG + 1), -EINVAL);
    ck_assert_int_eq(cl_line_mark_done(r.line, 2, 0, 1), -EINVAL);
    sl_sample_t s;
    ck_assert_int_eq(cl_line_sample(r.line, 0, 3, 0, &s), 1); /* before the resume epoch */
    ck_assert_int_eq(cl_line_sample(r.line, 1, 7, 0, &s), 1); /* marked */
    ck_assert(!cl_line_done(r.line));
    for (uint64_t p = 8; p < NIMG; p++) {
        ck_assert_int_eq(cl_line_sample(r.line, 1, p, 0, &s), 0);
        ck_assert_int_eq(cl_line_run(r.line, &s, 0), 0);
    }
    cl_line_took_t t;
    while (cl_line_collect_one(r.line, 1000, &t) != -EAGAIN) {
    }
    sl_batch_t *b = cl_line_pop(r.line); /* the marked positions are delivered nowhere */
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->n, 2);
    sl_batch_free(b);
    ck_assert(cl_line_done(r.line));
    rig_close(&r);
}
END_TEST

/* What the line told the account. */
typedef struct {
    unsigned batched, dropped, popped;
} tally_t;

static void tally(void *arg, cl_line_ev_e ev, const cl_line_took_t *t)
{
    tally_t *n = arg;
    (void)t;
    n->batched += ev == CL_LINE_EV_BATCHED;
    n->dropped += ev == CL_LINE_EV_DROPPED;
    n->popped += ev == CL_LINE_EV_POPPED;
}

/* The consumer's three calls: every position fed in, collected and popped,
 * each told to the account once as batched and once as popped; a position
 * batched already is not started again with once; one outside the job is
 * refused. */
/* The pool's threads read the executor's cache pointer without a lock:
 * the line lets it go before its first sample only, and says so after. */
START_TEST(test_drop_pcache_only_before_feeding)
{
    rig_t r;
    rig_open(&r, "");
    ck_assert_int_eq(cl_line_drop_pcache(r.line), 0);
    char err[256];
    cl_line_in_t in = {.epoch = 0, .pos = 0};
    ck_assert_int_eq(cl_line_feed(r.line, &in, err, sizeof(err)), 1);
    ck_assert_int_eq(cl_line_drop_pcache(r.line), -EBUSY);
    rig_close(&r);
}
END_TEST

START_TEST(test_feed_collect_pop)
{
    rig_t r;
    rig_open(&r, ", \"deterministic\": true");
    cl_line_free(r.line);
    tally_t n = {0};
    cl_line_args_t a = {.spec = &r.spec,
                        .pipe = r.pipe,
                        .src = r.src,
                        .num_samples = NIMG,
                        .positions = NIMG,
                        .threads = 2,
                        .account = tally,
                        .account_arg = &n};
    ck_assert_int_eq(cl_line_new(&a, &r.line), 0);
    char err[256];
    cl_line_in_t out = {.epoch = 2, .pos = 0};
    ck_assert_int_eq(cl_line_feed(r.line, &out, err, sizeof(err)), -ERANGE);
    uint64_t epoch = 0, pos = 0, samples = 0;
    cl_line_gauge_t g;
    for (cl_line_gauge(r.line, &g); !g.done; cl_line_gauge(r.line, &g)) {
        while (epoch < 2) {
            cl_line_in_t in = {.epoch = epoch, .pos = pos};
            int rc = cl_line_feed(r.line, &in, err, sizeof(err));
            if (rc == -EAGAIN) {
                break;
            }
            ck_assert_int_eq(rc, 1);
            if (++pos == NIMG) {
                epoch++;
                pos = 0;
            }
        }
        ck_assert_int_ge(cl_line_collect(r.line, 100, err, sizeof(err)), 0);
        sl_batch_t *b;
        while ((b = cl_line_pop(r.line)) != NULL) {
            samples += b->n;
            sl_batch_free(b);
        }
    }
    ck_assert_uint_eq(samples, 2 * NIMG);
    ck_assert_uint_eq(n.batched, 2 * NIMG);
    ck_assert_uint_eq(n.popped, 2 * NIMG);
    ck_assert_uint_eq(n.dropped, 0);
    ck_assert_uint_eq(g.accepted, 2 * NIMG);
    ck_assert_uint_eq(g.inflight, 0);
    cl_line_in_t again = {.epoch = 1, .pos = 3, .once = 1};
    ck_assert_int_eq(cl_line_feed(r.line, &again, err, sizeof(err)), 0);
    cl_line_gauge(r.line, &g);
    ck_assert_uint_eq(g.inflight, 0);
    ck_assert_uint_eq(n.batched, 2 * NIMG);
    rig_close(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_line");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_deterministic_batches_in_order);
    tcase_add_test(tc, test_skips_and_on_error);
    tcase_add_test(tc, test_resume);
    tcase_add_test(tc, test_recent_skips_ring);
    tcase_add_test(tc, test_first_epoch);
    tcase_add_test(tc, test_feed_collect_pop);
    tcase_add_test(tc, test_drop_pcache_only_before_feeding);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
