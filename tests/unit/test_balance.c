/* common/order/balance: the trainer cost model; LPT packing places every
 * item once, keeps token budgets where any bin has room, is deterministic,
 * and on heavy-tailed costs leaves far less imbalance than equal counts;
 * the look-ahead deal is a permutation giving every step its count. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"
#include "common/order/balance.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"

START_TEST(test_cost_model)
{
    sl_trainer_model_t m = {.a = 2, .b = 0.5, .c = 10, .d = 1};
    ck_assert(sl_trainer_cost(&m, 4, 3) == 2 * 4 + 0.5 * 16 + 30 + 1);
    sl_trainer_model_t neg = {.d = -5};
    ck_assert(sl_trainer_cost(&neg, 0, 0) == 0);
}
END_TEST

/* Heavy-tailed costs: most small, a few an order of magnitude larger. */
static void skewed(double *c, uint32_t *tok, uint32_t n, uint64_t seed)
{
    sl_rng_t r;
    sl_rng_init(&r, seed, 0, 0, 0);
    for (uint32_t i = 0; i < n; i++) {
        double u = sl_rng_uniform(&r);
        tok[i] = (uint32_t)(30 + 4000 * pow(u, 6));
        c[i] = tok[i];
    }
}

START_TEST(test_pack)
{
    enum { N = 64, W = 8 };
    double c[N], load[W], cnt[W] = {0};
    uint32_t tok[N], bin[N], bin2[N];
    skewed(c, tok, N, 7);
    ck_assert_int_eq(sl_balance_pack(c, tok, N, W, 0, bin, load), 0);
    double sum = 0, lsum = 0, max = 0;
    for (uint32_t i = 0; i < N; i++) {
        ck_assert_uint_lt(bin[i], W);
        sum += c[i];
        cnt[i % W] += c[i];
    }
    for (uint32_t b = 0; b < W; b++) {
        lsum += load[b];
        max = load[b] > max ? load[b] : max;
    }
    ck_assert(fabs(sum - lsum) < 1e-6);
    double mean = sum / W, cmax = 0;
    for (uint32_t b = 0; b < W; b++) {
        cmax = cnt[b] > cmax ? cnt[b] : cmax;
    }
    /* LPT's bound: max <= mean + the largest item; and it beats equal counts. */
    double big = 0;
    for (uint32_t i = 0; i < N; i++) {
        big = c[i] > big ? c[i] : big;
    }
    ck_assert(max <= mean + big);
    ck_assert_msg(max / mean < cmax / mean, "balanced %.3f, counts %.3f", max / mean,
                  cmax / mean);
    /* Deterministic. */
    ck_assert_int_eq(sl_balance_pack(c, tok, N, W, 0, bin2, load), 0);
    ck_assert_mem_eq(bin, bin2, sizeof(bin));
    ck_assert_int_eq(sl_balance_pack(c, tok, N, 0, 0, bin2, load), -EINVAL);
}
END_TEST

START_TEST(test_token_budget)
{
    double c[6] = {6, 5, 4, 3, 2, 1}, load[2];
    uint32_t tok[6] = {600, 500, 400, 300, 200, 100}, bin[6];
    ck_assert_int_eq(sl_balance_pack(c, tok, 6, 2, 1100, bin, load), 0);
    uint64_t t[2] = {0};
    for (int i = 0; i < 6; i++) {
        t[bin[i]] += tok[i];
    }
    ck_assert_uint_le(t[0], 1100);
    ck_assert_uint_le(t[1], 1100);
    /* No room anywhere: the item still goes somewhere (least loaded). */
    uint32_t huge[2] = {5000, 5000};
    double hc[2] = {1, 1};
    ck_assert_int_eq(sl_balance_pack(hc, huge, 2, 2, 100, bin, load), 0);
    ck_assert_uint_ne(bin[0], bin[1]);
}
END_TEST

START_TEST(test_deal)
{
    enum { S = 4, P = 16, N = S * P };
    double c[N];
    uint32_t tok[N], order[N];
    skewed(c, tok, N, 3);
    ck_assert_int_eq(sl_balance_deal(c, S, P, order), 0);
    char seen[N] = {0};
    double step[S] = {0};
    for (uint32_t k = 0; k < N; k++) {
        ck_assert_uint_lt(order[k], N);
        ck_assert_int_eq(seen[order[k]], 0);
        seen[order[k]] = 1;
        step[k / P] += c[order[k]];
    }
    /* The S largest samples land in S different steps. */
    char taken[N] = {0};
    char step_has[S] = {0};
    for (uint32_t t = 0; t < S; t++) {
        uint32_t best = 0;
        for (uint32_t i = 0; i < N; i++) {
            if (!taken[i] && (taken[best] || c[i] > c[best])) {
                best = i;
            }
        }
        taken[best] = 1;
        uint32_t at = 0;
        while (order[at] != best) {
            at++;
        }
        ck_assert_int_eq(step_has[at / P], 0);
        step_has[at / P] = 1;
    }
    double mx = 0, mn = 1e300;
    for (uint32_t s = 0; s < S; s++) {
        mx = step[s] > mx ? step[s] : mx;
        mn = step[s] < mn ? step[s] : mn;
    }
    ck_assert_msg(mx / mn < 1.5, "step sums %.0f .. %.0f", mn, mx);
}
END_TEST

/* The balanced epoch order: a permutation of the base order; every full
 * step gives each rank the same count at a far more even predicted cost
 * than the count-based order; the partial last step is untouched;
 * deterministic. */
START_TEST(test_order)
{
    enum { N = 16 * 9 + 5, W = 4, M = 2, B = 2 }; /* G = 16: 9 steps + a partial one */
    sl_spec_t spec;
    sl_spec_init(&spec);
    spec.world_size = W;
    spec.batch_size = B;
    spec.batching.mode = SL_BATCHING_BALANCED;
    spec.batching.microbatches = M;
    spec.batching.lookahead = 4;
    double dc[N];
    float c[N];
    uint32_t tok[N];
    skewed(dc, tok, N, 11);
    for (int i = 0; i < N; i++) {
        c[i] = (float)dc[i];
    }
    uint64_t base[N], bal[N], again[N];
    for (int i = 0; i < N; i++) {
        base[i] = bal[i] = again[i] = (uint64_t)(N - 1 - i);
    }
    ck_assert_int_eq(sl_balance_order(&spec, N, c, tok, bal), 0);
    ck_assert_int_eq(sl_balance_order(&spec, N, c, tok, again), 0);
    ck_assert_mem_eq(bal, again, sizeof(bal));
    char seen[N] = {0};
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(seen[bal[i]], 0);
        seen[bal[i]] = 1;
    }
    for (int i = 16 * 9; i < N; i++) {
        ck_assert_uint_eq(bal[i], base[i]); /* the partial step */
    }
    /* Rank r owns global positions q W + r; a step is 16 positions. */
    double imb_b = 0, imb_c = 0;
    for (int st = 0; st < 9; st++) {
        double lb[W] = {0}, lc[W] = {0};
        for (int p = st * 16; p < st * 16 + 16; p++) {
            lb[p % W] += c[bal[p]];
            lc[p % W] += c[base[p]];
        }
        double mb = 0, mc = 0, sb = 0, sc = 0;
        for (int r = 0; r < W; r++) {
            mb = lb[r] > mb ? lb[r] : mb;
            mc = lc[r] > mc ? lc[r] : mc;
            sb += lb[r];
            sc += lc[r];
        }
        imb_b += mb / (sb / W) / 9;
        imb_c += mc / (sc / W) / 9;
    }
    /* 4 samples per rank and step of a heavy tail: far from 1, far below counts. */
    ck_assert_msg(imb_b < imb_c - 0.3, "balanced %.3f, counts %.3f", imb_b, imb_c);
    /* One rank: only microbatches are balanced, still a permutation. */
    spec.world_size = 1;
    ck_assert_int_eq(sl_balance_order(&spec, N, c, tok, again), 0);
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(seen[again[i]], 0);
        seen[again[i]] = 1;
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("balance");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cost_model);
    tcase_add_test(tc, test_pack);
    tcase_add_test(tc, test_token_budget);
    tcase_add_test(tc, test_deal);
    tcase_add_test(tc, test_order);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
