/* common/order/pack: one step's heuristic against an exact search on small
 * steps (with budgets), and a packed epoch's layout: every sample once,
 * budgets kept (a longer sample alone in its pack), every step but the last
 * using every pack, deterministic; and on skewed lengths far less imbalance
 * than equal counts per rank. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"
#include "common/order/balance.h"
#include "common/order/pack.h"
#include "common/order/ranks.h"
#include "tests/unit/fixtures.h"

/* Attention-dominated, as the trainer: L + 0.002 L^2 + 16. */
static double attn(uint32_t tok) { return tok + 0.002 * (double)tok * tok + 16; }

typedef struct {
    const sl_pack_params_t *p;
    const sl_pack_item_t *it;
    uint32_t n, np;
    uint32_t at[16];
    uint64_t tok[16];
    uint32_t cnt[16];
    double best;
} exact_t;

/* Exhaustive: every item placed, budgets kept (an item alone in a pack may
 * exceed them), no pack empty. */
static void search(exact_t *e, uint32_t i)
{
    if (i == e->n) {
        double load[8] = {0}, max = 0;
        for (uint32_t b = 0; b < e->np; b++) {
            if (e->cnt[b] == 0) {
                return;
            }
        }
        for (uint32_t k = 0; k < e->n; k++) {
            load[e->at[k] / e->p->micro] += e->it[k].cost;
        }
        for (uint32_t r = 0; r < e->p->world; r++) {
            max = load[r] > max ? load[r] : max;
        }
        e->best = max < e->best ? max : e->best;
        return;
    }
    for (uint32_t b = 0; b < e->np; b++) {
        bool ok = e->cnt[b] == 0 ||
                  (e->cnt[b] < e->p->cap && e->tok[b] + e->it[i].tokens <= e->p->token_budget);
        if (!ok) {
            continue;
        }
        e->at[i] = b;
        e->tok[b] += e->it[i].tokens;
        e->cnt[b]++;
        search(e, i + 1);
        e->tok[b] -= e->it[i].tokens;
        e->cnt[b]--;
    }
}

START_TEST(test_step_vs_exact)
{
    sl_rng_t r;
    sl_rng_init(&r, 11, 0, 0, 0);
    double sum_ratio = 0, worst = 0;
    uint32_t compared = 0, unplaced = 0, feasible = 0;
    for (uint32_t t = 0; t < 300; t++) {
        sl_pack_params_t p = {.world = 2 + t % 2,
                              .micro = 1 + (t / 2) % 2,
                              .cap = 4,
                              .token_budget = 1000,
                              .lookahead = 2};
        if (p.world * p.micro > 4) {
            p.micro = 1;
        }
        exact_t e = {.p = &p, .np = p.world * p.micro, .best = INFINITY};
        sl_pack_item_t it[8];
        e.n = e.np + (uint32_t)(sl_rng_uniform(&r) * (8 - e.np));
        for (uint32_t i = 0; i < e.n; i++) {
            double u = sl_rng_uniform(&r);
            uint32_t tok = (uint32_t)(20 + 900 * pow(u, 3));
            it[i] = (sl_pack_item_t){.cost = attn(tok), .tokens = tok};
        }
        e.it = it;
        search(&e, 0);
        if (!isfinite(e.best)) {
            continue; /* no placement of every item keeps the budgets */
        }
        feasible++;
        uint32_t at[8];
        double load[4];
        int placed = sl_pack_step(&p, it, e.n, at, load);
        ck_assert_int_ge(placed, 1);
        if ((uint32_t)placed < e.n) {
            unplaced++; /* the heuristic carries what the exact search fitted */
            continue;
        }
        double max = 0;
        for (uint32_t k = 0; k < p.world; k++) {
            max = load[k] > max ? load[k] : max;
        }
        ck_assert(max >= e.best - 1e-6); /* the search is exact: never beaten */
        sum_ratio += max / e.best;
        worst = max / e.best > worst ? max / e.best : worst;
        compared++;
    }
    printf("pack vs exact: %u feasible steps, %u all placed: mean %.4f, worst %.4f of the "
           "optimum; %u carried a sample the exact search placed\n",
           feasible, compared, sum_ratio / compared, worst, unplaced);
    ck_assert_uint_gt(compared, 100);
    ck_assert(sum_ratio / compared <= 1.05);
    ck_assert(worst <= 4.0 / 3.0 + 1e-9);
    ck_assert_uint_le(unplaced * 10, feasible); /* at most a tenth */
}
END_TEST

/* n samples with skewed lengths: most short, a few up to max_tok. */
static void lengths(uint32_t *tok, float *cost, uint32_t *tiles, uint32_t n, uint32_t max_tok,
                    uint64_t seed)
{
    sl_rng_t r;
    sl_rng_init(&r, seed, 0, 0, 0);
    for (uint32_t i = 0; i < n; i++) {
        double u = sl_rng_uniform(&r);
        tok[i] = (uint32_t)(40 + max_tok * pow(u, 4));
        tiles[i] = (uint32_t)(sl_rng_uniform(&r) * 9);
        cost[i] = (float)attn(tok[i]);
    }
}

typedef struct {
    uint64_t *order;
    uint64_t per_rank;
    sl_pack_stats_t st;
} layout_t;

static void layout(const sl_pack_params_t *p, uint32_t n, const float *cost, const uint32_t *tok,
                   const uint32_t *tiles, layout_t *ret)
{
    uint64_t *base = malloc(n * sizeof(*base));
    ck_assert_ptr_nonnull(base);
    sl_epoch_order(5, 0, true, n, base);
    ret->per_rank = sl_pack_positions(n, p->world, p->micro, p->cap);
    ret->order = malloc(ret->per_rank * p->world * sizeof(*ret->order));
    ck_assert_ptr_nonnull(ret->order);
    ck_assert_int_eq(sl_pack_layout(p, n, base, cost, tok, tiles, 0, ret->order, &ret->st), 0);
    free(base);
}

START_TEST(test_layout)
{
    enum { N = 2000 };
    static uint32_t tok[N], tiles[N];
    static float cost[N];
    lengths(tok, cost, tiles, N, 6000, 3);
    tok[17] = 9000; /* longer than the budget */
    sl_pack_params_t p = {.world = 4,
                          .micro = 2,
                          .cap = 16,
                          .token_budget = 8192,
                          .tile_budget = 40,
                          .lookahead = 3};
    layout_t a, b;
    layout(&p, N, cost, tok, tiles, &a);
    layout(&p, N, cost, tok, tiles, &b);
    uint64_t total = a.per_rank * p.world;
    ck_assert(memcmp(a.order, b.order, total * sizeof(*a.order)) == 0);
    uint8_t *seen = calloc(N, 1);
    uint64_t last_step = 0;
    for (uint64_t step = 0; step * p.micro * p.cap < a.per_rank; step++) {
        uint32_t used = 0;
        for (uint32_t r = 0; r < p.world; r++) {
            for (uint32_t m = 0; m < p.micro; m++) {
                uint64_t tsum = 0, csum = 0;
                uint32_t cnt = 0;
                for (uint32_t j = 0; j < p.cap; j++) {
                    uint64_t q = (step * p.micro + m) * p.cap + j;
                    uint64_t s = a.order[q * p.world + r];
                    if (s == SL_POS_HOLE) {
                        continue;
                    }
                    ck_assert_uint_lt(s, N);
                    ck_assert_int_eq(seen[s], 0);
                    seen[s] = 1;
                    tsum += tok[s];
                    csum += tiles[s];
                    cnt++;
                }
                if (cnt > 1) {
                    ck_assert_uint_le(tsum, p.token_budget);
                    ck_assert_uint_le(csum, p.tile_budget);
                }
                used += cnt > 0;
                last_step = cnt > 0 ? step : last_step;
            }
        }
        if (used > 0 && used < p.world * p.micro) {
            ck_assert_uint_eq(step, last_step); /* only the last step is short */
        }
    }
    for (uint32_t i = 0; i < N; i++) {
        ck_assert_int_eq(seen[i], 1);
    }
    ck_assert_uint_eq(a.st.steps, last_step + 1);
    ck_assert_uint_ge(a.st.oversize, 1);
    printf("layout: %llu steps (bound %llu), fill %.3f, imbalance %.3f (max %.3f), "
           "oversize %llu\n",
           (unsigned long long)a.st.steps, (unsigned long long)(a.per_rank / (p.micro * p.cap)),
           a.st.fill, a.st.imbalance, a.st.imbalance_max, (unsigned long long)a.st.oversize);
    free(seen);
    free(a.order);
    free(b.order);
}
END_TEST

/* Equal counts per rank (DistributedSampler) against packed, on the same
 * order, the same attention-dominated cost: packing must leave less. */
START_TEST(test_beats_counts)
{
    enum { N = 4096, W = 8 };
    static uint32_t tok[N], tiles[N];
    static float cost[N];
    lengths(tok, cost, tiles, N, 4000, 9);
    sl_pack_params_t p = {.world = W, .micro = 2, .cap = 32, .token_budget = 8192, .lookahead = 4};
    layout_t a;
    layout(&p, N, cost, tok, tiles, &a);
    uint64_t base[N];
    sl_epoch_order(5, 0, true, N, base);
    /* Count-based: as many samples a step as packed used on average. */
    uint64_t per = N / a.st.steps / W;
    double imb = 0;
    uint64_t steps = 0;
    for (uint64_t s0 = 0; s0 + per * W <= N; s0 += per * W, steps++) {
        double load[W] = {0}, sum = 0, max = 0;
        for (uint64_t k = 0; k < per * W; k++) {
            load[k % W] += cost[base[s0 + k]];
            sum += cost[base[s0 + k]];
        }
        for (uint32_t r = 0; r < W; r++) {
            max = load[r] > max ? load[r] : max;
        }
        imb += max / (sum / W);
    }
    imb /= (double)steps;
    printf("imbalance: equal counts %.3f, packed %.3f (fill %.3f)\n", imb, a.st.imbalance,
           a.st.fill);
    ck_assert(a.st.imbalance < imb);
    ck_assert(a.st.fill > 0.8);
    free(a.order);
}
END_TEST

START_TEST(test_bad_params)
{
    sl_pack_item_t it[2] = {{.cost = 1, .tokens = 1}, {.cost = 2, .tokens = 2}};
    uint32_t at[2];
    double load[2];
    sl_pack_params_t p = {.world = 2, .micro = 1, .cap = 4, .token_budget = 0, .lookahead = 1};
    ck_assert_int_eq(sl_pack_step(&p, it, 2, at, load), -EINVAL);
    p.token_budget = 10;
    p.micro = 0;
    ck_assert_int_eq(sl_pack_step(&p, it, 2, at, load), -EINVAL);
    p.micro = 1;
    ck_assert_int_eq(sl_pack_step(&p, it, 2, at, load), 2);
    ck_assert(at[0] != at[1]); /* two packs, two samples: one each */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pack");
    TCase *tc = tcase_create("pack");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_step_vs_exact);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_beats_counts);
    tcase_add_test(tc, test_bad_params);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
