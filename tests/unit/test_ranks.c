/* Share arithmetic of multi-rank jobs (common/order/ranks.h) and the batcher's
 * resume support (sl_batcher_mark_done, drop tracking). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine/batcher.h"
#include "common/order/ranks.h"
#include "common/base/rng.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"

static sl_spec_t spec_of(uint32_t world, uint32_t rank, sl_rank_padding_e pad)
{
    sl_spec_t s;
    sl_spec_init(&s);
    s.seed = 11;
    s.world_size = world;
    s.rank = rank;
    s.rank_padding = pad;
    return s;
}

/* Every rank's order over n samples: equal counts; drop: disjoint and the
 * union is the epoch order minus its last n mod W positions; pad: the union
 * is every sample, the first (W - n mod W) mod W positions once more. */
static void check_shares(uint64_t n, uint32_t world, sl_rank_padding_e pad, uint64_t epoch)
{
    uint64_t *full = malloc(n * sizeof(*full));
    uint64_t *scratch = malloc(n * sizeof(*scratch));
    uint64_t *out = malloc((n / world + 2) * sizeof(*out));
    unsigned *seen = calloc(n, sizeof(*seen));
    sl_epoch_order(11, epoch, 1, n, full);
    uint64_t count = sl_rank_count(n, world, pad);
    uint64_t want = pad == SL_RANK_PAD ? (n + world - 1) / world : n / world;
    ck_assert_uint_eq(count, want);
    for (uint32_t r = 0; r < world; r++) {
        sl_spec_t s = spec_of(world, r, pad);
        ck_assert_uint_eq(sl_spec_positions(&s, n), count);
        sl_rank_order(&s, epoch, n, scratch, out);
        for (uint64_t q = 0; q < count; q++) {
            ck_assert_uint_lt(out[q], n);
            seen[out[q]]++;
        }
    }
    uint64_t extra = count * world - n; /* pad only */
    for (uint64_t p = 0; p < n; p++) {
        unsigned expect = 1;
        if (pad == SL_RANK_DROP && p >= count * world) {
            expect = 0;
        } else if (pad == SL_RANK_PAD && world > 1 && n >= extra && p < extra) {
            expect = 2;
        }
        if (pad == SL_RANK_PAD && n < extra) {
            continue; /* more ranks than samples: checked by the total below */
        }
        ck_assert_uint_eq(seen[full[p]], expect);
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        total += seen[i];
    }
    ck_assert_uint_eq(total, count * world);
    free(full);
    free(scratch);
    free(out);
    free(seen);
}

START_TEST(test_world_divides)
{
    check_shares(96, 4, SL_RANK_DROP, 0);
    check_shares(96, 4, SL_RANK_PAD, 1);
    check_shares(10, 1, SL_RANK_DROP, 0);
}
END_TEST

START_TEST(test_world_does_not_divide)
{
    for (uint32_t w = 2; w <= 9; w++) {
        check_shares(90, w, SL_RANK_DROP, w);
        check_shares(90, w, SL_RANK_PAD, w);
    }
    check_shares(7, 3, SL_RANK_PAD, 2);
}
END_TEST

START_TEST(test_more_ranks_than_samples)
{
    ck_assert_uint_eq(sl_rank_count(3, 8, SL_RANK_DROP), 0);
    ck_assert_uint_eq(sl_rank_count(3, 8, SL_RANK_PAD), 1);
    check_shares(3, 8, SL_RANK_PAD, 0);
    /* PyTorch: padded[p] = order[p mod n]. */
    ck_assert_uint_eq(sl_rank_global(3, 8, 7, 0), 1);
    ck_assert_uint_eq(sl_rank_global(3, 8, 2, 0), 2);
    ck_assert_uint_eq(sl_rank_count(0, 4, SL_RANK_PAD), 0);
}
END_TEST

START_TEST(test_global_positions)
{
    /* Rank r owns r, r + W, ...: the DistributedSampler stride. */
    ck_assert_uint_eq(sl_rank_global(90, 4, 1, 0), 1);
    ck_assert_uint_eq(sl_rank_global(90, 4, 1, 21), 85);
    ck_assert_uint_eq(sl_rank_global(90, 4, 3, 22), 1);   /* 91 wraps (pad) */
    ck_assert_uint_eq(sl_rank_global(90, 1, 0, 89), 89);
}
END_TEST

START_TEST(test_epochs_differ)
{
    /* Every epoch reshuffles before sharing: a rank's set changes. */
    sl_spec_t s = spec_of(4, 0, SL_RANK_DROP);
    s.shuffle = true;
    uint64_t scratch[90], a[22], b[22];
    sl_rank_order(&s, 0, 90, scratch, a);
    sl_rank_order(&s, 1, 90, scratch, b);
    ck_assert_int_ne(memcmp(a, b, sizeof(a)), 0);
}
END_TEST

START_TEST(test_spec_keys_round_trip)
{
    const char *j = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"t\"}, \"stages\": [],"
                    " \"world_size\": 4, \"rank\": 3, \"rank_padding\": \"pad\"}";
    sl_spec_t s;
    char err[256];
    ck_assert_int_eq(sl_spec_parse("x", j, strlen(j), &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(s.world_size, 4);
    ck_assert_uint_eq(s.rank, 3);
    ck_assert_int_eq(s.rank_padding, SL_RANK_PAD);
    char *c = sl_spec_to_json(&s);
    sl_spec_t t;
    ck_assert_int_eq(sl_spec_parse("x", c, strlen(c), &t, err, sizeof(err)), 0);
    ck_assert_uint_eq(t.world_size, 4);
    ck_assert_uint_eq(t.rank, 3);
    ck_assert_int_eq(t.rank_padding, SL_RANK_PAD);
    free(c);
    /* A single consumer's canonical JSON has no rank keys (its hash stays). */
    s.world_size = 1;
    s.rank = 0;
    c = sl_spec_to_json(&s);
    ck_assert_ptr_null(strstr(c, "world_size"));
    free(c);
    const char *bad = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"t\"}, \"stages\": [],"
                      " \"world_size\": 4, \"rank\": 4}";
    ck_assert_int_eq(sl_spec_parse("x", bad, strlen(bad), &s, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "rank"));
}
END_TEST

static int add(sl_batcher_t *b, uint64_t epoch, uint64_t pos, uint64_t split)
{
    sl_sample_t s = {.epoch = epoch, .position = pos, .skip = -1, .split_id = split};
    sl_tensor_init(&s.t);
    ck_assert_int_eq(sl_tensor_reshape(&s.t, SL_DT_U8, SL_LAYOUT_HWC, 1, 1, 1), 0);
    return sl_batcher_add(b, &s);
}

START_TEST(test_batcher_resume)
{
    /* A restarted rank: positions 0..3 of epoch 2 were delivered before. */
    sl_batcher_t *b = sl_batcher_new(2, 0, 1);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 2, 6), 0);
    ck_assert_int_eq(sl_batcher_mark_done(b, 2, 0, 4), 4);
    ck_assert_int_eq(sl_batcher_mark_done(b, 2, 0, 4), 0);
    ck_assert_int_eq(sl_batcher_mark_done(b, 2, 5, 7), -EINVAL);
    ck_assert_int_eq(sl_batcher_mark_done(b, 3, 0, 1), -EINVAL);
    ck_assert_int_eq(add(b, 2, 1, 0), 1); /* a late copy: duplicate */
    ck_assert_int_eq(add(b, 2, 5, 1), 0);
    ck_assert_ptr_null(sl_batcher_pop(b)); /* deterministic: waits for 4 */
    ck_assert_int_eq(add(b, 2, 4, 1), 0);
    sl_batch_t *x = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(x);
    ck_assert_uint_eq(x->n, 2);
    ck_assert_uint_eq(x->meta[0].position, 4);
    ck_assert_uint_eq(x->meta[1].split_id, 1);
    sl_batch_free(x);
    ck_assert(sl_batcher_done(b));
    sl_batcher_stats_t st;
    sl_batcher_get_stats(b, &st);
    ck_assert_uint_eq(st.delivered, 2); /* marked positions are counted nowhere */
    for (int i = 0; i < SL_SKIP__COUNT; i++) {
        ck_assert_uint_eq(st.skipped[i], 0);
    }
    sl_batcher_free(b);
}
END_TEST

START_TEST(test_batcher_drop_tracking)
{
    sl_batcher_t *b = sl_batcher_new(4, 1, 0);
    sl_batcher_track_drops(b);
    ck_assert_int_eq(sl_batcher_begin_epoch(b, 0, 6), 0);
    for (uint64_t p = 0; p < 6; p++) {
        ck_assert_int_eq(add(b, 0, p, 10 + p / 4), 0);
    }
    sl_batch_t *x = sl_batcher_pop(b);
    ck_assert_ptr_nonnull(x);
    sl_batch_free(x);
    ck_assert_ptr_null(sl_batcher_pop(b)); /* the short batch was dropped */
    uint64_t ids[8];
    ck_assert_uint_eq(sl_batcher_take_dropped(b, ids, 1), 1);
    ck_assert_uint_eq(ids[0], 11);
    ck_assert_uint_eq(sl_batcher_take_dropped(b, ids, 8), 1);
    ck_assert_uint_eq(sl_batcher_take_dropped(b, ids, 8), 0);
    sl_batcher_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ranks");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_world_divides);
    tcase_add_test(tc, test_world_does_not_divide);
    tcase_add_test(tc, test_more_ranks_than_samples);
    tcase_add_test(tc, test_global_positions);
    tcase_add_test(tc, test_epochs_differ);
    tcase_add_test(tc, test_spec_keys_round_trip);
    tcase_add_test(tc, test_batcher_resume);
    tcase_add_test(tc, test_batcher_drop_tracking);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
