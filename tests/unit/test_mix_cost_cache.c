/* The dispatcher's cache of mixes' per-source costs
 * (dispatcher/planner/mix_cost_cache.h): a round trip by (spec, host),
 * other specs and hosts miss, the hour's expiry, costs that came from the
 * cache or that do not fit are not stored, the least recently used entry
 * makes room. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "dispatcher/planner/mix_cost_cache.h"
#include "dispatcher/planner/planner_job.h"

#define NU 3

typedef struct {
    Sluice__PlannerInputs in;
    Sluice__MixSourceCost c[2];
    Sluice__MixSourceCost *pc[2];
    double unit[2][NU];
    double bytes[2][NU + 1];
} inputs_t;

static void make_inputs(inputs_t *t, uint64_t spec_hash, const char *host, double scale)
{
    memset(t, 0, sizeof(*t));
    sluice__planner_inputs__init(&t->in);
    static const char *names[2] = {"caps", "text"};
    for (int j = 0; j < 2; j++) {
        sluice__mix_source_cost__init(&t->c[j]);
        t->c[j].name = (char *)names[j];
        for (int u = 0; u < NU; u++) {
            t->unit[j][u] = scale * (j == 1 && u == 0 ? 0.0 : 1e-3 * (u + 1) * (2 - j));
        }
        for (int k = 0; k <= NU; k++) {
            t->bytes[j][k] = 100.0 * (k + 1) * (j + 1);
        }
        t->c[j].n_unit_cpu_sec_per_sample = NU;
        t->c[j].unit_cpu_sec_per_sample = t->unit[j];
        t->c[j].n_bytes_per_sample = NU + 1;
        t->c[j].bytes_per_sample = t->bytes[j];
        t->c[j].read_cpu_sec_per_sample = 2e-4 * (j + 1);
        t->c[j].samples = 16 - 9 * (uint64_t)j;
        t->c[j].profiled_share = j == 0 ? 0.6 : 0.4;
        t->pc[j] = &t->c[j];
    }
    t->in.spec_hash = spec_hash;
    t->in.client_host = (char *)host;
    t->in.n_mix_sources = 2;
    t->in.mix_sources = t->pc;
}

START_TEST(test_round_trip)
{
    disp_mcache_t *c = disp_mcache_new();
    ck_assert_ptr_nonnull(c);
    inputs_t t;
    make_inputs(&t, 42, "client a", 1.0);
    disp_mcache_put(c, &t.in, 1000);
    const disp_mcache_entry_t *e = disp_mcache_get(c, 42, "client a", 2000);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->nsources, 2);
    ck_assert_uint_eq(e->nunits, NU);
    for (int j = 0; j < 2; j++) {
        ck_assert_str_eq(e->src[j].name, t.c[j].name);
        for (int u = 0; u < NU; u++) {
            ck_assert(e->src[j].unit_sec[u] == t.unit[j][u]);
        }
        for (int k = 0; k <= NU; k++) {
            ck_assert(e->src[j].bytes[k] == t.bytes[j][k]);
        }
        ck_assert(e->src[j].read_sec == t.c[j].read_cpu_sec_per_sample);
        ck_assert_uint_eq(e->src[j].samples, t.c[j].samples);
        ck_assert(e->src[j].profiled_share == t.c[j].profiled_share);
    }
    /* Another spec, another host: misses. */
    ck_assert_ptr_null(disp_mcache_get(c, 43, "client a", 2000));
    ck_assert_ptr_null(disp_mcache_get(c, 42, "client b", 2000));
    ck_assert_ptr_null(disp_mcache_get(c, 42, NULL, 2000));
    /* Re-stored with new numbers: one entry, the new numbers. */
    make_inputs(&t, 42, "client a", 2.0);
    disp_mcache_put(c, &t.in, 3000);
    e = disp_mcache_get(c, 42, "client a", 3000);
    ck_assert_ptr_nonnull(e);
    ck_assert(e->src[0].unit_sec[0] == t.unit[0][0]);
    size_t n = 0;
    for (size_t i = 0; i < DISP_MCACHE_MAX; i++) {
        n += c->e[i].used;
    }
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(c->hits, 2);
    ck_assert_uint_eq(c->misses, 2); /* a NULL host is not a lookup */
    /* Expired after the profile cache's hour. */
    ck_assert_ptr_nonnull(disp_mcache_get(c, 42, "client a", 3000 + DISP_PCACHE_TTL_MS - 1));
    ck_assert_ptr_null(disp_mcache_get(c, 42, "client a", 3000 + DISP_PCACHE_TTL_MS));
    disp_mcache_free(c);
}
END_TEST

START_TEST(test_not_stored)
{
    disp_mcache_t *c = disp_mcache_new();
    inputs_t t;
    /* From the cache: its age must not reset. */
    make_inputs(&t, 1, "client a", 1.0);
    t.in.mix_sources_cached = 1;
    disp_mcache_put(c, &t.in, 0);
    ck_assert_ptr_null(disp_mcache_get(c, 1, "client a", 0));
    /* No host, no sources, sources of different unit counts. */
    make_inputs(&t, 1, "", 1.0);
    disp_mcache_put(c, &t.in, 0);
    make_inputs(&t, 1, "client a", 1.0);
    t.in.n_mix_sources = 0;
    disp_mcache_put(c, &t.in, 0);
    make_inputs(&t, 1, "client a", 1.0);
    t.c[1].n_unit_cpu_sec_per_sample = NU - 1;
    disp_mcache_put(c, &t.in, 0);
    ck_assert_ptr_null(disp_mcache_get(c, 1, "client a", 0));
    disp_mcache_put(NULL, &t.in, 0); /* no cache: nothing, no crash */
    disp_mcache_free(c);
}
END_TEST

START_TEST(test_lru)
{
    disp_mcache_t *c = disp_mcache_new();
    inputs_t t;
    for (uint64_t h = 0; h < DISP_MCACHE_MAX; h++) {
        make_inputs(&t, h, "client a", 1.0);
        disp_mcache_put(c, &t.in, (int64_t)h);
    }
    /* Spec 0 used last: spec 1 is the least recently used and makes room. */
    ck_assert_ptr_nonnull(disp_mcache_get(c, 0, "client a", 100));
    make_inputs(&t, 1000, "client a", 1.0);
    disp_mcache_put(c, &t.in, 101);
    ck_assert_ptr_nonnull(disp_mcache_get(c, 1000, "client a", 102));
    ck_assert_ptr_nonnull(disp_mcache_get(c, 0, "client a", 102));
    ck_assert_ptr_null(disp_mcache_get(c, 1, "client a", 102));
    ck_assert_ptr_nonnull(disp_mcache_get(c, 2, "client a", 102));
    disp_mcache_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mix_cost_cache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_not_stored);
    tcase_add_test(tc, test_lru);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
