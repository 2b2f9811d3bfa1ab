/* Resume (docs/protocol.md "Resume"): the spec's resume section, the layout
 * of a resumed epoch (common/order/resume_order.c), the consumed ranges a
 * client keeps (client/lib/taken.c). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/taken.h"
#include "common/base/rng.h"
#include "common/order/ranks.h"
#include "common/spec/resume.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"

#define SPEC_HEAD "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\"}, \"stages\": []"

static int parse(const char *resume, sl_spec_t *s, char *err, size_t errlen)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), SPEC_HEAD ", \"resume\": %s}", resume);
    return sl_spec_parse("t.json", buf, strlen(buf), s, err, errlen);
}

START_TEST(test_section_refused)
{
    static const struct {
        const char *json, *says;
    } BAD[] = {
        {"[]", "must be {\"epochs\""},
        {"{\"epochs\": []}", "must be {\"epochs\""},
        {"{\"epochs\": [{\"epoch\": 0}]}", "epochs[0]: must be"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 0, \"runs\": []}]}]}",
         "gens[0]: must be"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 2, \"runs\": [[2, 0, 1]]}]}]}",
         "runs[0]: must be [rank, begin, end]"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 2, \"runs\": [[0, 5, 5]]}]}]}",
         "0 <= begin < end"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 2, \"runs\": "
         "[[0, 0, 5], [0, 4, 6]]}]}]}",
         "must not overlap"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 2, \"runs\": "
         "[[1, 0, 5], [0, 6, 7]]}]}]}",
         "sorted by rank"},
        {"{\"epochs\": [{\"epoch\": 3, \"gens\": [{\"world\": 1, \"runs\": []}]}, "
         "{\"epoch\": 3, \"gens\": [{\"world\": 1, \"runs\": []}]}]}",
         "ascending"},
        {"{\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 1, \"runs\": [[0, -1, 2]]}]}]}",
         "0 <= begin"},
    };
    for (size_t i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++) {
        sl_spec_t s;
        char err[512] = "";
        ck_assert_int_eq(parse(BAD[i].json, &s, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, BAD[i].says) != NULL, "%s: %s", BAD[i].json, err);
        ck_assert_msg(strncmp(err, "t.json: ", 8) == 0, "no file name: %s", err);
    }
}
END_TEST

START_TEST(test_section_round_trip)
{
    const char *j = "{\"epochs\": [{\"epoch\": 2, \"gens\": [{\"world\": 3, \"runs\": "
                    "[[0, 0, 4], [0, 6, 7], [2, 1, 3]]}, {\"world\": 1, \"runs\": []}]}]}";
    sl_spec_t s;
    char err[512];
    ck_assert_int_eq(parse(j, &s, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(s.resume);
    ck_assert_uint_eq(s.resume->ep[0].gens[0].nruns, 3);
    char *json = sl_spec_to_json(&s);
    ck_assert_ptr_nonnull(json);
    sl_spec_t t;
    ck_assert_int_eq(sl_spec_parse("again", json, strlen(json), &t, err, sizeof(err)), 0);
    char *json2 = sl_spec_to_json(&t);
    ck_assert_str_eq(json, json2);
    free(json);
    free(json2);
    sl_spec_clear(&s);
    sl_spec_clear(&t);
    ck_assert_ptr_null(s.resume);
}
END_TEST

/* ---- layout */

typedef struct {
    sl_resume_epoch_t ep;
    sl_resume_gen_t gens[8];
    sl_resume_run_t runs[8][256];
    sl_resume_t r;
} hist_t;

static int g_balanced; /* the chain test's current mode */

static sl_spec_t spec_at(uint32_t world, uint32_t rank, sl_rank_padding_e pad, hist_t *h)
{
    sl_spec_t s;
    sl_spec_init(&s);
    s.seed = 5;
    if (g_balanced) {
        s.batching.mode = SL_BATCHING_BALANCED;
        s.batch_size = 3;
        s.batching.microbatches = 2;
        s.batching.lookahead = 2;
    }
    s.world_size = world;
    s.rank = rank;
    s.rank_padding = pad;
    if (h != NULL && h->ep.ngens > 0) {
        h->ep.gens = h->gens;
        h->r = (sl_resume_t){.nepochs = 1, .ep = &h->ep};
        s.resume = &h->r;
    }
    return s;
}

/* Chains of interrupted runs over random sizes, world sizes and paddings:
 * every generation's ranks consume random runs of their shares; the last
 * job delivers the rest. Per sample, what all of them delivered equals the
 * epoch (each slot once), shares differ by at most one, holes only at the
 * end, and every order is the same whichever host computes it. */
START_TEST(test_chains_deliver_the_epoch_once)
{
    /* _i = 1: balanced batching, re-packed whenever the world size changes. */
    g_balanced = _i;
    float cost[260];
    uint32_t tokens[260];
    sl_rng_t rng;
    sl_rng_init(&rng, 99 + (uint64_t)_i, 0, 0, 0);
    for (int k = 0; k < 260; k++) {
        tokens[k] = 1 + (uint32_t)sl_rng_below(&rng, 4000);
        cost[k] = (float)tokens[k] + 16.0f;
    }
    for (int trial = 0; trial < 300; trial++) {
        uint64_t n = 20 + sl_rng_below(&rng, 200);
        sl_rank_padding_e pad = sl_rng_below(&rng, 2) ? SL_RANK_PAD : SL_RANK_DROP;
        uint32_t w0 = 1 + (uint32_t)(sl_rng_below(&rng, 5));
        if (pad == SL_RANK_DROP && n < w0) {
            continue;
        }
        uint32_t ngens = 1 + (uint32_t)(sl_rng_below(&rng, 3));
        hist_t *h = calloc(1, sizeof(*h));
        h->ep.epoch = 4;
        unsigned *got = calloc(n, sizeof(*got));
        uint64_t *order = malloc((2 * n + 16) * sizeof(*order));
        uint64_t *scratch = malloc(n * sizeof(*scratch));
        uint32_t world = w0;
        for (uint32_t g = 0; g <= ngens; g++) {
            int last = g == ngens;
            uint64_t lo = UINT64_MAX, hi = 0;
            for (uint32_t r = 0; r < world; r++) {
                sl_spec_t s = spec_at(world, r, pad, h);
                char err[256];
                ck_assert_int_eq(sl_resume_check(&s, n, err, sizeof(err)), 0);
                ck_assert_int_eq(sl_rank_order_balanced(&s, 4, n, g_balanced ? cost : NULL,
                                                        g_balanced ? tokens : NULL, NULL, scratch,
                                                        order),
                                 0);
                uint64_t total = sl_spec_positions(&s, n);
                uint64_t live = sl_spec_live_positions(&s, n, 4);
                lo = live < lo ? live : lo;
                hi = live > hi ? live : hi;
                for (uint64_t q = 0; q < total; q++) {
                    ck_assert_msg((q < live) == (order[q] != SL_POS_HOLE), "hole inside");
                }
                /* What this rank consumes: everything (the last job), or
                 * a prefix and a fragment of its share. */
                uint64_t a = live > 0 ? sl_rng_below(&rng, live + 1) : 0;
                uint64_t b = a + (live > a ? sl_rng_below(&rng, live - a + 1) : 0);
                uint64_t c = b + (live > b ? sl_rng_below(&rng, live - b + 1) : 0);
                for (uint64_t q = 0; q < live; q++) {
                    if (last || q < a || (q >= b && q < c)) {
                        got[order[q]]++;
                    }
                }
                if (!last) { /* adjacent runs are fine: only overlaps are refused */
                    sl_resume_run_t *gr = h->runs[g];
                    if (a > 0) {
                        gr[h->gens[g].nruns++] = (sl_resume_run_t){r, 0, a};
                    }
                    if (c > b) {
                        gr[h->gens[g].nruns++] = (sl_resume_run_t){r, b, c};
                    }
                }
            }
            ck_assert_uint_le(hi - lo, 1);
            if (!last) {
                h->gens[g].world = world;
                h->gens[g].runs = h->runs[g];
                h->ep.ngens = g + 1;
                world = 1 + (uint32_t)(sl_rng_below(&rng, 5));
            }
        }
        /* The epoch's multiset: generation 0's slots. */
        uint64_t *base = malloc(n * sizeof(*base));
        sl_spec_t s0 = spec_at(w0, 0, pad, NULL); /* padding repeats the balanced head */
        ck_assert_int_eq(sl_spec_epoch_order(&s0, 4, n, g_balanced ? cost : NULL,
                                             g_balanced ? tokens : NULL, base),
                         0);
        uint64_t slots = sl_rank_count(n, w0, pad) * w0;
        unsigned *want = calloc(n, sizeof(*want));
        for (uint64_t s = 0; s < slots; s++) {
            want[base[s % n]]++;
        }
        for (uint64_t i = 0; i < n; i++) {
            ck_assert_msg(got[i] == want[i], "trial %d (n %lu, w0 %u, %s, %u gens): sample %lu "
                          "delivered %u times, the epoch has it %u times",
                          trial, (unsigned long)n, w0, pad == SL_RANK_PAD ? "pad" : "drop",
                          ngens, (unsigned long)i, got[i], want[i]);
        }
        free(base);
        free(want);
        free(got);
        free(order);
        free(scratch);
        free(h);
    }
}
END_TEST

/* The same world size, ranks stopped at one step: the uninterrupted order. */
START_TEST(test_same_world_continues_the_order)
{
    const uint64_t n = 97;
    hist_t *h = calloc(1, sizeof(*h));
    h->ep.epoch = 0;
    for (uint32_t r = 0; r < 3; r++) {
        h->runs[0][r] = (sl_resume_run_t){r, 0, 10};
    }
    h->gens[0] = (sl_resume_gen_t){.world = 3, .nruns = 3, .runs = h->runs[0]};
    h->ep.ngens = 1;
    uint64_t a[200], b[200], scratch[200];
    for (uint32_t r = 0; r < 3; r++) {
        sl_spec_t plain = spec_at(3, r, SL_RANK_DROP, NULL);
        sl_spec_t res = spec_at(3, r, SL_RANK_DROP, h);
        ck_assert_int_eq(sl_rank_order(&plain, 0, n, scratch, a), 0);
        ck_assert_int_eq(sl_rank_order(&res, 0, n, scratch, b), 0);
        ck_assert_uint_eq(sl_spec_live_positions(&res, n, 0), 32 - 10);
        for (uint64_t q = 0; q < 22; q++) {
            ck_assert_uint_eq(b[q], a[q + 10]);
        }
        /* Other epochs: as a plain job, holes none (no larger share). */
        ck_assert_uint_eq(sl_spec_positions(&res, n), 32);
    }
    free(h);
}
END_TEST

START_TEST(test_run_beyond_share_refused)
{
    hist_t *h = calloc(1, sizeof(*h));
    h->runs[0][0] = (sl_resume_run_t){1, 0, 51}; /* rank 1 of 2 owns 50 of 100 */
    h->gens[0] = (sl_resume_gen_t){.world = 2, .nruns = 1, .runs = h->runs[0]};
    h->ep.ngens = 1;
    sl_spec_t s = spec_at(1, 0, SL_RANK_DROP, h);
    char err[256];
    ck_assert_int_eq(sl_resume_check(&s, 100, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "rank 1 of 2 consumed positions up to 51 of its 50"), "%s", err);
    ck_assert_int_eq(sl_resume_check(&s, 102, err, sizeof(err)), 0);
    free(h);
}
END_TEST

/* ---- taken ranges */

START_TEST(test_taken_merges)
{
    cl_taken_t t;
    cl_taken_init(&t, 2);
    ck_assert_int_eq(cl_taken_add(&t, 1, 0, 5), 0); /* before the first epoch: ignored */
    ck_assert_uint_eq(t.nep, 0);
    ck_assert_int_eq(cl_taken_add(&t, 2, 10, 20), 0);
    ck_assert_int_eq(cl_taken_add(&t, 2, 30, 40), 0);
    ck_assert_int_eq(cl_taken_add(&t, 2, 0, 5), 0);
    ck_assert_uint_eq(t.ep[0].n, 3);
    ck_assert_int_eq(cl_taken_add(&t, 2, 20, 30), 0); /* joins two */
    ck_assert_uint_eq(t.ep[0].n, 2);
    ck_assert_uint_eq(t.ep[0].r[1].begin, 10);
    ck_assert_uint_eq(t.ep[0].r[1].end, 40);
    ck_assert_int_eq(cl_taken_add(&t, 2, 4, 12), 0); /* overlaps both */
    ck_assert_uint_eq(t.ep[0].n, 1);
    ck_assert_uint_eq(cl_taken_count(&t, 2, 100), 40);
    ck_assert_uint_eq(cl_taken_count(&t, 2, 25), 25);
    ck_assert_int_eq(cl_taken_add(&t, 3, 7, 8), 0);
    cl_taken_complete(&t, 3); /* ahead of epoch 2: kept, done_below stays */
    ck_assert_uint_eq(t.done_below, 2);
    cl_taken_complete(&t, 2);
    ck_assert_uint_eq(t.done_below, 4);
    ck_assert_uint_eq(t.nep, 0);
    ck_assert_int_eq(t.overflow, 0);
    for (uint64_t i = 0; i < CL_TAKEN_MAX_EPOCHS; i++) {
        ck_assert_int_eq(cl_taken_add(&t, 10 + i, 0, 1), 0);
    }
    ck_assert_int_eq(cl_taken_add(&t, 100, 0, 1), -E2BIG);
    ck_assert_int_eq(t.overflow, 1);
    cl_taken_clear(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resume");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_section_refused);
    tcase_add_test(tc, test_section_round_trip);
    tcase_add_loop_test(tc, test_chains_deliver_the_epoch_once, 0, 2);
    tcase_add_test(tc, test_same_world_continues_the_order);
    tcase_add_test(tc, test_run_beyond_share_refused);
    tcase_add_test(tc, test_taken_merges);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
