/* bigbuf: large buffers are mapped on their own, 2 MB aligned and whole
 * (every byte asked for is writable and kept), small ones come from malloc,
 * and the batcher's pool hands the same mapped buffer back after a batch
 * is freed. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/engine/batcher.h"
#include "common/engine/bigbuf.h"
#include "tests/unit/fixtures.h"

START_TEST(test_small_is_malloc)
{
    ck_assert_int_eq(sl_bigbuf_mapped(0), 0);
    ck_assert_int_eq(sl_bigbuf_mapped(SL_BIGBUF_MIN - 1), 0);
    ck_assert_int_eq(sl_bigbuf_mapped(SL_BIGBUF_MIN), 1);
    ck_assert_int_eq(sl_bigbuf_mapped(SIZE_MAX), 0); /* would overflow the rounding */
    uint8_t *p = sl_bigbuf_alloc(100);
    ck_assert_ptr_nonnull(p);
    memset(p, 7, 100);
    sl_bigbuf_free(p, 100);
    sl_bigbuf_free(NULL, 100);
    sl_bigbuf_free(NULL, SL_BIGBUF_MIN);
}
END_TEST

START_TEST(test_large_is_aligned_and_whole)
{
    /* Sizes around huge-page boundaries: every byte asked for is usable. */
    const size_t sizes[] = {SL_BIGBUF_MIN, SL_BIGBUF_MIN + 1, 3 * SL_BIGBUF_HUGE - 1, 32 * 602112};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        uint8_t *p = sl_bigbuf_alloc(n);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % SL_BIGBUF_HUGE, 0);
        p[0] = 1;
        p[n - 1] = 2;
        memset(p, 3, n);
        ck_assert_uint_eq(p[n - 1], 3);
        sl_bigbuf_free(p, n);
    }
}
END_TEST

static sl_sample_t float_sample(uint64_t pos, size_t n, uint8_t v)
{
    sl_sample_t s = {.epoch = 0, .position = pos, .index = pos, .skip = -1};
    sl_tensor_init(&s.t);
    ck_assert_int_eq(sl_tensor_reshape(&s.t, SL_DT_F32, SL_LAYOUT_CHW, (uint32_t)(n / 12), 1, 3),
                     0);
    memset(s.t.data, v, s.t.nbytes);
    return s;
}

/* A batch of 2 MB and more lives in a mapped buffer; freed, the pool gives
 * the same buffer to the next batch (no fresh mapping, no fresh faults). */
START_TEST(test_pool_reuses_mapped)
{
    size_t per = 3 * 4 * 100000; /* 1.2 MB float32 samples: a batch of 2 is 2.4 MB */
    sl_batcher_t *b = sl_batcher_new(2, 0, 0);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 6), 0);
    uint8_t *first = NULL;
    for (uint64_t i = 0; i < 6; i += 2) {
        sl_sample_t s0 = float_sample(i, per, (uint8_t)i);
        sl_sample_t s1 = float_sample(i + 1, per, (uint8_t)(i + 1));
        ck_assert_uint_eq(s0.t.nbytes, per);
        ck_assert_int_eq(sl_batcher_add(b, &s0), 0);
        ck_assert_int_eq(sl_batcher_add(b, &s1), 0);
        sl_batch_t *bt = sl_batcher_pop(b);
        ck_assert_ptr_nonnull(bt);
        ck_assert_uint_eq(bt->n, 2);
        ck_assert_uint_eq((uintptr_t)bt->data % SL_BIGBUF_HUGE, 0);
        ck_assert_uint_eq(bt->data[0], (uint8_t)i);
        ck_assert_uint_eq(bt->data[2 * per - 1], (uint8_t)(i + 1));
        if (first == NULL) {
            first = bt->data;
        } else {
            ck_assert_ptr_eq(bt->data, first);
        }
        sl_batch_free(bt);
    }
    sl_batcher_stats_t st;
    sl_batcher_get_stats(b, &st);
    ck_assert_uint_eq(st.buffers_made, 1);
    sl_batcher_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bigbuf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_small_is_malloc);
    tcase_add_test(tc, test_large_is_aligned_and_whole);
    tcase_add_test(tc, test_pool_reuses_mapped);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
