#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"
#include "tests/unit/fixtures.h"

START_TEST(test_same_key_same_stream)
{
    sl_rng_t a, b;
    sl_rng_init(&a, 42, 3, 1000, 2);
    sl_rng_init(&b, 42, 3, 1000, 2);
    for (int i = 0; i < 100; i++) {
        ck_assert_uint_eq(sl_rng_u64(&a), sl_rng_u64(&b));
    }
}
END_TEST

START_TEST(test_keys_differ)
{
    /* Changing any part of the key changes the first draw. */
    sl_rng_t base, r;
    sl_rng_init(&base, 1, 2, 3, 4);
    uint64_t x = sl_rng_u64(&base);
    const uint64_t keys[4][4] = {{2, 2, 3, 4}, {1, 3, 3, 4}, {1, 2, 4, 4}, {1, 2, 3, 5}};
    for (int k = 0; k < 4; k++) {
        sl_rng_init(&r, keys[k][0], keys[k][1], keys[k][2], keys[k][3]);
        ck_assert_uint_ne(sl_rng_u64(&r), x);
    }
}
END_TEST

START_TEST(test_uniform_range_and_mean)
{
    sl_rng_t r;
    sl_rng_init(&r, 7, 0, 0, 0);
    double sum = 0;
    int n = 100000;
    for (int i = 0; i < n; i++) {
        double u = sl_rng_uniform(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        sum += u;
    }
    ck_assert_double_eq_tol(sum / n, 0.5, 0.01);
    uint64_t counts[7] = {0};
    for (int i = 0; i < 70000; i++) {
        counts[sl_rng_below(&r, 7)]++;
    }
    for (int i = 0; i < 7; i++) {
        ck_assert_uint_gt(counts[i], 9000);
        ck_assert_uint_lt(counts[i], 11000);
    }
}
END_TEST

START_TEST(test_epoch_order_is_permutation)
{
    enum { N = 1000 };
    uint64_t *o1 = malloc(N * sizeof(*o1));
    uint64_t *o2 = malloc(N * sizeof(*o2));
    char seen[N];
    memset(seen, 0, sizeof(seen));
    sl_epoch_order(42, 0, 1, N, o1);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_lt(o1[i], N);
        ck_assert_int_eq(seen[o1[i]], 0);
        seen[o1[i]] = 1;
    }
    /* Same epoch: same order; next epoch: a different one; no shuffle: identity. */
    sl_epoch_order(42, 0, 1, N, o2);
    ck_assert_mem_eq(o1, o2, N * sizeof(*o1));
    sl_epoch_order(42, 1, 1, N, o2);
    ck_assert(memcmp(o1, o2, N * sizeof(*o1)) != 0);
    sl_epoch_order(42, 1, 0, N, o2);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(o2[i], (uint64_t)i);
    }
    free(o1);
    free(o2);
}
END_TEST

/* Block shuffle: a permutation for every n and block (short last block,
 * n below one block, exact multiples), the same per (seed, epoch), and each
 * window of the order made of at most SL_SHUFFLE_WINDOW_BLOCKS blocks, so
 * a split reads a few sequential runs. */
START_TEST(test_epoch_order_blocks)
{
    const uint64_t ns[] = {1, 2, 7, 63, 64, 65, 500, 1000, 4097};
    const uint64_t blocks[] = {2, 3, 16, 64, 100};
    uint64_t *o = malloc(5000 * sizeof(*o)), *o2 = malloc(5000 * sizeof(*o2));
    char *seen = malloc(5000);
    for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
        for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
            uint64_t n = ns[a], blk = blocks[b];
            memset(seen, 0, n);
            sl_epoch_order_blocks(9, 3, n, blk, o);
            for (uint64_t i = 0; i < n; i++) {
                ck_assert_uint_lt(o[i], n);
                ck_assert_int_eq(seen[o[i]], 0);
                seen[o[i]] = 1;
            }
            sl_epoch_order_blocks(9, 3, n, blk, o2);
            ck_assert_mem_eq(o, o2, n * sizeof(*o));
            uint64_t win = blk * SL_SHUFFLE_WINDOW_BLOCKS;
            for (uint64_t s = 0; s < n; s += win) {
                uint64_t nblk = 0;
                memset(seen, 0, n / blk + 1);
                for (uint64_t i = s; i < n && i < s + win; i++) {
                    nblk += seen[o[i] / blk] == 0;
                    seen[o[i] / blk] = 1;
                }
                ck_assert_uint_le(nblk, SL_SHUFFLE_WINDOW_BLOCKS + 1); /* +1: the short block */
            }
        }
    }
    /* Epochs differ; block 1 is the plain shuffle. */
    sl_epoch_order_blocks(9, 4, 1000, 16, o2);
    sl_epoch_order_blocks(9, 3, 1000, 16, o);
    ck_assert(memcmp(o, o2, 1000 * sizeof(*o)) != 0);
    sl_epoch_order_blocks(9, 3, 1000, 1, o);
    sl_epoch_order(9, 3, 1, 1000, o2);
    ck_assert_mem_eq(o, o2, 1000 * sizeof(*o));
    free(o);
    free(o2);
    free(seen);
}
END_TEST

/* Beta(a, a) for the batch transforms' lambda (mixup 0.2, cutmix 1.0) and
 * an asymmetric one: mean a / (a + b), variance ab / ((a+b)^2 (a+b+1)). */
START_TEST(test_beta_moments)
{
    static const double shapes[][2] = {{0.2, 0.2}, {1.0, 1.0}, {2.5, 0.7}, {0.5, 3.0}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        double a = shapes[k][0], b = shapes[k][1];
        sl_rng_t r;
        sl_rng_init(&r, 42, 1, 7, 99);
        const int n = 200000;
        double sum = 0, sum2 = 0;
        for (int i = 0; i < n; i++) {
            double x = sl_rng_beta(&r, a, b);
            ck_assert(x >= 0.0 && x <= 1.0);
            sum += x;
            sum2 += x * x;
        }
        double mean = sum / n, var = sum2 / n - mean * mean;
        double want_mean = a / (a + b);
        double want_var = a * b / ((a + b) * (a + b) * (a + b + 1));
        ck_assert_double_eq_tol(mean, want_mean, 0.005);
        ck_assert_double_eq_tol(var, want_var, 0.003);
    }
    /* Gamma(3): mean 3, variance 3; normal: mean 0, variance 1. */
    sl_rng_t r;
    sl_rng_init(&r, 5, 0, 0, 0);
    double gs = 0, gs2 = 0, ns = 0, ns2 = 0;
    for (int i = 0; i < 100000; i++) {
        double g = sl_rng_gamma(&r, 3.0), z = sl_rng_normal(&r);
        gs += g;
        gs2 += g * g;
        ns += z;
        ns2 += z * z;
    }
    ck_assert_double_eq_tol(gs / 1e5, 3.0, 0.03);
    ck_assert_double_eq_tol(gs2 / 1e5 - (gs / 1e5) * (gs / 1e5), 3.0, 0.1);
    ck_assert_double_eq_tol(ns / 1e5, 0.0, 0.01);
    ck_assert_double_eq_tol(ns2 / 1e5, 1.0, 0.02);
}
END_TEST

/* A key gives the same draws on any host, any run. */
START_TEST(test_beta_fixed_key)
{
    sl_rng_t r1, r2;
    sl_rng_init(&r1, 3, 2, 64, 7);
    sl_rng_init(&r2, 3, 2, 64, 7);
    double first = sl_rng_beta(&r1, 0.2, 0.2);
    ck_assert(first == sl_rng_beta(&r2, 0.2, 0.2));
    for (int i = 0; i < 100; i++) {
        ck_assert(sl_rng_beta(&r1, 1.0, 1.0) == sl_rng_beta(&r2, 1.0, 1.0));
    }
    sl_rng_init(&r2, 3, 2, 65, 7);
    ck_assert(first != sl_rng_beta(&r2, 0.2, 0.2));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_same_key_same_stream);
    tcase_add_test(tc, test_keys_differ);
    tcase_add_test(tc, test_uniform_range_and_mean);
    tcase_add_test(tc, test_epoch_order_is_permutation);
    tcase_add_test(tc, test_epoch_order_blocks);
    tcase_add_test(tc, test_beta_moments);
    tcase_add_test(tc, test_beta_fixed_key);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
