/* The blend of a mixed spec (common/order/blend.c): every prefix within one
 * sample of each source's share, each source in its own shuffle, small
 * sources wrapping only after a whole pass, a schedule switching the mix at
 * its step. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"
#include "common/order/blend.h"
#include "common/spec/mix.h"
#include "tests/unit/fixtures.h"

static sl_mix_t *mk(uint32_t k, const double *w, const uint64_t *sizes, sl_mix_stop_e stop)
{
    sl_mix_t *m = calloc(1, sizeof(*m));
    m->nsources = k;
    m->stop = stop;
    for (uint32_t j = 0; j < k; j++) {
        m->src[j].weight = w[j];
        m->src[j].count = sizes[j];
        snprintf(m->src[j].name, sizeof(m->src[j].name), "s%u", j);
    }
    m->samples_per_epoch = sl_mix_default_spe(m, sizes);
    return m;
}

/* Every prefix of out[from .. to) holds source j within one of w_j * len. */
static void check_prefixes(const sl_mix_t *m, const double *w, const uint64_t *out, uint64_t from,
                           uint64_t to)
{
    double sum = 0.0;
    uint64_t got[SL_MIX_MAX_SOURCES] = {0};
    for (uint32_t j = 0; j < m->nsources; j++) {
        sum += w[j];
    }
    for (uint64_t p = from; p < to; p++) {
        uint32_t j = sl_blend_source_of(m, out[p]);
        ck_assert_uint_lt(j, m->nsources);
        got[j]++;
        for (uint32_t i = 0; i < m->nsources; i++) {
            double want = w[i] / sum * (double)(p - from + 1);
            ck_assert_msg(fabs((double)got[i] - want) <= 1.0,
                          "source %u: %llu of %llu positions, share %.3f", i,
                          (unsigned long long)got[i], (unsigned long long)(p - from + 1),
                          w[i] / sum);
        }
    }
}

START_TEST(test_blend_prefix_shares)
{
    sl_rng_t r;
    sl_rng_init(&r, 42, 0, (uint64_t)_i, 0);
    uint32_t k = 2 + (uint32_t)sl_rng_below(&r, 5);
    double w[SL_MIX_MAX_SOURCES];
    uint64_t sizes[SL_MIX_MAX_SOURCES];
    for (uint32_t j = 0; j < k; j++) {
        w[j] = 0.01 + sl_rng_uniform(&r) * 5.0;
        sizes[j] = 1 + sl_rng_below(&r, 400);
    }
    sl_mix_t *m = mk(k, w, sizes, _i % 2 ? SL_MIX_STOP_FIRST : SL_MIX_STOP_ALL);
    uint64_t n = m->samples_per_epoch;
    ck_assert_uint_gt(n, 0);
    uint64_t *out = malloc(n * sizeof(*out)), *again = malloc(n * sizeof(*again));
    uint64_t counts[SL_MIX_MAX_SOURCES];
    ck_assert_int_eq(sl_blend_epoch(m, 9, true, 32, 0, out, counts), 0);
    check_prefixes(m, w, out, 0, n);
    /* A pure function: the same inputs, the same order. */
    ck_assert_int_eq(sl_blend_epoch(m, 9, true, 32, 0, again, NULL), 0);
    ck_assert_int_eq(memcmp(out, again, n * sizeof(*out)), 0);
    /* first_exhausted: no source repeats; all_exhausted: every one whole. */
    for (uint32_t j = 0; j < k; j++) {
        if (m->stop == SL_MIX_STOP_FIRST) {
            ck_assert_uint_le(counts[j], sizes[j]);
        } else {
            ck_assert_uint_ge(counts[j] + 1, sizes[j]);
        }
    }
    free(out);
    free(again);
    free(m);
}
END_TEST

START_TEST(test_blend_wraps_after_a_pass)
{
    double w[2] = {0.5, 0.5};
    uint64_t sizes[2] = {7, 100};
    sl_mix_t *m = mk(2, w, sizes, SL_MIX_STOP_ALL);
    ck_assert_uint_eq(m->samples_per_epoch, 200);
    uint64_t out[200];
    ck_assert_int_eq(sl_blend_epoch(m, 3, true, 16, 1, out, NULL), 0);
    uint64_t small[100], ns = 0, seen_big[100] = {0};
    for (uint64_t p = 0; p < 200; p++) {
        if (out[p] < 7) {
            small[ns++] = out[p];
        } else {
            ck_assert_uint_lt(out[p], 107);
            seen_big[out[p] - 7]++;
        }
    }
    ck_assert_uint_eq(ns, 100);
    for (uint64_t b = 0; b < 100; b++) {
        ck_assert_uint_eq(seen_big[b], 1); /* the large source never repeats */
    }
    /* Each whole pass of the small source is a permutation of it, and the
     * passes are reshuffled (not all in the same order). */
    int differ = 0;
    for (uint64_t pass = 0; pass < 100 / 7; pass++) {
        int seen[7] = {0};
        for (uint64_t i = 0; i < 7; i++) {
            seen[small[pass * 7 + i]]++;
            differ |= pass > 0 && small[pass * 7 + i] != small[i];
        }
        for (int i = 0; i < 7; i++) {
            ck_assert_int_eq(seen[i], 1);
        }
    }
    ck_assert(differ);
    /* Each source on its own stream: another epoch, another order. */
    uint64_t other[200];
    ck_assert_int_eq(sl_blend_epoch(m, 3, true, 16, 2, other, NULL), 0);
    ck_assert_int_ne(memcmp(out, other, sizeof(out)), 0);
    /* Unshuffled: each source in index order. */
    ck_assert_int_eq(sl_blend_epoch(m, 3, false, 16, 1, out, NULL), 0);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[1], 7);
    ck_assert_uint_eq(out[2], 1);
    free(m);
}
END_TEST

START_TEST(test_blend_schedule_switches_at_its_step)
{
    double w[3] = {1.0, 1.0, 2.0};
    uint64_t sizes[3] = {300, 300, 300};
    sl_mix_t *m = mk(3, w, sizes, SL_MIX_STOP_FIRST);
    ck_assert_uint_eq(m->samples_per_epoch, 600);
    m->nsteps = 1;
    m->steps[0].from_step = 7; /* steps of 20 positions: position 140 */
    m->steps[0].weights[0] = 3.0;
    m->steps[0].weights[1] = 0.0;
    m->steps[0].weights[2] = 1.0;
    uint64_t out[600];
    ck_assert_int_eq(sl_blend_epoch(m, 5, true, 20, 0, out, NULL), 0);
    check_prefixes(m, w, out, 0, 140);
    check_prefixes(m, m->steps[0].weights, out, 140, 600);
    for (uint64_t p = 140; p < 600; p++) {
        ck_assert_uint_ne(sl_blend_source_of(m, out[p]), 1); /* weight 0: off */
    }
    /* Epoch 1 starts at step 30, past the change: the new weights all along. */
    ck_assert_uint_eq(sl_blend_step(m, 20, 1, 0), 30);
    ck_assert_int_eq(sl_blend_epoch(m, 5, true, 20, 1, out, NULL), 0);
    check_prefixes(m, m->steps[0].weights, out, 0, 600);
    /* An unresolved mix is refused, not guessed. */
    m->src[2].count = 0;
    ck_assert_int_eq(sl_blend_epoch(m, 5, true, 20, 1, out, NULL), -EINVAL);
    free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("blend");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_blend_prefix_shares, 0, 200);
    tcase_add_test(tc, test_blend_wraps_after_a_pass);
    tcase_add_test(tc, test_blend_schedule_switches_at_its_step);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
