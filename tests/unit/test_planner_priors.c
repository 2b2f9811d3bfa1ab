/* test_planner_priors: what the planner knows before a job measures
 * anything -- how many samples a job profiles, the link cache per (client,
 * class), the client's aggregate probe when it cannot measure, the
 * per-sample overhead the profile cache keeps and bounds, the prior for a
 * spec new to a host and the first plan's overhead. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <jansson.h>

#include "client/lib/profile.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/planner/first_plan.h"
#include "dispatcher/planner/link_cache.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures_planner.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

/* A short job profiles a twentieth of its samples (at least 32), a long
 * one the default 200; the rank's share counts, and nothing overflows. */
START_TEST(test_profile_samples_for)
{
    ck_assert_uint_eq(cl_profile_samples_for(400, 1, 1), CL_PROFILE_MIN_SAMPLES);
    ck_assert_uint_eq(cl_profile_samples_for(400, 6, 1), 120);
    ck_assert_uint_eq(cl_profile_samples_for(4800, 1, 2), 120);
    ck_assert_uint_eq(cl_profile_samples_for(1281167, 90, 8), SL_PROFILE_DEFAULT_SAMPLES);
    ck_assert_uint_eq(cl_profile_samples_for(400, 1, 4), CL_PROFILE_MIN_SAMPLES);
    ck_assert_uint_eq(cl_profile_samples_for(0, 0, 0), CL_PROFILE_MIN_SAMPLES);
    ck_assert_uint_eq(cl_profile_samples_for(UINT64_MAX, UINT64_MAX, 1),
                      SL_PROFILE_DEFAULT_SAMPLES);
}
END_TEST

/* The link cache (dispatcher/planner/link_cache.h): one entry per (client, class),
 * replaced in place, fresh for DISP_LINK_TTL_MS, the oldest evicted when
 * full; nonsense (no client, a key too long, a bandwidth that is not a
 * positive number) is not stored. */
START_TEST(test_link_cache)
{
    disp_lcache_t *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    const disp_link_t *got[DISP_LINK_MAX + 1];
    disp_lcache_put(c, "client a", "k1", 1e8, 2e-9, 1, 1000);
    disp_lcache_put(c, "client a", "", 5e7, 0.0, 2, 1000);
    disp_lcache_put(c, "client b", "k1", 3e8, 0.0, 1, 1000);
    disp_lcache_put(c, "client a", "k1", 2e8, NAN, 1, 2000); /* replaces; recv cleaned */
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 2000, got, 8), 2);
    for (int i = 0; i < 2; i++) {
        if (strcmp(got[i]->class_key, "k1") == 0) {
            NEAR(got[i]->bandwidth, 2e8, 0.0);
            NEAR(got[i]->recv_cpu_per_byte, 0.0, 0.0);
        } else {
            ck_assert_str_eq(got[i]->class_key, "");
            ck_assert_uint_eq(got[i]->streams, 2);
        }
    }
    ck_assert_uint_eq(disp_lcache_list(c, "client c", 2000, got, 8), 0);
    ck_assert_uint_eq(disp_lcache_list(c, "", 2000, got, 8), 0);
    /* A job's fitted receive cost replaces the class entries' (their age
     * kept), not the ingress one's, not another client's; nonsense is
     * ignored. */
    disp_lcache_note_recv(c, "client a", 0.7e-9, 2500);
    disp_lcache_note_recv(c, "client a", NAN, 2500);
    disp_lcache_note_recv(c, "client a", -1.0, 2500);
    disp_lcache_note_recv(c, "", 0.1e-9, 2500);
    disp_lcache_note_recv(NULL, "client a", 0.1e-9, 2500);
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 2500, got, 8), 2);
    for (int i = 0; i < 2; i++) {
        NEAR(got[i]->recv_cpu_per_byte, got[i]->class_key[0] != '\0' ? 0.7e-9 : 0.0, 0.0);
        ck_assert_int_eq(got[i]->stored_ms, got[i]->class_key[0] != '\0' ? 2000 : 1000);
    }
    ck_assert_uint_eq(disp_lcache_list(c, "client b", 2500, got, 8), 1);
    NEAR(got[0]->recv_cpu_per_byte, 0.0, 0.0);
    /* Expiry: the ingress (stored at 1000) goes, the replaced class entry
     * (2000) is still fresh a millisecond before its own end. */
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 1000 + DISP_LINK_TTL_MS, got, 8), 1);
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 2000 + DISP_LINK_TTL_MS, got, 8), 0);
    char long_key[DISP_LINK_KEY_MAX + 8];
    memset(long_key, 'x', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    disp_lcache_put(c, "client d", "k", 0.0, 0.0, 1, 3000);
    disp_lcache_put(c, "client d", "k", -1.0, 0.0, 1, 3000);
    disp_lcache_put(c, "client d", "k", INFINITY, 0.0, 1, 3000);
    disp_lcache_put(c, "client d", long_key, 1e8, 0.0, 1, 3000);
    disp_lcache_put(c, long_key, "k", 1e8, 0.0, 1, 3000);
    disp_lcache_put(c, "", "k", 1e8, 0.0, 1, 3000);
    ck_assert_uint_eq(disp_lcache_list(c, "client d", 3000, got, 8), 0);
    /* Full: every new link evicts the oldest. */
    for (int i = 0; i < DISP_LINK_MAX + 10; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k%d", i);
        disp_lcache_put(c, "client e", key, 1e8 + i, 0.0, 1, 10000 + i);
    }
    ck_assert_uint_eq(disp_lcache_list(c, "client e", 20000, got, DISP_LINK_MAX + 1),
                      DISP_LINK_MAX);
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 20000, got, 8), 0);
    for (size_t i = 0; i < DISP_LINK_MAX; i++) {
        ck_assert(got[i]->bandwidth >= 1e8 + 10); /* k0..k9, the oldest, went */
    }
    free(c);
}
END_TEST

/* The client's aggregate ingress probe needs two streams that worked:
 * fewer addresses, or workers that do not answer, give 0 ("not
 * measured"), within the deadline. The working case is
 * tests/integration/test_multirank_plan.sh (node_bandwidth). */
START_TEST(test_probe_aggregate_broken)
{
    const char *addrs[3] = {"127.0.0.1:1", "127.0.0.1:1", "not an address"};
    double recv = -1.0;
    NEAR(cl_probe_aggregate(addrs, 0, NULL, 500, &recv), 0.0, 0.0);
    NEAR(recv, 0.0, 0.0);
    recv = -1.0;
    NEAR(cl_probe_aggregate(addrs, 1, NULL, 500, &recv), 0.0, 0.0);
    NEAR(recv, 0.0, 0.0);
    recv = -1.0;
    NEAR(cl_probe_aggregate(addrs, 3, NULL, 500, &recv), 0.0, 0.0);
    NEAR(recv, 0.0, 0.0);
}
END_TEST

/* The per-sample overhead a running job measured enters the profile cache
 * only within DISP_PCACHE_OVERHEAD_MAX_X of the idle-core profile's local
 * sample cost (at least the floor): a training loop's CPU measured as
 * Sluice's (261 ms a sample, issue 39) is refused, a plausible one kept. */
START_TEST(test_pcache_overhead_bound)
{
    disp_pcache_t *c = disp_pcache_new();
    ck_assert_ptr_nonnull(c);
    disp_hprof_t p;
    memset(&p, 0, sizeof(p));
    snprintf(p.host, sizeof(p.host), "client gpu-node");
    p.nunits = 2;
    p.read_sec = 0.0001;
    p.units[0].cpu_sec_per_sample = 0.0006;
    p.units[1].cpu_sec_per_sample = 0.0003; /* 1 ms a local sample */
    p.samples = 64;
    disp_pcache_put(c, 7, &p, 1000);
    double bound = -1.0;
    ck_assert_int_eq(disp_pcache_note_overhead(c, 8, "client gpu-node", 0.0002, &bound), -ENOENT);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 7, "client gpu-node", 0.0009, &bound), 0);
    ck_assert(bound < 0.0); /* untouched when stored */
    ck_assert_int_eq(disp_pcache_note_overhead(c, 7, "client gpu-node", 0.261, &bound), -ERANGE);
    ck_assert(fabs(bound - 0.004) < 1e-9);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 7, "client gpu-node", NAN, &bound), -ERANGE);
    const disp_hprof_t *got[2];
    ck_assert_uint_eq(disp_pcache_list(c, 7, 2000, got, 2), 1);
    ck_assert(fabs(got[0]->overhead_sec - 0.0009) < 1e-12); /* the refused ones left it */
    /* A pipeline that costs next to nothing locally: the floor. */
    p.units[0].cpu_sec_per_sample = 0.0;
    p.units[1].cpu_sec_per_sample = 0.0;
    p.read_sec = 0.00001;
    disp_pcache_put(c, 9, &p, 1000);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 9, "client gpu-node", 0.0015, &bound), 0);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 9, "client gpu-node", 0.0025, &bound), -ERANGE);
    ck_assert(fabs(bound - DISP_PCACHE_OVERHEAD_FLOOR_SEC) < 1e-12);
    disp_pcache_free(c);
}
END_TEST

/* The prior for a spec new to a host: the overhead another spec's running
 * job measured there, the latest stored; never the spec's own entry,
 * another host's, a profile's unmeasured 0 or a stale entry. */
START_TEST(test_pcache_host_prior)
{
    disp_pcache_t *c = disp_pcache_new();
    ck_assert_ptr_nonnull(c);
    disp_hprof_t p;
    memset(&p, 0, sizeof(p));
    snprintf(p.host, sizeof(p.host), "client gpu-node");
    p.nunits = 1;
    p.units[0].cpu_sec_per_sample = 0.001;
    p.samples = 64;
    double prior = -1.0;
    disp_pcache_put(c, 1, &p, 1000);
    disp_pcache_put(c, 2, &p, 1000);
    snprintf(p.host, sizeof(p.host), "client other-node");
    disp_pcache_put(c, 3, &p, 1000);
    /* Profiles alone (idle-core, no overhead measured): no prior. */
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 2000, &prior), 0);
    double bound;
    ck_assert_int_eq(disp_pcache_note_overhead(c, 1, "client gpu-node", 0.0004, &bound), 0);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 3, "client other-node", 0.0030, &bound), 0);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 2000, &prior), 1);
    ck_assert(fabs(prior - 0.0004) < 1e-12);
    /* Its own spec's entry is not a prior (its profile carries it). */
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 1, 2000, &prior), 0);
    /* The latest measured wins; a refused one changes nothing. */
    ck_assert_int_eq(disp_pcache_note_overhead(c, 2, "client gpu-node", 0.0006, &bound), 0);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 1, "client gpu-node", 0.261, &bound), -ERANGE);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 2000, &prior), 1);
    ck_assert(fabs(prior - 0.0006) < 1e-12);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 2, 2000, &prior), 1);
    ck_assert(fabs(prior - 0.0004) < 1e-12);
    /* Re-stored without an overhead: no longer a measured one. */
    snprintf(p.host, sizeof(p.host), "client gpu-node");
    disp_pcache_put(c, 2, &p, 3000);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 3000, &prior), 1);
    ck_assert(fabs(prior - 0.0004) < 1e-12);
    /* Measured by a job too young (DISP_PRIOR_MIN_RUN_MS): its spec keeps
     * it, but no other spec takes it as a prior until a later note. */
    disp_pcache_not_prior(c, 1, "client gpu-node");
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 3000, &prior), 0);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 1, "client gpu-node", 0.0004, &bound), 0);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 3000, &prior), 1);
    disp_pcache_not_prior(c, 77, "client gpu-node"); /* no entry: nothing */
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 3000, &prior), 1);
    /* Stale after the cache's TTL. */
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 1000 + DISP_PCACHE_TTL_MS,
                                            &prior),
                     0);
    disp_pcache_free(c);
}
END_TEST

/* The first plan's overhead (first_plan.h): the spec's own cached figure,
 * else another spec's on this host, else the profiled one, else none; an
 * unknown (0, negative, NaN) candidate is skipped, never charged. */
START_TEST(test_first_overhead)
{
    double v = -1.0;
    ck_assert_int_eq(disp_first_overhead(0.0004, 0.0006, 0.0009, &v), DISP_OVH_CACHED);
    ck_assert(fabs(v - 0.0004) < 1e-12);
    ck_assert_int_eq(disp_first_overhead(0.0, 0.0006, 0.0009, &v), DISP_OVH_PRIOR);
    ck_assert(fabs(v - 0.0006) < 1e-12);
    ck_assert_int_eq(disp_first_overhead(NAN, -1.0, 0.0009, &v), DISP_OVH_PROFILED);
    ck_assert(fabs(v - 0.0009) < 1e-12);
    ck_assert_int_eq(disp_first_overhead(0.0, 0.0, INFINITY, &v), DISP_OVH_NONE);
    ck_assert(v == 0.0);
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_NONE), "none");
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_CACHED), "cached");
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_PRIOR), "prior");
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_PROFILED), "profiled");
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_MEASURED), "measured");
    ck_assert_str_eq(disp_ovh_src_name((disp_ovh_src_e)99), "?");
}
END_TEST

/* The client's profiled overhead as the dispatcher takes it
 * (PlannerInputs.client_overhead_profiled_sec): kept when sane, 0 for a
 * broken one (NaN, infinite, negative), capped like any overhead. */
START_TEST(test_profiled_overhead_input)
{
    fx_pin_t pin;
    fx_pin_init(&pin, 1);
    sl_spec_t spec;
    char err[512];
    ck_assert_int_eq(sl_spec_parse("t", FX_PIN_SPEC, strlen(FX_PIN_SPEC), &spec, err, sizeof(err)),
                     0);
    const double sent[] = {0.0004, NAN, INFINITY, -0.001, 50.0};
    const double want[] = {0.0004, 0.0, 0.0, 0.0, 1.0};
    for (size_t i = 0; i < sizeof(sent) / sizeof(sent[0]); i++) {
        pin.in.client_overhead_profiled_sec = sent[i];
        disp_pjob_t *pj = NULL;
        ck_assert_int_eq(disp_pjob_new(&pin.in, &spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
        ck_assert_msg(fabs(pj->overhead_profiled_sec - want[i]) < 1e-12, "case %zu: %g", i,
                      pj->overhead_profiled_sec);
        disp_pjob_free(pj);
    }
    sl_spec_clear(&spec);
}
END_TEST

/* The per-second cost the first plan charges (first_plan.h): the host's
 * figure where the overhead charged is no running job's (none, profiled),
 * nothing where it is (cached, prior, measured: it holds it already),
 * capped at half the budget and DISP_PERSEC_MAX_CPU; nothing for a broken
 * figure. */
START_TEST(test_first_persec)
{
    ck_assert(fabs(disp_first_persec(DISP_OVH_NONE, 0.01, 0.2) - 0.01) < 1e-12);
    ck_assert(fabs(disp_first_persec(DISP_OVH_PROFILED, 0.01, 0.2) - 0.01) < 1e-12);
    ck_assert(disp_first_persec(DISP_OVH_CACHED, 0.01, 0.2) == 0.0);
    ck_assert(disp_first_persec(DISP_OVH_PRIOR, 0.01, 0.2) == 0.0);
    ck_assert(disp_first_persec(DISP_OVH_MEASURED, 0.01, 0.2) == 0.0);
    ck_assert(fabs(disp_first_persec(DISP_OVH_NONE, 0.15, 0.2) - 0.1) < 1e-12);
    ck_assert(fabs(disp_first_persec(DISP_OVH_NONE, 0.9, 8.0) - DISP_PERSEC_MAX_CPU) < 1e-12);
    ck_assert(disp_first_persec(DISP_OVH_NONE, NAN, 0.2) == 0.0);
    ck_assert(disp_first_persec(DISP_OVH_NONE, -0.01, 0.2) == 0.0);
    ck_assert(disp_first_persec(DISP_OVH_NONE, 0.01, 0.0) == 0.0); /* no budget: no room */
}
END_TEST

/* The host's per-second cost in the profile cache: stored with a spec's
 * entry, found for the host by any spec (the latest), bounded (half the
 * job's budget, DISP_PERSEC_MAX_CPU), kept when the profile is re-stored,
 * gone when stale. */
START_TEST(test_pcache_host_persec)
{
    disp_pcache_t *c = disp_pcache_new();
    ck_assert_ptr_nonnull(c);
    disp_hprof_t p;
    memset(&p, 0, sizeof(p));
    snprintf(p.host, sizeof(p.host), "client gpu-node");
    p.nunits = 1;
    p.units[0].cpu_sec_per_sample = 0.001;
    p.samples = 64;
    disp_pcache_put(c, 1, &p, 1000);
    disp_pcache_put(c, 2, &p, 1000);
    double v = -1.0, bound = -1.0;
    ck_assert_int_eq(disp_pcache_host_persec(c, "client gpu-node", 2000, &v), 0);
    ck_assert_int_eq(disp_pcache_note_persec(c, 9, "client gpu-node", 0.01, 0.2, &bound), -ENOENT);
    ck_assert_int_eq(disp_pcache_note_persec(c, 1, "client gpu-node", 0.01, 0.2, &bound), 0);
    ck_assert(bound < 0.0);
    ck_assert_int_eq(disp_pcache_host_persec(c, "client gpu-node", 2000, &v), 1);
    ck_assert(fabs(v - 0.01) < 1e-12);
    ck_assert_int_eq(disp_pcache_host_persec(c, "client other-node", 2000, &v), 0);
    /* Refused: above half the budget, above the cap, broken; nothing changes. */
    ck_assert_int_eq(disp_pcache_note_persec(c, 2, "client gpu-node", 0.11, 0.2, &bound), -ERANGE);
    ck_assert(fabs(bound - 0.1) < 1e-12);
    ck_assert_int_eq(disp_pcache_note_persec(c, 2, "client gpu-node", 0.3, 4.0, &bound), -ERANGE);
    ck_assert(fabs(bound - DISP_PERSEC_MAX_CPU) < 1e-12);
    ck_assert_int_eq(disp_pcache_note_persec(c, 2, "client gpu-node", NAN, 0.2, &bound), -ERANGE);
    ck_assert_int_eq(disp_pcache_note_persec(c, 2, "client gpu-node", 0.0, 0.2, &bound), -ERANGE);
    ck_assert_int_eq(disp_pcache_host_persec(c, "client gpu-node", 2000, &v), 1);
    ck_assert(fabs(v - 0.01) < 1e-12);
    /* The latest of any spec on the host. */
    ck_assert_int_eq(disp_pcache_note_persec(c, 2, "client gpu-node", 0.02, 0.2, &bound), 0);
    ck_assert_int_eq(disp_pcache_host_persec(c, "client gpu-node", 2000, &v), 1);
    ck_assert(fabs(v - 0.02) < 1e-12);
    /* A re-stored profile keeps it (no part of the profile). */
    disp_pcache_put(c, 2, &p, 3000);
    ck_assert_int_eq(disp_pcache_host_persec(c, "client gpu-node", 3000, &v), 1);
    ck_assert(fabs(v - 0.02) < 1e-12);
    /* Stale: spec 1's entry (stored at 1000) first, then spec 2's. */
    ck_assert_int_eq(disp_pcache_host_persec(c, "client gpu-node", 3000 + DISP_PCACHE_TTL_MS, &v),
                     0);
    disp_pcache_free(c);
}
END_TEST

/* The planner with and without the charge: the per-second cost comes off
 * the client's budget before anything is priced, once (a sanitized copy
 * planned again is not charged twice), and lowers what the client alone
 * and a client-bound plan reach by exactly (budget - cost) / budget. */
START_TEST(test_planner_persec_charge)
{
    disp_pl_input_t in;
    fx_pl_base(&in, 0.2);
    fx_pl_add_class(&in, 2, 2.0, 1.0, 1e9);
    disp_pl_result_t r0, r1;
    ck_assert_int_eq(disp_planner_plan(&in, &r0), 0);
    in.client_persec_cpu = 0.05;
    ck_assert_int_eq(disp_planner_plan(&in, &r1), 0);
    NEAR(r1.local_rate, r0.local_rate * 0.75, 1e-9);
    disp_pl_terms_t t0, t1;
    in.client_persec_cpu = 0.0;
    disp_planner_terms(&in, 2, 0.0, &t0);
    in.client_persec_cpu = 0.05;
    disp_planner_terms(&in, 2, 0.0, &t1);
    NEAR(t1.client, t0.client * 0.75, 1e-9);
    NEAR(t1.worker, t0.worker, 1e-9); /* the workers' terms are not the client's */
    /* A cost at or above the budget leaves the client nothing, not less. */
    in.client_persec_cpu = 0.5;
    disp_planner_terms(&in, 0, 1.0, &t1);
    ck_assert(t1.client == 0.0);
    in.client_persec_cpu = NAN; /* broken: not charged */
    disp_planner_terms(&in, 2, 0.0, &t1);
    NEAR(t1.client, t0.client, 1e-9);
}
END_TEST

static json_t *explain_inputs(disp_t *d, Sluice__SubmitJobRequest *req, int64_t now, json_t **root)
{
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_plan_job(d, req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    json_error_t je;
    *root = json_loads(resp.explain->json, 0, &je);
    disp_arena_free(&a);
    ck_assert_ptr_nonnull(*root);
    return json_object_get(*root, "inputs");
}

static double off_limit(const json_t *root)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "candidates"), i, c)
    {
        if (json_is_string(json_object_get(c, "label"))) {
            return json_number_value(json_object_get(c, "client_limit"));
        }
    }
    return -1.0;
}

/* Through the dispatcher (PlanJob): no host figure, nothing charged; a
 * figure a job stored for the host is charged to a plan whose overhead is
 * no running job's, shown in --json, and lowers the client's limit; once
 * the spec has its own running job's overhead (cached), not charged, the
 * host's figure still shown. */
START_TEST(test_plan_persec_charged)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    pin.in.client_cpu_budget = 0.5;
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    json_t *root = NULL;
    json_t *in = explain_inputs(d, &req, now, &root);
    ck_assert(json_number_value(json_object_get(in, "client_persec_cpu")) == 0.0);
    ck_assert(json_is_null(json_object_get(in, "client_persec_host")));
    double off0 = off_limit(root);
    ck_assert(off0 > 0.0);
    json_decref(root);

    double bound = 0.0;
    ck_assert_int_eq(disp_pcache_note_persec(d->pcache, 42, "client test", 0.05, 0.5, &bound), 0);
    in = explain_inputs(d, &req, now, &root);
    NEAR(json_number_value(json_object_get(in, "client_persec_cpu")), 0.05, 1e-12);
    NEAR(json_number_value(json_object_get(in, "client_persec_host")), 0.05, 1e-12);
    ck_assert_str_eq(json_string_value(json_object_get(in, "sample_overhead_source")), "none");
    NEAR(off_limit(root), off0 * 0.9, 1e-6);
    json_decref(root);

    /* The client sends back the cached profile GetPlanContext gave it,
     * with the overhead its spec's running job measured. */
    pin.client.sample_overhead_sec = 0.0001;
    in = explain_inputs(d, &req, now, &root);
    ck_assert_str_eq(json_string_value(json_object_get(in, "sample_overhead_source")), "cached");
    ck_assert(json_number_value(json_object_get(in, "client_persec_cpu")) == 0.0);
    NEAR(json_number_value(json_object_get(in, "client_persec_host")), 0.05, 1e-12);
    json_decref(root);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* The per-second cost a client reports (ReportRates.persec_cpu) as the
 * dispatcher takes it: kept when sane, 0 for a broken one (NaN, infinite,
 * negative), capped like a budget; the cache's bound then refuses what no
 * client spends (test_pcache_host_persec). */
START_TEST(test_persec_report_input)
{
    fx_pin_t pin;
    fx_pin_init(&pin, 1);
    sl_spec_t spec;
    char err[512];
    ck_assert_int_eq(sl_spec_parse("t", FX_PIN_SPEC, strlen(FX_PIN_SPEC), &spec, err, sizeof(err)),
                     0);
    disp_pjob_t *pj = NULL;
    ck_assert_int_eq(disp_pjob_new(&pin.in, &spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    const double sent[] = {0.02, NAN, INFINITY, -0.5, 1e9};
    const double want[] = {0.02, 0.0, 0.0, 0.0, DISP_PJ_MAX_BUDGET};
    for (size_t i = 0; i < sizeof(sent) / sizeof(sent[0]); i++) {
        Sluice__ReportRatesRequest r = SLUICE__REPORT_RATES_REQUEST__INIT;
        r.delivered_per_sec = 100.0;
        r.persec_cpu = sent[i];
        disp_pjob_rates(pj, &r, 1000 + (int64_t)i);
        ck_assert_msg(fabs(pj->measured_persec - want[i]) < 1e-12, "case %zu: %g", i,
                      pj->measured_persec);
    }
    disp_pjob_free(pj);
    sl_spec_clear(&spec);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_WARNING);
    Suite *s = suite_create("planner_priors");
    TCase *tc = tcase_create("priors");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_profile_samples_for);
    tcase_add_test(tc, test_link_cache);
    tcase_add_test(tc, test_probe_aggregate_broken);
    tcase_add_test(tc, test_pcache_overhead_bound);
    tcase_add_test(tc, test_pcache_host_prior);
    tcase_add_test(tc, test_first_overhead);
    tcase_add_test(tc, test_profiled_overhead_input);
    tcase_add_test(tc, test_first_persec);
    tcase_add_test(tc, test_pcache_host_persec);
    tcase_add_test(tc, test_planner_persec_charge);
    tcase_add_test(tc, test_plan_persec_charged);
    tcase_add_test(tc, test_persec_report_input);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
