#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine/batcher.h"
#include "tests/unit/fixtures.h"

/* A sample whose one-byte payload encodes its position, so batches can be checked. */
static sl_sample_t mk(uint64_t epoch, uint64_t pos, int skip)
{
    sl_sample_t s = {.epoch = epoch, .position = pos, .index = pos * 10, .label = (int32_t)pos,
                     .skip = skip};
    sl_tensor_init(&s.t);
    if (skip < 0) {
        ck_assert_int_eq(sl_tensor_reshape(&s.t, SL_DT_U8, SL_LAYOUT_HWC, 1, 1, 1), 0);
        s.t.data[0] = (uint8_t)pos;
    }
    return s;
}

static int add(sl_batcher_t *b, uint64_t epoch, uint64_t pos, int skip)
{
    sl_sample_t s = mk(epoch, pos, skip);
    int rc = sl_batcher_add(b, &s);
    sl_tensor_free(&s.t);
    return rc;
}

START_TEST(test_arrival_batches_and_last_partial)
{
    sl_batcher_t *b = sl_batcher_new(4, 0, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 10), 0);
    const uint64_t order[10] = {9, 3, 0, 5, 1, 8, 2, 7, 6, 4};
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(add(b, 0, order[i], -1), 0);
    }
    int sizes[3];
    for (int i = 0; i < 3; i++) {
        sl_batch_t *bt = sl_batcher_pop(b);
        ck_assert_ptr_nonnull(bt);
        sizes[i] = (int)bt->n;
        ck_assert(bt->uniform);
        if (i == 0) {
            /* Arrival order: the first four that came. */
            for (int k = 0; k < 4; k++) {
                ck_assert_uint_eq(bt->data[k], order[k]);
                ck_assert_uint_eq(bt->meta[k].index, order[k] * 10);
            }
        }
        sl_batch_free(bt);
    }
    ck_assert_int_eq(sizes[0], 4);
    ck_assert_int_eq(sizes[1], 4);
    ck_assert_int_eq(sizes[2], 2);
    ck_assert_ptr_null(sl_batcher_pop(b));
    ck_assert(sl_batcher_done(b));
    sl_batcher_free(b);
}
END_TEST

START_TEST(test_drop_last_and_skips)
{
    sl_batcher_t *b = sl_batcher_new(4, 1, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 7), 0);
    for (uint64_t p = 0; p < 7; p++) {
        ck_assert_int_eq(add(b, 0, p, p == 2 ? SL_SKIP_TRUNCATED : -1), 0);
    }
    sl_batch_t *bt = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(bt);
    ck_assert_uint_eq(bt->n, 4);
    sl_batch_free(bt);
    /* 6 delivered: one full batch, the short one of 2 dropped. */
    ck_assert_ptr_null(sl_batcher_pop(b));
    sl_batcher_stats_t st;
    sl_batcher_get_stats(b, &st);
    ck_assert_uint_eq(st.skipped[SL_SKIP_TRUNCATED], 1);
    ck_assert(sl_batcher_done(b));
    sl_batcher_free(b);
}
END_TEST

/* Packed batches: spans of batch_size positions, cut whatever arrived
 * first; holes and skips leave a span short, an empty span is no batch,
 * drop_last does not apply. */
START_TEST(test_aligned_spans)
{
    sl_batcher_t *b = sl_batcher_new(4, 1, 1);
    ck_assert_int_eq(sl_batcher_align(b), 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 16), 0);
    /* Span 0: 3 samples + a hole; span 1: 4; span 2: all holes; span 3: 1
     * sample and a skip. Arrival reversed: order must not matter. */
    const int skip[16] = {-1,
                          -1,
                          -1,
                          SL_SKIP_RESUMED,
                          -1,
                          -1,
                          -1,
                          -1,
                          SL_SKIP_RESUMED,
                          SL_SKIP_RESUMED,
                          SL_SKIP_RESUMED,
                          SL_SKIP_RESUMED,
                          SL_SKIP_TRUNCATED,
                          -1,
                          SL_SKIP_RESUMED,
                          SL_SKIP_RESUMED};
    for (int p = 15; p >= 0; p--) {
        ck_assert_int_eq(add(b, 0, (uint64_t)p, skip[p]), 0);
    }
    const uint32_t want_n[3] = {3, 4, 1};
    const uint64_t first[3] = {0, 4, 13};
    for (int i = 0; i < 3; i++) {
        sl_batch_t *bt = sl_batcher_pop(b);
        ck_assert_ptr_nonnull(bt);
        ck_assert_uint_eq(bt->n, want_n[i]);
        ck_assert_uint_eq(bt->meta[0].position, first[i]);
        sl_batch_free(bt);
    }
    ck_assert_ptr_null(sl_batcher_pop(b));
    ck_assert(sl_batcher_done(b));
    sl_batcher_free(b);
    /* Only a deterministic batcher knows where a span ends. */
    sl_batcher_t *a = sl_batcher_new(4, 0, 0);
    ck_assert_int_eq(sl_batcher_align(a), -EINVAL);
    sl_batcher_free(a);
}
END_TEST

START_TEST(test_duplicates_dropped)
{
    sl_batcher_t *b = sl_batcher_new(2, 0, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 3), 0);
    ck_assert_int_eq(add(b, 0, 1, -1), 0);
    ck_assert_int_eq(add(b, 0, 1, -1), 1);
    ck_assert(sl_batcher_seen(b, 0, 1));
    ck_assert(!sl_batcher_seen(b, 0, 0));
    ck_assert_int_eq(add(b, 0, 0, -1), 0);
    ck_assert_int_eq(add(b, 0, 2, -1), 0);
    /* The epoch is complete: any copy of it is a duplicate. */
    ck_assert_int_eq(add(b, 0, 2, -1), 1);
    ck_assert_int_eq(add(b, 0, 5, -1), -EINVAL);
    ck_assert_int_eq(add(b, 1, 0, -1), -EINVAL);
    sl_batcher_stats_t st;
    sl_batcher_get_stats(b, &st);
    ck_assert_uint_eq(st.duplicates, 2);
    ck_assert_uint_eq(st.delivered, 3);
    sl_batcher_free(b);
}
END_TEST

START_TEST(test_deterministic_order_across_epochs)
{
    sl_batcher_t *b = sl_batcher_new(3, 0, 1);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 5), 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 1, 4), 0);
    /* Epoch 1 arrives first and out of order; nothing may come out before epoch 0. */
    const uint64_t e1[4] = {3, 1, 0, 2};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(add(b, 1, e1[i], -1), 0);
    }
    ck_assert_ptr_null(sl_batcher_pop(b));
    const uint64_t e0[5] = {4, 2, 0, 3, 1};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(add(b, 0, e0[i], i == 1 ? SL_SKIP_CORRUPT : -1), 0);
    }
    /* Epoch 0 without position 2: [0 1 3] [4]; epoch 1: [0 1 2] [3]. */
    const int want[4][3] = {{0, 1, 3}, {4, -1, -1}, {0, 1, 2}, {3, -1, -1}};
    const uint64_t want_epoch[4] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        sl_batch_t *bt = sl_batcher_pop(b);
        ck_assert_ptr_nonnull(bt);
        ck_assert_uint_eq(bt->epoch, want_epoch[i]);
        for (uint32_t k = 0; k < bt->n; k++) {
            ck_assert_int_eq(bt->data[k], want[i][k]);
        }
        ck_assert_uint_eq(bt->n, want[i][1] < 0 ? 1 : 3);
        sl_batch_free(bt);
    }
    ck_assert(sl_batcher_done(b));
    sl_batcher_free(b);
}
END_TEST

START_TEST(test_mixed_shapes_not_uniform)
{
    sl_batcher_t *b = sl_batcher_new(2, 0, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 2), 0);
    sl_sample_t s = mk(0, 0, -1);
    ck_assert_int_eq(sl_batcher_add(b, &s), 0);
    sl_sample_t t = {.epoch = 0, .position = 1, .skip = -1};
    sl_tensor_init(&t.t);
    ck_assert_int_eq(sl_tensor_reshape(&t.t, SL_DT_U8, SL_LAYOUT_HWC, 2, 1, 1), 0);
    memset(t.t.data, 7, 2);
    ck_assert_int_eq(sl_batcher_add(b, &t), 0);
    sl_batch_t *bt = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(bt);
    ck_assert(!bt->uniform);
    ck_assert_uint_eq(bt->nbytes, 3);
    ck_assert_uint_eq(bt->meta[1].offset, 1);
    sl_batch_free(bt);
    sl_batcher_free(b);
}
END_TEST

START_TEST(test_epochs_must_increase)
{
    sl_batcher_t *b = sl_batcher_new(2, 0, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 3, 2), 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 3, 2), -EINVAL);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 1, 2), -EINVAL);
    /* Samples of epochs before the first declared one are old duplicates. */
    ck_assert_int_eq(add(b, 1, 0, -1), 1);
    ck_assert_ptr_null(sl_batcher_new(0, 0, 0));
    sl_batcher_free(b);
}
END_TEST

/* ---- sl_batcher_add_fill: received samples written once, in place ---- */

/* A fill source: 4-byte samples whose bytes are (position, position+1, ...);
 * records every destination and how often it was called. */
typedef struct {
    uint64_t pos;
    size_t calls;
    uint8_t *dst;
} fillsrc_t;

static void fill4(void *arg, uint8_t *dst, size_t n)
{
    fillsrc_t *f = arg;
    f->calls++;
    f->dst = dst;
    for (size_t i = 0; i < n; i++) {
        dst[i] = (uint8_t)(f->pos + i);
    }
}

static int add_fill(sl_batcher_t *b, uint64_t epoch, uint64_t pos, size_t n, fillsrc_t *f)
{
    sl_sample_t s = {.epoch = epoch, .position = pos, .index = pos * 10, .label = (int32_t)pos,
                     .skip = -1};
    sl_tensor_init(&s.t);
    s.t = (sl_tensor_t){.dtype = SL_DT_U8, .layout = SL_LAYOUT_HWC, .h = (uint32_t)n, .w = 1,
                        .c = 1, .nbytes = n};
    *f = (fillsrc_t){.pos = pos};
    int rc = sl_batcher_add_fill(b, &s, fill4, f);
    sl_tensor_free(&s.t);
    return rc;
}

static void check_sample(const sl_batch_t *bt, uint32_t i, uint64_t pos, size_t n)
{
    ck_assert_uint_eq(bt->meta[i].position, pos);
    ck_assert_uint_eq(bt->meta[i].nbytes, n);
    ck_assert_uint_eq(bt->meta[i].h, n);
    ck_assert_int_eq(bt->meta[i].label, (int32_t)pos);
    for (size_t k = 0; k < n; k++) {
        ck_assert_uint_eq(bt->data[bt->meta[i].offset + k], (uint8_t)(pos + k));
    }
}

START_TEST(test_fill_assembles_in_place)
{
    sl_batcher_t *b = sl_batcher_new(3, 0, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 5), 0);
    fillsrc_t f;
    const uint64_t order[5] = {4, 1, 3, 0, 2};
    uint8_t *first = NULL, *dsts[5];
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(add_fill(b, 0, order[i], 4, &f), 0);
        ck_assert_uint_eq(f.calls, 1);
        dsts[i] = f.dst;
        if (i == 0) {
            first = f.dst;
        }
    }
    /* A duplicate is dropped without touching its source. */
    ck_assert_int_eq(add_fill(b, 0, 3, 4, &f), 1);
    ck_assert_uint_eq(f.calls, 0);
    sl_batch_t *bt = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(bt);
    /* The buffer the samples were written into is the batch: no concatenation. */
    ck_assert_ptr_eq(bt->data, first);
    ck_assert_ptr_eq(dsts[1], first + 4);
    ck_assert_ptr_eq(dsts[2], first + 8);
    ck_assert(bt->uniform);
    ck_assert_uint_eq(bt->n, 3);
    ck_assert_uint_eq(bt->nbytes, 12);
    for (uint32_t i = 0; i < 3; i++) {
        check_sample(bt, i, order[i], 4);
    }
    sl_batch_free(bt);
    bt = sl_batcher_pop(b); /* the short last batch */
    ck_assert_ptr_nonnull(bt);
    ck_assert_uint_eq(bt->n, 2);
    ck_assert_uint_eq(bt->nbytes, 8);
    check_sample(bt, 0, 0, 4);
    check_sample(bt, 1, 2, 4);
    sl_batch_free(bt);
    ck_assert(sl_batcher_done(b));
    sl_batcher_stats_t st;
    sl_batcher_get_stats(b, &st);
    ck_assert_uint_eq(st.delivered, 5);
    ck_assert_uint_eq(st.duplicates, 1);
    sl_batcher_free(b);
}
END_TEST

/* Owned samples (the executor's), filled ones and one of another size in
 * the same batches: bytes and order intact, the odd one concatenated. */
START_TEST(test_fill_mixed_with_owned_and_sizes)
{
    sl_batcher_t *b = sl_batcher_new(3, 0, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 6), 0);
    fillsrc_t f;
    ck_assert_int_eq(add_fill(b, 0, 0, 1, &f), 0);
    ck_assert_int_eq(add(b, 0, 1, -1), 0); /* owned, 1 byte = its position */
    ck_assert_int_eq(add_fill(b, 0, 2, 1, &f), 0);
    sl_batch_t *bt = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(bt);
    ck_assert(bt->uniform);
    for (uint32_t i = 0; i < 3; i++) {
        check_sample(bt, i, i, 1);
    }
    sl_batch_free(bt);
    ck_assert_int_eq(add_fill(b, 0, 3, 1, &f), 0);
    ck_assert_int_eq(add_fill(b, 0, 4, 5, &f), 0); /* does not fit a 1-byte slot */
    ck_assert_int_eq(add(b, 0, 5, SL_SKIP_CORRUPT), 0);
    bt = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(bt);
    ck_assert(!bt->uniform);
    ck_assert_uint_eq(bt->n, 2);
    ck_assert_uint_eq(bt->nbytes, 6);
    check_sample(bt, 0, 3, 1);
    check_sample(bt, 1, 4, 5);
    sl_batch_free(bt);
    ck_assert(sl_batcher_done(b));
    sl_batcher_free(b);
}
END_TEST

/* Deterministic: a sample that is next in order goes in place; one that
 * must wait gets its own buffer and is copied when released. The order is
 * the same either way. */
START_TEST(test_fill_deterministic_order)
{
    sl_batcher_t *b = sl_batcher_new(2, 0, 1);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 5), 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 1, 2), 0);
    fillsrc_t f;
    ck_assert_int_eq(add_fill(b, 1, 0, 2, &f), 0); /* epoch 1 waits for epoch 0 */
    ck_assert_int_eq(add_fill(b, 0, 3, 2, &f), 0);
    ck_assert_int_eq(add_fill(b, 0, 0, 2, &f), 0);
    uint8_t *first = f.dst;
    ck_assert_ptr_null(sl_batcher_pop(b));
    ck_assert_int_eq(add_fill(b, 0, 1, 2, &f), 0);
    ck_assert_ptr_eq(f.dst, first + 2); /* next in order: its slot */
    sl_batch_t *bt = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(bt);
    ck_assert_ptr_eq(bt->data, first);
    check_sample(bt, 0, 0, 2);
    check_sample(bt, 1, 1, 2);
    sl_batch_free(bt);
    ck_assert_int_eq(add(b, 0, 2, SL_SKIP_IO), 0);
    ck_assert_int_eq(add_fill(b, 1, 1, 2, &f), 0);
    ck_assert_int_eq(add_fill(b, 0, 4, 2, &f), 0);
    const uint64_t want[2][2] = {{3, 4}, {0, 1}};
    for (int k = 0; k < 2; k++) {
        bt = sl_batcher_pop(b);
        ck_assert_ptr_nonnull(bt);
        ck_assert_uint_eq(bt->epoch, (uint64_t)k);
        ck_assert_uint_eq(bt->n, 2);
        check_sample(bt, 0, want[k][0], 2);
        check_sample(bt, 1, want[k][1], 2);
        sl_batch_free(bt);
    }
    ck_assert(sl_batcher_done(b));
    sl_batcher_free(b);
}
END_TEST

START_TEST(test_fill_drop_last_and_refusals)
{
    sl_batcher_t *b = sl_batcher_new(4, 1, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 3), 0);
    fillsrc_t f;
    ck_assert_int_eq(add_fill(b, 0, 9, 4, &f), -EINVAL); /* out of range */
    ck_assert_int_eq(add_fill(b, 7, 0, 4, &f), -EINVAL); /* undeclared epoch */
    ck_assert_uint_eq(f.calls, 0);
    sl_sample_t s = mk(0, 0, -1); /* has data: use sl_batcher_add */
    ck_assert_int_eq(sl_batcher_add_fill(b, &s, fill4, &f), -EINVAL);
    sl_tensor_free(&s.t);
    sl_sample_t k = mk(0, 0, SL_SKIP_IO); /* a skip carries no bytes */
    ck_assert_int_eq(sl_batcher_add_fill(b, &k, fill4, &f), -EINVAL);
    for (uint64_t p = 0; p < 3; p++) {
        ck_assert_int_eq(add_fill(b, 0, p, 4, &f), 0);
    }
    ck_assert_ptr_null(sl_batcher_pop(b)); /* 3 < 4: dropped */
    ck_assert(sl_batcher_done(b));
    sl_batcher_free(b);
}
END_TEST

/* A freed batch's buffer is reused by the next batch of the same size,
 * and a batch freed after the batcher is still valid to free. */
START_TEST(test_buffers_reused)
{
    sl_batcher_t *b = sl_batcher_new(2, 0, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 6), 0);
    fillsrc_t f;
    ck_assert_int_eq(add_fill(b, 0, 0, 64, &f), 0);
    ck_assert_int_eq(add_fill(b, 0, 1, 64, &f), 0);
    sl_batch_t *bt = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(bt);
    uint8_t *first = bt->data;
    sl_batch_free(bt);
    ck_assert_int_eq(add_fill(b, 0, 2, 64, &f), 0);
    ck_assert_ptr_eq(f.dst, first);
    ck_assert_int_eq(add(b, 0, 3, -1), 0); /* another size: concatenated */
    bt = sl_batcher_pop(b);
    ck_assert_ptr_ne(bt->data, first);
    check_sample(bt, 0, 2, 64);
    check_sample(bt, 1, 3, 1);
    ck_assert_int_eq(add_fill(b, 0, 4, 64, &f), 0);
    ck_assert_int_eq(add_fill(b, 0, 5, 64, &f), 0);
    sl_batch_t *last = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(last);
    ck_assert_ptr_eq(last->data, first); /* back from the concatenated batch */
    sl_batch_free(bt);
    sl_batcher_free(b);
    check_sample(last, 1, 5, 64);
    sl_batch_free(last);
}
END_TEST

/* A consumer that holds several batches at once: once they come back, the
 * pool keeps all of them (as many as were out at once), so the next round
 * allocates nothing (a pool of SL_BATCHER_POOL would free two and make two
 * fresh buffers, faulted in again). */
START_TEST(test_pool_keeps_peak)
{
    enum { OUT = 4 };
    sl_batcher_t *b = sl_batcher_new(2, 0, 0);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 4 * OUT), 0);
    fillsrc_t f;
    sl_batch_t *held[OUT];
    sl_batcher_stats_t st;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < OUT; i++) {
            uint64_t pos = (uint64_t)(round * OUT + i) * 2;
            ck_assert_int_eq(add_fill(b, 0, pos, 64, &f), 0);
            ck_assert_int_eq(add_fill(b, 0, pos + 1, 64, &f), 0);
            held[i] = sl_batcher_pop(b);
            ck_assert_ptr_nonnull(held[i]);
            check_sample(held[i], 1, pos + 1, 64);
        }
        for (int i = 0; i < OUT; i++) {
            sl_batch_free(held[i]);
        }
        sl_batcher_get_stats(b, &st);
        ck_assert_uint_eq(st.buffers_made, OUT);
    }
    ck_assert(sl_batcher_done(b));
    sl_batcher_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batcher");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_arrival_batches_and_last_partial);
    tcase_add_test(tc, test_drop_last_and_skips);
    tcase_add_test(tc, test_duplicates_dropped);
    tcase_add_test(tc, test_deterministic_order_across_epochs);
    tcase_add_test(tc, test_mixed_shapes_not_uniform);
    tcase_add_test(tc, test_epochs_must_increase);
    tcase_add_test(tc, test_fill_assembles_in_place);
    tcase_add_test(tc, test_fill_mixed_with_owned_and_sizes);
    tcase_add_test(tc, test_fill_deterministic_order);
    tcase_add_test(tc, test_fill_drop_last_and_refusals);
    tcase_add_test(tc, test_buffers_reused);
    tcase_add_test(tc, test_pool_keeps_peak);
    tcase_add_test(tc, test_aligned_spans);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
