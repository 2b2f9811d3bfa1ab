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
#include "common/order/ranks.h"
#include "common/order/resume_mix.h"
#include "common/spec/mix.h"
#include "common/spec/resume.h"
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

static void blend_prefix_shares_one(int _i)
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

/* 200 seeds: one process for all of them (each its own fork cost
 * ~0.5 s under ASan, most of the sanitized unit suites' time). */
START_TEST(test_blend_prefix_shares)
{
    for (int i = 0; i < 200; i++) {
        blend_prefix_shares_one(i);
    }
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

/* A spec over three sources of sizes, weights w, world, batching mode
 * ("count" or "balanced"), resolved as the opening host would. */
static void mk_spec(sl_spec_t *s, const double *w, const uint64_t *sizes, uint32_t world,
                    const char *mode)
{
    char buf[2048], err[512] = "";
    snprintf(
        buf, sizeof(buf),
        "{\"mix\": {\"sources\": ["
        "{\"name\": \"a\", \"weight\": %g, \"source\": {\"type\": \"jsonl\", \"path\": \"a\"}},"
        "{\"name\": \"b\", \"weight\": %g, \"source\": {\"type\": \"jsonl\", \"path\": \"b\"}},"
        "{\"name\": \"c\", \"weight\": %g, \"source\": {\"type\": \"jsonl\", \"path\": \"c\"}}"
        "], \"seed\": 11}, \"stages\": [], \"batch_size\": 4, \"world_size\": %u, "
        "\"rank_padding\": \"drop\", "
        "\"batching\": {\"mode\": \"%s\"%s}}",
        w[0], w[1], w[2], world, mode,
        strcmp(mode, "packed") == 0 ? ", \"token_budget\": 128" : "");
    ck_assert_msg(sl_spec_parse("t", buf, strlen(buf), s, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(sl_mix_resolve(s->mix, sizes, err, sizeof(err)), 0);
}

/* Every rank of s consumes a random prefix of its epoch-0 positions into
 * took (a count per sample); the generation of those runs into g. */
static void consume(sl_spec_t *s, uint64_t n, const float *cost, const uint32_t *tok,
                    const uint32_t *tiles, sl_rng_t *r, bool lockstep, uint32_t *took,
                    sl_resume_gen_t *g)
{
    uint64_t step = UINT64_MAX; /* lockstep: every rank stops at one position */
    uint32_t world = s->world_size;
    uint64_t total = sl_spec_order_len(s, n), m = sl_spec_positions(s, n);
    uint64_t *scratch = malloc(total * sizeof(uint64_t)), *out = malloc(total * sizeof(uint64_t));
    *g = (sl_resume_gen_t){.world = world, .runs = calloc(world, sizeof(sl_resume_run_t))};
    for (uint32_t k = 0; k < world; k++) {
        s->rank = k;
        ck_assert_int_eq(sl_rank_order_balanced(s, 0, n, cost, tok, tiles, scratch, out), 0);
        uint64_t live = sl_spec_live_positions(s, n, 0), q = sl_rng_below(r, live + 1);
        if (lockstep) {
            step = step == UINT64_MAX ? q : step;
            q = step < live ? step : live;
        }
        ck_assert_uint_le(live, m);
        for (uint64_t i = 0; i < q; i++) {
            if (out[i] != SL_POS_HOLE) { /* a packed layout's empty slots */
                took[out[i]]++;
            }
        }
        if (q > 0) {
            g->runs[g->nruns++] = (sl_resume_run_t){.rank = k, .begin = 0, .end = q};
        }
    }
    s->rank = 0;
    free(scratch);
    free(out);
}

/* Gives s (the new weights) epoch 0's history: carried c, then nothing. */
static void give_carry(sl_spec_t *s, uint64_t n, sl_resume_carry_t *c)
{
    sl_resume_t *r = calloc(1, sizeof(*r));
    r->nepochs = 1;
    r->ep = calloc(1, sizeof(*r->ep));
    r->ep[0].ngens = 1;
    r->ep[0].gens = calloc(1, sizeof(sl_resume_gen_t));
    r->ep[0].gens[0].world = 1;
    r->ep[0].gens[0].nruns = 1;
    r->ep[0].gens[0].runs = calloc(1, sizeof(sl_resume_run_t));
    uint64_t len = sl_spec_epoch_len(s, n);
    r->ep[0].gens[0].runs[0].end = c->consumed < len ? c->consumed : len;
    r->ep[0].carry = c;
    sl_resume_free(s->resume);
    s->resume = r;
    char err[256] = "";
    ck_assert_msg(sl_resume_check(s, n, err, sizeof(err)) == 0, "%s", err);
}

/* The counts /status shows for a carried epoch (sl_blend_counts_carry) are
 * the sources of the epoch's order as laid out (sl_blend_epoch_carry), in
 * the resuming world's steps; a carry naming a source the mix has not is
 * refused. */
static void check_carry_counts(const sl_spec_t *s, const sl_resume_carry_t *carry)
{
    const sl_mix_t *m = s->mix;
    uint64_t step_len = (uint64_t)s->batch_size * carry->world;
    uint64_t *order = malloc(m->samples_per_epoch * sizeof(uint64_t));
    uint64_t want[SL_MIX_MAX_SOURCES] = {0}, got[SL_MIX_MAX_SOURCES];
    ck_assert_int_eq(sl_blend_epoch_carry(m, carry, s->seed, s->shuffle, step_len, 0, order, NULL),
                     0);
    for (uint64_t p = 0; p < m->samples_per_epoch; p++) {
        want[sl_blend_source_of(m, order[p])]++;
    }
    ck_assert_int_eq(sl_blend_counts_carry(m, carry, step_len, 0, got), 0);
    for (uint32_t j = 0; j < m->nsources; j++) {
        ck_assert_uint_eq(got[j], want[j]);
    }
    if (carry->nruns > 0) {
        sl_resume_carry_t bad = *carry;
        sl_resume_run_t run = carry->runs[0];
        run.rank = m->nsources;
        bad.runs = &run;
        bad.nruns = 1;
        ck_assert_int_eq(sl_blend_counts_carry(m, &bad, step_len, 0, got), -EINVAL);
    }
    free(order);
}

/* Each source's samples over the epoch (took) are its first D draws: every
 * pass but the last whole, the last one's first D mod size. (When ranks
 * stopped at different positions a source's consumed draws need not be a
 * prefix; the carry then holds their earliest occurrences, and the rest
 * fills the passes' holes in order.) */
static void check_draws(const sl_spec_t *s, const uint32_t *took)
{
    const sl_mix_t *m = s->mix;
    uint64_t off = 0;
    for (uint32_t j = 0; j < m->nsources; j++) {
        uint64_t size = m->src[j].count, d = 0;
        for (uint64_t i = 0; i < size; i++) {
            d += took[off + i];
        }
        uint64_t *perm = malloc(size * sizeof(*perm));
        ck_assert_int_eq(sl_blend_pass(m, s->seed, s->shuffle, 0, j, d / size, perm), 0);
        for (uint64_t i = 0; i < size; i++) {
            uint64_t want = d / size + (i < d % size);
            ck_assert_msg(took[off + perm[i]] == want,
                          "source %u: sample %llu taken %u times, its pass says %llu", j,
                          (unsigned long long)perm[i], took[off + perm[i]],
                          (unsigned long long)want);
        }
        free(perm);
        off += size;
    }
}

/* Rank 0 of a takes its first sample (past any holes) into took and g: 1. */
static uint64_t take_first(sl_spec_t *a, uint64_t n, const float *cost, const uint32_t *tok,
                           const uint32_t *tiles, uint32_t *took, sl_resume_gen_t *g)
{
    a->rank = 0;
    uint64_t *o = malloc(sl_spec_order_len(a, n) * sizeof(uint64_t)),
             *sc = malloc(sl_spec_order_len(a, n) * sizeof(uint64_t));
    ck_assert_int_eq(sl_rank_order_balanced(a, 0, n, cost, tok, tiles, sc, o), 0);
    uint64_t q = 0;
    while (o[q] == SL_POS_HOLE) {
        q++;
    }
    took[o[q]]++;
    g->runs[0] = (sl_resume_run_t){.rank = 0, .begin = 0, .end = q + 1};
    g->nruns = 1;
    free(o);
    free(sc);
    return 1;
}

/* A weight change across a resume (docs/mixing.md "Resume"): 4 ranks under
 * weights A consume part of epoch 0; 2 ranks resume under B, and 3 under C
 * after them; every source is delivered exactly as its draws (no sample of
 * a pass twice or lost), and the rest follows the new weights' shares. */
static void blend_reweighted_resume_one(int _i)
{
    static const char *const modes[] = {"count", "balanced", "packed"};
    const char *mode = modes[_i % 3];
    bool lockstep = _i % 6 < 3; /* a training loop's ranks stop at one step */
    sl_rng_t r;
    sl_rng_init(&r, 77, 0, (uint64_t)_i, 0);
    uint64_t sizes[3] = {5 + sl_rng_below(&r, 60), 5 + sl_rng_below(&r, 60),
                         5 + sl_rng_below(&r, 60)};
    uint64_t n = sizes[0] + sizes[1] + sizes[2];
    double wa[3] = {0.6, 0.3, 0.1}, wb[3] = {0.1, 0.2, 0.7}, wc[3] = {1.0, 1.0, 1.0};
    float *cost = malloc(n * sizeof(float));
    uint32_t *tok = malloc(n * sizeof(uint32_t)), *took = calloc(n, sizeof(uint32_t));
    uint32_t *tiles = calloc(n, sizeof(uint32_t));
    for (uint64_t i = 0; i < n; i++) {
        cost[i] = (float)(1 + sl_rng_below(&r, 100));
        tok[i] = (uint32_t)(1 + sl_rng_below(&r, 50));
    }
    sl_spec_t a, b, c;
    mk_spec(&a, wa, sizes, 4, mode);
    mk_spec(&b, wb, sizes, 2, mode);
    mk_spec(&c, wc, sizes, 3, mode);
    /* A: 4 ranks take a prefix each. */
    sl_resume_gen_t g;
    consume(&a, n, cost, tok, tiles, &r, lockstep, took, &g);
    uint64_t k = 0; /* samples, not positions: a packed layout has holes */
    for (uint64_t i = 0; i < n; i++) {
        k += took[i];
    }
    if (k == 0) { /* nothing taken: nothing to carry; rank 0 takes its first sample */
        k = take_first(&a, n, cost, tok, tiles, took, &g);
    }
    sl_resume_t *ra = calloc(1, sizeof(*ra));
    ra->nepochs = 1;
    ra->ep = calloc(1, sizeof(*ra->ep));
    ra->ep[0].ngens = 1;
    ra->ep[0].gens = malloc(sizeof(g));
    ra->ep[0].gens[0] = g;
    a.resume = ra;
    sl_resume_carry_t *ca = NULL;
    ck_assert_int_eq(sl_resume_mix_carry(&a, 0, n, cost, tok, tiles, 2, &ca), 0);
    ck_assert_uint_eq(ca->consumed, k);
    /* B: 2 ranks take part of the rest; then C's 3 ranks deliver the rest. */
    give_carry(&b, n, ca);
    sl_resume_gen_t gb;
    consume(&b, n, cost, tok, tiles, &r, lockstep, took, &gb);
    sl_resume_gen_t *gens = realloc(b.resume->ep[0].gens, 2 * sizeof(*gens));
    gens[1] = gb;
    b.resume->ep[0].gens = gens;
    b.resume->ep[0].ngens = 2;
    sl_resume_carry_t *cb = NULL;
    ck_assert_int_eq(sl_resume_mix_carry(&b, 0, n, cost, tok, tiles, 3, &cb), 0);
    give_carry(&c, n, cb);
    check_carry_counts(&c, cb);
    uint64_t total = sl_spec_order_len(&c, n), delivered = 0;
    uint64_t *scratch = malloc(total * sizeof(uint64_t)), *out = malloc(total * sizeof(uint64_t));
    uint64_t len = sl_spec_epoch_len(&c, n), rest = len > cb->consumed ? len - cb->consumed : 0;
    uint64_t *order = malloc((rest + 1) * sizeof(uint64_t));
    for (uint32_t q = 0; q < 3; q++) {
        c.rank = q;
        ck_assert_int_eq(sl_rank_order_balanced(&c, 0, n, cost, tok, tiles, scratch, out), 0);
        uint64_t live = sl_spec_live_positions(&c, n, 0);
        for (uint64_t i = 0; i < live; i++) {
            if (out[i] == SL_POS_HOLE) {
                ck_assert_str_eq(mode, "packed");
                continue;
            }
            took[out[i]]++;
            if (i * 3 + q < rest) {
                order[i * 3 + q] = out[i];
            }
            delivered++;
        }
    }
    ck_assert_uint_eq(delivered, rest);
    ck_assert_uint_eq(cb->consumed + delivered, len > cb->consumed ? len : cb->consumed);
    if (lockstep && strcmp(mode, "count") == 0) {
        /* Prefixes of the blends consumed: each source's first draws exactly. */
        check_draws(&c, took);
    }
    if (strcmp(mode, "count") == 0) {
        check_prefixes(c.mix, wc, order, 0, rest); /* the new weights from the resume on */
    }
    free(scratch);
    free(out);
    free(order);
    free(cost);
    free(tok);
    free(tiles);
    free(took);
    sl_spec_clear(&a);
    sl_spec_clear(&b);
    sl_spec_clear(&c);
}

/* 48 seeds: one process for all of them (each its own fork cost
 * ~0.5 s under ASan, most of the sanitized unit suites' time). */
START_TEST(test_blend_reweighted_resume)
{
    for (int i = 0; i < 48; i++) {
        blend_reweighted_resume_one(i);
    }
}
END_TEST

/* The carry travels in the spec's "resume" and is checked there. */
START_TEST(test_blend_carry_json)
{
    const char *ok = "{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 1, \"runs\": "
                     "[[0, 0, 5]]}], \"carry\": {\"world\": 2, \"drawn\": [[0, 0, 3], [2, 1, "
                     "3]]}}]}";
    json_t *v = json_loads(ok, 0, NULL);
    sl_resume_t *r = NULL;
    char err[512] = "";
    ck_assert_msg(sl_resume_from_json(v, 8, &r, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(r->ep[0].carry->consumed, 5);
    ck_assert_uint_eq(r->ep[0].carry->world, 2);
    json_t *back = sl_resume_to_json(r);
    ck_assert(json_equal(back, v));
    sl_resume_t *d = sl_resume_dup(r);
    json_t *back2 = sl_resume_to_json(d);
    ck_assert(json_equal(back2, v));
    json_decref(back);
    json_decref(back2);
    json_decref(v);
    sl_resume_free(r);
    sl_resume_free(d);
    static const struct {
        const char *json, *says;
    } BAD[] = {
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 1, \"runs\": [[0, 0, 5]]}], "
         "\"carry\": {\"world\": 2, \"drawn\": [[0, 0, 3]]}}]}",
         "at most the 3 draws"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 2, \"runs\": [[0, 0, 3]]}], "
         "\"carry\": {\"world\": 2, \"drawn\": [[0, 0, 3]]}}]}",
         "gens[0] must be {\"world\": 1"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 1, \"runs\": [[0, 0, 3]]}], "
         "\"carry\": {\"world\": 0, \"drawn\": [[0, 0, 3]]}}]}",
         "carry: must be {\"world\""},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 1, \"runs\": [[0, 0, 3]]}], "
         "\"carry\": {\"world\": 1, \"drawn\": [[16, 0, 3]]}}]}",
         "carry.drawn.runs[0]"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 1, \"runs\": [[0, 0, 3]]}], "
         "\"carry\": {\"world\": 1, \"drawn\": [[1, 0, 3], [0, 0, 3]]}}]}",
         "sorted"},
    };
    for (size_t i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++) {
        json_t *b = json_loads(BAD[i].json, 0, NULL);
        ck_assert_ptr_nonnull(b);
        err[0] = '\0';
        ck_assert_int_eq(sl_resume_from_json(b, 8, &r, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, BAD[i].says) != NULL, "%s: %s", BAD[i].json, err);
        json_decref(b);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("blend");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_blend_prefix_shares);
    tcase_add_test(tc, test_blend_wraps_after_a_pass);
    tcase_add_test(tc, test_blend_schedule_switches_at_its_step);
    tcase_add_test(tc, test_blend_reweighted_resume);
    tcase_add_test(tc, test_blend_carry_json);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
