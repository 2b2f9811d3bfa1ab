/* pack: one step of a packed schedule (common/order/pack.h). */
#include "common/order/pack.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The step's packs: pack b belongs to rank b / micro. */
typedef struct {
    const sl_pack_params_t *p;
    const sl_pack_item_t *items;
    uint32_t npacks;
    uint64_t *tok, *til;
    uint32_t *cnt;
    double *pcost; /* per pack */
    double *load;  /* per rank */
    uint32_t *at;  /* per item: its pack or SL_PACK_NONE */
} step_t;

/* Placement order: carried-too-long first, then cost, largest first; ties
 * by pool position. */
typedef struct {
    int forced;
    double cost;
    uint32_t idx;
} order_key_t;

static int by_key(const void *pa, const void *pb)
{
    const order_key_t *a = pa, *b = pb;
    if (a->forced != b->forced) {
        return a->forced > b->forced ? -1 : 1;
    }
    if (a->cost != b->cost) {
        return a->cost > b->cost ? -1 : 1;
    }
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Whether item i fits pack b with `without` (an item of b, or NONE) taken
 * out first. An empty pack takes anything: that is how a sample longer than
 * the budget gets a pack of its own. */
static bool fits(const step_t *st, uint32_t b, uint32_t i, uint32_t without)
{
    const sl_pack_params_t *p = st->p;
    uint64_t tok = st->tok[b], til = st->til[b];
    uint32_t cnt = st->cnt[b];
    if (without != SL_PACK_NONE) {
        tok -= st->items[without].tokens;
        til -= st->items[without].tiles;
        cnt--;
    }
    if (cnt == 0) {
        return true;
    }
    if (cnt >= p->cap || tok + st->items[i].tokens > p->token_budget) {
        return false;
    }
    return p->tile_budget == 0 || til + st->items[i].tiles <= p->tile_budget;
}

static void put(step_t *st, uint32_t i, uint32_t b)
{
    st->at[i] = b;
    st->tok[b] += st->items[i].tokens;
    st->til[b] += st->items[i].tiles;
    st->cnt[b]++;
    st->pcost[b] += st->items[i].cost;
    st->load[b / st->p->micro] += st->items[i].cost;
}

static void take(step_t *st, uint32_t i)
{
    uint32_t b = st->at[i];
    st->at[i] = SL_PACK_NONE;
    st->tok[b] -= st->items[i].tokens;
    st->til[b] -= st->items[i].tiles;
    st->cnt[b]--;
    st->pcost[b] -= st->items[i].cost;
    st->load[b / st->p->micro] -= st->items[i].cost;
}

/* The pack for item i: where it fits, on the least-loaded rank, the pack
 * with the fewest tokens there. SL_PACK_NONE when it fits nowhere, or
 * (limit >= 0) only where the rank's load would pass limit. */
static uint32_t best_pack(const step_t *st, uint32_t i, double limit)
{
    uint32_t best = SL_PACK_NONE;
    for (uint32_t b = 0; b < st->npacks; b++) {
        if (!fits(st, b, i, SL_PACK_NONE)) {
            continue;
        }
        double l = st->load[b / st->p->micro];
        if (limit >= 0 && l + st->items[i].cost > limit) {
            continue;
        }
        if (best == SL_PACK_NONE) {
            best = b;
            continue;
        }
        double lb = st->load[best / st->p->micro];
        if (l < lb || (l == lb && st->tok[b] < st->tok[best])) {
            best = b;
        }
    }
    return best;
}

static void extremes(const step_t *st, uint32_t *ret_max, uint32_t *ret_min)
{
    uint32_t hi = 0, lo = 0;
    for (uint32_t r = 1; r < st->p->world; r++) {
        hi = st->load[r] > st->load[hi] ? r : hi;
        lo = st->load[r] < st->load[lo] ? r : lo;
    }
    *ret_max = hi;
    *ret_min = lo;
}

static double max2(double a, double b) { return a > b ? a : b; }

/* Step 3's neighbourhood: the lightest ranks a sample of the heaviest may
 * move or swap to. More finds better pairs; four keep a 64-rank step in a
 * few milliseconds. */
#define LIGHT_RANKS 4

typedef struct {
    double best;         /* the changed pair's new maximum to beat */
    uint32_t i, j, pack; /* j: a placed or pool sample to swap with, else NONE */
} change_t;

static void lightest(const step_t *st, uint32_t hi, uint32_t *light, uint32_t *nlight)
{
    uint32_t k = 0;
    for (uint32_t r = 0; r < st->p->world; r++) {
        if (r == hi) {
            continue;
        }
        uint32_t x = k;
        if (k == LIGHT_RANKS) {
            x = LIGHT_RANKS - 1; /* full: r replaces the heaviest kept if lighter */
            if (st->load[r] >= st->load[light[x]]) {
                continue;
            }
        } else {
            k++;
        }
        light[x] = r;
        for (; x > 0 && st->load[light[x]] < st->load[light[x - 1]]; x--) {
            uint32_t t = light[x];
            light[x] = light[x - 1];
            light[x - 1] = t;
        }
    }
    *nlight = k;
}

/* The samples step 3 looks at in one round: the heaviest rank's, the
 * light ranks', and the pool's first POOL_SCAN waiting ones (oldest
 * first). Bounded so that a round costs O(n) to gather and little more. */
#define POOL_SCAN 256

typedef struct {
    uint32_t *heavy, *light, *pool;
    uint32_t nheavy, nlight, npool;
} cands_t;

static void gather(const step_t *st, uint32_t n, uint32_t hi, const uint32_t *light, uint32_t nl,
                   cands_t *c)
{
    uint32_t M = st->p->micro;
    c->nheavy = c->nlight = c->npool = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b = st->at[i];
        if (b == SL_PACK_NONE) {
            if (c->npool < POOL_SCAN) {
                c->pool[c->npool++] = i;
            }
            continue;
        }
        if (b / M == hi) {
            c->heavy[c->nheavy++] = i;
            continue;
        }
        for (uint32_t x = 0; x < nl; x++) {
            if (b / M == light[x]) {
                c->light[c->nlight++] = i;
                break;
            }
        }
    }
}

/* Sample i of the heaviest rank: moved to a light rank's pack or swapped
 * with a light rank's sample. */
static void try_sample(const step_t *st, const cands_t *c, uint32_t i, const uint32_t *light,
                       uint32_t nlight, change_t *ch)
{
    uint32_t M = st->p->micro;
    double top = st->load[st->at[i] / M], ci = st->items[i].cost;
    for (uint32_t x = 0; x < nlight && st->cnt[st->at[i]] >= 2; x++) {
        uint32_t r = light[x];
        double m = max2(top - ci, st->load[r] + ci);
        for (uint32_t b = r * M; m < ch->best && b < r * M + M; b++) {
            if (fits(st, b, i, SL_PACK_NONE)) {
                *ch = (change_t){m, i, SL_PACK_NONE, b};
            }
        }
    }
    for (uint32_t y = 0; y < c->nlight; y++) {
        uint32_t j = c->light[y], bj = st->at[j];
        double d = ci - st->items[j].cost;
        double m = max2(top - d, st->load[bj / M] + d);
        if (d > 0 && m < ch->best && fits(st, bj, i, j) && fits(st, st->at[i], j, i)) {
            *ch = (change_t){m, i, j, SL_PACK_NONE};
        }
    }
}

/* When the heaviest rank cannot give: the lightest takes a pool sample
 * (where it fits) or trades one of its own for a costlier pool sample,
 * never past the heaviest's load. Lowering the heaviest by sending its
 * samples back to the pool would even the loads by emptying the packs. */
static bool raise_lightest(step_t *st, const cands_t *c, uint32_t hi, uint32_t lo)
{
    uint32_t M = st->p->micro, bi = SL_PACK_NONE, bj = SL_PACK_NONE, bpack = SL_PACK_NONE;
    double top = st->load[hi], gain = 0;
    for (uint32_t x = 0; x < c->npool; x++) {
        uint32_t u = c->pool[x];
        double cu = st->items[u].cost;
        for (uint32_t b = lo * M; b < lo * M + M; b++) {
            if (cu > gain && st->load[lo] + cu <= top && fits(st, b, u, SL_PACK_NONE)) {
                gain = cu, bi = u, bj = SL_PACK_NONE, bpack = b;
            }
        }
        for (uint32_t y = 0; y < c->nlight; y++) {
            uint32_t j = c->light[y];
            double d = cu - st->items[j].cost;
            if (st->at[j] / M != lo || d <= gain || st->load[lo] + d > top ||
                !fits(st, st->at[j], u, j)) {
                continue;
            }
            gain = d, bi = u, bj = j, bpack = st->at[j];
        }
    }
    if (bi == SL_PACK_NONE) {
        return false;
    }
    if (bj != SL_PACK_NONE) {
        take(st, bj);
    }
    put(st, bi, bpack);
    return true;
}

/* Step 3: the best move or swap that lowers the heaviest rank's load
 * without raising another past it. false when there is none. */
static bool improve(step_t *st, uint32_t n, cands_t *c)
{
    uint32_t hi, lo, light[LIGHT_RANKS], nlight;
    extremes(st, &hi, &lo);
    double top = st->load[hi], eps = 1e-9 * (top > 1 ? top : 1);
    if (hi == lo || top - st->load[lo] <= eps) {
        return false;
    }
    lightest(st, hi, light, &nlight);
    gather(st, n, hi, light, nlight, c);
    change_t ch = {top - eps, SL_PACK_NONE, SL_PACK_NONE, SL_PACK_NONE};
    for (uint32_t x = 0; x < c->nheavy; x++) {
        try_sample(st, c, c->heavy[x], light, nlight, &ch);
    }
    if (ch.i == SL_PACK_NONE) {
        return raise_lightest(st, c, hi, lo);
    }
    uint32_t pi = st->at[ch.i];
    if (ch.j == SL_PACK_NONE) {
        take(st, ch.i);
        put(st, ch.i, ch.pack);
        return true;
    }
    uint32_t pj = st->at[ch.j];
    take(st, ch.i);
    take(st, ch.j);
    put(st, ch.i, pj);
    put(st, ch.j, pi);
    return true;
}

/* Step 4: each rank's packs by cost, largest first. */
static void order_micro(step_t *st, uint32_t n)
{
    uint32_t M = st->p->micro;
    uint32_t *perm = st->cnt; /* the counts are not needed any more */
    for (uint32_t r = 0; r < st->p->world; r++) {
        double *pc = st->pcost + (size_t)r * M;
        for (uint32_t m = 0; m < M; m++) {
            perm[r * M + m] = m;
        }
        /* Insertion sort: M is small, and ties keep their order. */
        for (uint32_t a = 1; a < M; a++) {
            for (uint32_t b = a; b > 0 && pc[perm[r * M + b]] > pc[perm[r * M + b - 1]]; b--) {
                uint32_t t = perm[r * M + b];
                perm[r * M + b] = perm[r * M + b - 1];
                perm[r * M + b - 1] = t;
            }
        }
    }
    /* perm[r M + k] = old microbatch of new microbatch k: invert into tok. */
    for (uint32_t b = 0; b < st->npacks; b++) {
        st->tok[(b / M) * M + perm[b]] = (b / M) * M + b % M;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (st->at[i] != SL_PACK_NONE) {
            st->at[i] = (uint32_t)st->tok[st->at[i]];
        }
    }
}

static int step_new(step_t *st, const sl_pack_params_t *p, const sl_pack_item_t *items,
                    uint32_t *at)
{
    *st = (step_t){.p = p, .items = items, .npacks = p->world * p->micro, .at = at};
    st->tok = calloc(st->npacks, sizeof(*st->tok));
    st->til = calloc(st->npacks, sizeof(*st->til));
    st->cnt = calloc(st->npacks, sizeof(*st->cnt));
    st->pcost = calloc(st->npacks, sizeof(*st->pcost));
    st->load = calloc(p->world, sizeof(*st->load));
    if (!st->tok || !st->til || !st->cnt || !st->pcost || !st->load) {
        return -ENOMEM;
    }
    return 0;
}

static void step_free(step_t *st)
{
    free(st->tok);
    free(st->til);
    free(st->cnt);
    free(st->pcost);
    free(st->load);
}

/* The most tokens any pack can still take (an empty pack: any sample, so
 * UINT64_MAX). */
static uint64_t max_room(const step_t *st)
{
    uint64_t room = 0;
    for (uint32_t q = 0; q < st->npacks; q++) {
        if (st->cnt[q] == 0) {
            return UINT64_MAX;
        }
        uint64_t t = st->tok[q], b = st->p->token_budget;
        room = t < b && b - t > room ? b - t : room;
    }
    return room;
}

/* Step 2 with nothing unplaced: empty pack b takes the cheapest sample of
 * a pack holding two or more -- of its own rank when it can (no load
 * changes), else of any (local search evens the loads after). */
static void fill_from_placed(step_t *st, const order_key_t *k, uint32_t n, uint32_t b)
{
    uint32_t M = st->p->micro;
    for (int own = 1; own >= 0 && st->cnt[b] == 0; own--) {
        for (uint32_t x = n; x > 0; x--) {
            uint32_t i = k[x - 1].idx, a = st->at[i];
            if (a != SL_PACK_NONE && st->cnt[a] >= 2 && (!own || a / M == b / M)) {
                take(st, i);
                put(st, i, b);
                break;
            }
        }
    }
}

/* Steps 1 and 2. */
static int place_all(step_t *st, uint32_t n)
{
    order_key_t *k = malloc((n > 0 ? n : 1) * sizeof(*k));
    if (k == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        st->at[i] = SL_PACK_NONE;
        k[i] = (order_key_t){st->items[i].age >= st->p->lookahead, st->items[i].cost, i};
    }
    qsort(k, n, sizeof(*k), by_key);
    /* Once every pack holds something, a sample longer than the most room
     * left fits nowhere: skip the scan (most of a large pool). */
    uint64_t room = UINT64_MAX;
    for (uint32_t x = 0; x < n; x++) {
        if (st->items[k[x].idx].tokens > room) {
            continue;
        }
        uint32_t b = best_pack(st, k[x].idx, -1);
        if (b == SL_PACK_NONE) {
            continue;
        }
        put(st, k[x].idx, b);
        room = max_room(st);
    }
    for (uint32_t b = 0; b < st->npacks; b++) {
        for (uint32_t x = n; st->cnt[b] == 0 && x > 0; x--) {
            if (st->at[k[x - 1].idx] == SL_PACK_NONE) {
                put(st, k[x - 1].idx, b); /* the cheapest unplaced */
            }
        }
        if (st->cnt[b] == 0) {
            fill_from_placed(st, k, n, b);
        }
    }
    free(k);
    return 0;
}

int sl_pack_step(const sl_pack_params_t *p, const sl_pack_item_t *items, uint32_t n,
                 uint32_t *ret_pack, double *ret_load)
{
    if (p->world == 0 || p->micro == 0 || p->cap == 0 || p->token_budget == 0 ||
        p->lookahead == 0 || (uint64_t)p->world * p->micro > UINT32_MAX / 2 || n > INT32_MAX) {
        return -EINVAL;
    }
    step_t st;
    size_t nn = n > 0 ? n : 1;
    cands_t c = {.heavy = malloc(nn * sizeof(uint32_t)),
                 .light = malloc(nn * sizeof(uint32_t)),
                 .pool = malloc(POOL_SCAN * sizeof(uint32_t))};
    int rc = step_new(&st, p, items, ret_pack);
    if (rc == 0 && (c.heavy == NULL || c.light == NULL || c.pool == NULL)) {
        rc = -ENOMEM;
    }
    if (rc == 0) {
        rc = place_all(&st, n);
    }
    /* Bounded: each round lowers the pair's maximum, and a step is small. */
    for (uint32_t round = 0; rc == 0 && round < 16 + 4 * p->world && improve(&st, n, &c); round++) {
    }
    free(c.heavy);
    free(c.light);
    free(c.pool);
    uint32_t placed = 0, hi = 0, lo = 0;
    if (rc == 0) {
        /* Room a move opened: unplaced samples where they raise no maximum. */
        extremes(&st, &hi, &lo);
        uint64_t room = max_room(&st);
        for (uint32_t i = 0; i < n; i++) {
            if (st.at[i] != SL_PACK_NONE || st.items[i].tokens > room) {
                continue;
            }
            uint32_t b = best_pack(&st, i, st.load[hi]);
            if (b != SL_PACK_NONE) {
                put(&st, i, b);
                room = max_room(&st);
            }
        }
        memcpy(ret_load, st.load, p->world * sizeof(*ret_load));
        order_micro(&st, n);
        for (uint32_t i = 0; i < n; i++) {
            placed += ret_pack[i] != SL_PACK_NONE;
        }
    }
    step_free(&st);
    return rc < 0 ? rc : (int)placed;
}
