/* test_client_short_job: client/lib/short_job.c -- the short-job guard's
 * decision: a job whose profiling could gain no more than it costs starts
 * on the better fixed policy (off or all; all only with its link priced);
 * a long one, one whose profiling pays, or one with nothing to estimate
 * from profiles; and the estimates it decides from, over clusters varied
 * in job length, quota, link and image size. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/short_job.h"
#include "tests/unit/fixtures.h"

/* Workers 8x the client: auto could reach 9/8 of `all` at best. 160
 * samples at 400/s take 0.4 s; profiling that costs 1.5 s cannot pay. */
START_TEST(test_short_runs_all)
{
    cl_short_in_t in = {.samples = 160, .profile_sec = 1.5, .rate_off = 50, .rate_all = 400};
    cl_short_t r;
    cl_short_decide(&in, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_ALL);
    NEAR(r.fixed_sec, 0.4, 1e-9);
    NEAR(r.saving_sec, 0.4 - 160.0 / 450.0, 1e-9);
    ck_assert_str_eq(cl_short_name(r.choice), "all");
}
END_TEST

/* The client faster (a slow link): off. */
START_TEST(test_short_runs_off)
{
    cl_short_in_t in = {.samples = 500, .profile_sec = 2.0, .rate_off = 300, .rate_all = 20};
    cl_short_t r;
    cl_short_decide(&in, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_OFF);
    ck_assert_str_eq(cl_short_name(r.choice), "off");
}
END_TEST

/* The same rates over a long job: profiling could save far more. Balanced
 * rates: auto could be twice either, so even a short job profiles once the
 * saving passes the cost. */
START_TEST(test_long_or_balanced_profiles)
{
    cl_short_t r;
    cl_short_in_t lng = {.samples = 32000, .profile_sec = 1.5, .rate_off = 50, .rate_all = 400};
    cl_short_decide(&lng, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_PROFILE);
    ck_assert(r.saving_sec > lng.profile_sec);
    cl_short_in_t bal = {.samples = 400, .profile_sec = 1.2, .rate_off = 100, .rate_all = 100};
    cl_short_decide(&bal, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_PROFILE); /* 4 s vs 2 s: saves 2 s > 1.5 x 1.2 s */
    bal.profile_sec = 1.5;                        /* saves 2 s < 1.5 x 1.5 s: near the line */
    cl_short_decide(&bal, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_OFF);
    bal.profile_sec = 1.2;
    bal.samples = 200; /* 2 s vs 1 s: saves 1 s < 1.8 s */
    cl_short_decide(&bal, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_OFF); /* a tie goes to off (no workers needed) */
}
END_TEST

/* Cheap profiling no longer profiles by itself (the floor this replaced
 * let a 0.98 s profiling lose a third of a 3 s job); nothing known (a rate
 * 0, NaN, no samples) profiles; a broken cost counts as 0. */
START_TEST(test_cheap_or_unknown_profiles)
{
    cl_short_t r;
    cl_short_in_t in = {.samples = 160, .profile_sec = 0.3, .rate_off = 50, .rate_all = 400};
    cl_short_decide(&in, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_ALL); /* 0.3 s to gain 0.04 s of a 0.4 s job */
    ck_assert_int_eq(r.why, CL_SHORT_WHY_SHORT);
    const cl_short_in_t bad[] = {
        {.samples = 160, .profile_sec = 5, .rate_off = 0, .rate_all = 400},
        {.samples = 160, .profile_sec = 5, .rate_off = 50, .rate_all = NAN},
        {.samples = 160, .profile_sec = 5, .rate_off = 50, .rate_all = 0}, /* no workers */
        {.samples = 0, .profile_sec = 5, .rate_off = 50, .rate_all = 400},
        {.samples = 160, .profile_sec = NAN, .rate_off = 50, .rate_all = 400},
        {.samples = 160, .profile_sec = -3, .rate_off = 50, .rate_all = 400},
    };
    const cl_short_why_e why[] = {CL_SHORT_WHY_UNKNOWN, CL_SHORT_WHY_UNKNOWN, CL_SHORT_WHY_UNKNOWN,
                                  CL_SHORT_WHY_UNKNOWN, CL_SHORT_WHY_PAYS,    CL_SHORT_WHY_PAYS};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cl_short_decide(&bad[i], &r);
        ck_assert_msg(r.choice == CL_SHORT_PROFILE && r.why == why[i], "case %zu: %s", i,
                      cl_short_why_name(r.why));
    }
    ck_assert_str_eq(cl_short_name((cl_short_e)7), "?");
    ck_assert_str_eq(cl_short_why_name(CL_SHORT_WHY_LINK), "link");
    ck_assert_str_eq(cl_short_why_name((cl_short_why_e)9), "?");
}
END_TEST

/* `all` ahead but its link unknown (rate_all an upper bound): profile, the
 * guard cannot tell; `off` ahead stands without the link (it only lowers
 * rate_all). rate_both replaces off + all as the gain's rate. */
START_TEST(test_unpriced_link)
{
    cl_short_t r;
    cl_short_in_t in = {.samples = 160,
                        .profile_sec = 1.5,
                        .rate_off = 50,
                        .rate_all = 400,
                        .all_unpriced = 1};
    cl_short_decide(&in, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_PROFILE);
    ck_assert_int_eq(r.why, CL_SHORT_WHY_LINK);
    in = (cl_short_in_t){.samples = 500,
                         .profile_sec = 2.0,
                         .rate_off = 300,
                         .rate_all = 20,
                         .all_unpriced = 1};
    cl_short_decide(&in, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_OFF);
    in = (cl_short_in_t){.samples = 400,
                         .profile_sec = 1.0,
                         .rate_off = 100,
                         .rate_all = 100,
                         .rate_both = 120};
    cl_short_decide(&in, &r);
    NEAR(r.saving_sec, 4.0 - 400.0 / 120.0, 1e-9); /* not 2 s: receiving costs the client */
    ck_assert_int_eq(r.choice, CL_SHORT_OFF);
    in.rate_both = 50; /* below the better policy: the better policy */
    cl_short_decide(&in, &r);
    NEAR(r.saving_sec, 0.0, 1e-9);
}
END_TEST

/* A job long enough profiles even where the gain is small: profiling is
 * at most CL_SHORT_FREE_SHARE of it. */
START_TEST(test_long_one_sided_profiles)
{
    cl_short_t r;
    cl_short_in_t in = {.samples = 100000, .profile_sec = 2.0, .rate_off = 1, .rate_all = 400};
    cl_short_decide(&in, &r); /* 250 s on all; gain 0.6 s */
    ck_assert(r.saving_sec < in.profile_sec);
    ck_assert_int_eq(r.choice, CL_SHORT_PROFILE);
    ck_assert_int_eq(r.why, CL_SHORT_WHY_LONG);
    in.samples = 20000; /* 50 s: 4 % */
    cl_short_decide(&in, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_ALL);
}
END_TEST

/* SLUICE_ALWAYS_PROFILE=1 or the option: always; anything else: the guard. */
START_TEST(test_forced)
{
    unsetenv("SLUICE_ALWAYS_PROFILE");
    ck_assert_int_eq(cl_short_forced(0), 0);
    ck_assert_int_eq(cl_short_forced(1), 1);
    const char *const no[] = {"0", "", "yes", "11", " 1"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        setenv("SLUICE_ALWAYS_PROFILE", no[i], 1);
        ck_assert_msg(cl_short_forced(0) == 0, "'%s'", no[i]);
    }
    setenv("SLUICE_ALWAYS_PROFILE", "1", 1);
    ck_assert_int_eq(cl_short_forced(0), 1);
    unsetenv("SLUICE_ALWAYS_PROFILE");
}
END_TEST

/* The estimates: off from the client's CPUs; all the least of the workers,
 * the link and the client's receive cost; profiling from the pass on one
 * thread's share plus the probes. */
START_TEST(test_inputs)
{
    cl_short_est_t e = {.local_sec = 0.01,
                        .out_bytes = 1e5,
                        .overhead = 0.0005,
                        .client_cpus = 0.25,
                        .worker_cpus = 1.4,
                        .bandwidth = 25e6,
                        .recv_per_byte = 3e-9,
                        .profile_samples = 32,
                        .probe_sec = 0.6};
    cl_short_in_t in;
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.samples, 3200, 1e-9);
    NEAR(in.rate_off, 0.25 / 0.0105, 1e-9);
    /* workers 140/s, link 250/s, client receive 0.25 / 0.0008 = 312.5/s */
    NEAR(in.rate_all, 140.0, 1e-9);
    ck_assert_int_eq(in.all_unpriced, 0);
    /* both at once: 140/s received take 140 x 0.8 ms = 0.112 CPU; the
     * 0.138 CPU left runs 0.138 / 10.5 ms local samples a second */
    NEAR(in.rate_both, 140.0 + (0.25 - 140 * 0.0008) / 0.0105, 1e-9);
    NEAR(in.profile_sec, (32 + 1) * 0.01 / 0.25 + 0.6, 1e-9); /* + the untimed first sample */
    e.bandwidth = 5e6; /* the link binds: 50/s */
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.rate_all, 50.0, 1e-9);
    e.bandwidth = 0.0; /* unknown: no limit, but rate_all is unpriced; the receive binds */
    e.worker_cpus = 8;
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.rate_all, 312.5, 1e-9);
    ck_assert_int_eq(in.all_unpriced, 1);
    NEAR(in.rate_both, 312.5, 1e-9); /* the receive takes the whole client */
    e.recv_per_byte = 1e-7;          /* a received sample dearer than a local one */
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.rate_both, in.rate_off, 1e-9);
    e.recv_per_byte = 3e-9;
    e.consumer_rate = 30; /* the training loop takes 30/s: every rate at most that */
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.rate_off, 0.25 / 0.0105, 1e-9);
    NEAR(in.rate_all, 30, 1e-9);
    NEAR(in.rate_both, 30, 1e-9);
    cl_short_t r;
    cl_short_decide(&in, &r);
    NEAR(r.saving_sec, 0.0, 1e-9); /* the consumer binds: nothing to gain */
    e.consumer_rate = NAN;         /* broken: unknown */
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.rate_all, 312.5, 1e-9);
    e.consumer_rate = 0;
    e.worker_cpus = 0; /* no workers: all 0 (the decision: unknown) */
    cl_short_inputs(&e, 3200, &in);
    ck_assert(in.rate_all == 0.0 && in.rate_both == 0.0 && in.all_unpriced == 0);
    e.worker_cpus = 8;
    e.profile_samples = 0; /* cached: probes only; budget over a core: one core */
    e.client_cpus = 4;
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.profile_sec, 0.6, 1e-9);
    /* The codec pass runs cached or not: 8 samples on one core. */
    e.codec_samples = 8;
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.profile_sec, 8 * 0.01 + 0.6, 1e-9);
}
END_TEST

/* What profiling takes in wall time on the client (measured on loopback
 * under a 0.25-1 CPU cgroup quota, docs/benchmarks.md "Short-job guard
 * under a quota"): the pass with its untimed first sample, stopped at its
 * cap plus the sample running then; the codec pass; the probes; every
 * sample's wall time its CPU over one thread's share of the quota. */
START_TEST(test_profile_wall)
{
    cl_short_est_t e = {.local_sec = 0.1,
                        .client_cpus = 1.0,
                        .worker_cpus = 4,
                        .profile_samples = 32,
                        .pass_max_sec = 2.0,
                        .codec_samples = 8,
                        .probe_sec = 0.4};
    cl_short_in_t in;
    cl_short_inputs(&e, 160, &in);
    NEAR(in.profile_sec, 2.0 + 0.1 + 8 * 0.1 + 0.4, 1e-9); /* 33 x 0.1 = 3.3 s: capped */
    e.profile_samples = 8;                                 /* 0.9 s: under the cap */
    cl_short_inputs(&e, 160, &in);
    NEAR(in.profile_sec, 9 * 0.1 + 8 * 0.1 + 0.4, 1e-9);
    /* A 0.5-CPU quota: each sample twice the wall time, the probes not. */
    e.client_cpus = 0.5;
    cl_short_inputs(&e, 160, &in);
    NEAR(in.profile_sec, 9 * 0.2 + 8 * 0.2 + 0.4, 1e-9);
    e.profile_samples = 200; /* capped: the cap plus the sample running then */
    cl_short_inputs(&e, 160, &in);
    NEAR(in.profile_sec, 2.0 + 0.2 + 8 * 0.2 + 0.4, 1e-9);
    /* Without a cap the pass's every sample counts; a broken cap is none. */
    const double nocap[] = {0.0, NAN, -1.0};
    for (size_t i = 0; i < sizeof(nocap) / sizeof(nocap[0]); i++) {
        e.pass_max_sec = nocap[i];
        cl_short_inputs(&e, 160, &in);
        NEAR(in.profile_sec, 201 * 0.2 + 8 * 0.2 + 0.4, 1e-9);
    }
    /* A broken codec count is none. */
    e.pass_max_sec = 2.0;
    e.codec_samples = NAN;
    cl_short_inputs(&e, 160, &in);
    NEAR(in.profile_sec, 2.0 + 0.2 + 0.4, 1e-9);
}
END_TEST

/* The probes profiling runs, priced by the link: each CL_SHORT_PROBE_SEC
 * plus its first chunks over the bandwidth (on a 100 Mbit/s cluster they
 * took 0.9 s, the flat figure said 0.6 s); cached links leave the overhead
 * probe only; no workers, no probe. */
START_TEST(test_probe_sec)
{
    const double c = CL_PROBE_CHUNK;
    const double mib = 1 << 20;
    NEAR(cl_short_probe_sec(0.0, 0, 0, 0, mib), 0.0, 1e-12);
    /* Unknown link: the flat figure per probe. */
    NEAR(cl_short_probe_sec(0.0, 0, 0, 1, 0.0), CL_SHORT_PROBE_SEC, 1e-12);
    NEAR(cl_short_probe_sec(0.0, 0, 0, 1, mib), 2 * CL_SHORT_PROBE_SEC, 1e-12);
    NEAR(cl_short_probe_sec(NAN, 0, 0, 3, mib), 3 * CL_SHORT_PROBE_SEC, 1e-12);
    /* 12.5 MB/s, three workers: the overhead probe's 1 MiB, the class's
     * chunk, the ingress's three chunks. */
    double bw = 12.5e6;
    NEAR(cl_short_probe_sec(bw, 0, 0, 3, mib),
         3 * CL_SHORT_PROBE_SEC + mib / bw + c / bw + 3 * c / bw, 1e-12);
    NEAR(cl_short_probe_sec(bw, 1, 0, 3, mib), CL_SHORT_PROBE_SEC + mib / bw, 1e-12); /* cached */
    NEAR(cl_short_probe_sec(bw, 1, 0, 3, 0.0), 0.0, 1e-12); /* cached, overhead known */
    /* The ingress probe streams from at most CL_PROBE_CONCURRENT workers. */
    NEAR(cl_short_probe_sec(bw, 0, 0, 100, 0.0),
         2 * CL_SHORT_PROBE_SEC + c / bw + CL_PROBE_CONCURRENT * c / bw, 1e-12);
    /* The guard probed the class's worker: profiling reuses it. */
    NEAR(cl_short_probe_sec(bw, 0, 1, 3, mib), 2 * CL_SHORT_PROBE_SEC + mib / bw + 3 * c / bw,
         1e-12);
    NEAR(cl_short_probe_sec(bw, 0, 1, 1, 0.0), 0.0, 1e-12);
    NEAR(cl_short_probe_sec(bw, 1, 1, 3, 0.0), 0.0, 1e-12);
}
END_TEST

/* From estimates to the decision over clusters varied in job length, quota,
 * link and image size (the per-sample CPU of 300-800 px images and of a
 * mix with 30 % 1500-2500 px ones, through imagenet-train: a 602 KB float32
 * output; the clusters of scripts/bench-first-plan, the workers' threads as
 * their CPUs as the guard counts them). cost: what profiling would take. */
typedef struct {
    const char *name;
    double client_cpus, worker_cpus, local_ms, mbit, recv_ns, overhead_ms;
    double samples, cost;
    cl_short_e choice;
    cl_short_why_e why;
} cluster_case_t;

#define STD_MS 3.0   /* 300-800 px: 116/s on 0.35 CPU */
#define LARGE_MS 9.4 /* 30 % large: 32/s on 0.3 CPU */
#define OUT 602112.0 /* 224 x 224 x 3 float32 */

static const cluster_case_t CLUSTERS[] = {
    /* Q, the case the floor lost: 100 Mbit/s carries ~21/s, the client
     * 116/s; profiling 0.98 s could gain ~0.3 s of a 3.4 s epoch. */
    {"Q 1 epoch", 0.35, 3, STD_MS, 100, 5, 0, 400, 0.98, CL_SHORT_OFF, CL_SHORT_WHY_SHORT},
    /* ...its link unknown: `off` is ahead only by the link, which the
     * guard must know before it runs `off` rather than `all` (a probe). */
    {"Q link unknown", 0.35, 3, STD_MS, 0, 0, 0, 400, 0.98, CL_SHORT_PROFILE, CL_SHORT_WHY_LINK},
    /* ...a hundred epochs (343 s on `off`): receiving a float32 sample
     * costs the client about what computing it does (5 ns/B measured
     * there), so running both gains nothing, but profiling is under 1 %
     * of the job: it profiles (a mid-pipeline split may win; see
     * docs/planner.md). Ten epochs (34 s): `off`. */
    {"Q 100 epochs", 0.35, 3, STD_MS, 100, 5, 0, 40000, 2.3, CL_SHORT_PROFILE, CL_SHORT_WHY_LONG},
    {"Q 10 epochs", 0.35, 3, STD_MS, 100, 5, 0, 4000, 2.3, CL_SHORT_OFF, CL_SHORT_WHY_SHORT},
    /* P: 500 Mbit/s binds `all` at 104/s, the 0.2-CPU client 71/s. */
    {"P 1 epoch", 0.2, 2, 2.8, 500, 1.7, 0, 400, 1.3, CL_SHORT_ALL, CL_SHORT_WHY_SHORT},
    /* R: 2 Gbit/s, two workers 7x the client on large images: all. */
    {"R 1 epoch", 0.3, 2, LARGE_MS, 2000, 1, 0, 400, 1.9, CL_SHORT_ALL, CL_SHORT_WHY_SHORT},
    /* S: one worker, 300 Mbit/s: off 53, all 62, both ~111: profiling pays. */
    {"S 1 epoch", 0.5, 1, LARGE_MS, 300, 1, 0, 400, 1.5, CL_SHORT_PROFILE, CL_SHORT_WHY_PAYS},
    /* T: 50 Mbit/s, 0.25-CPU client on large images: off 27, all 10 --
     * running both gains ~4 s of 15 s, more than profiling's 2.5 s. */
    {"T 1 epoch", 0.25, 4, LARGE_MS, 50, 1, 0, 400, 2.5, CL_SHORT_PROFILE, CL_SHORT_WHY_PAYS},
    /* ...a quarter of the epoch: too short. */
    {"T 100 samples", 0.25, 4, LARGE_MS, 50, 1, 0, 100, 2.5, CL_SHORT_OFF, CL_SHORT_WHY_SHORT},
    /* U: a 0.6-CPU client as fast as the workers, 1 Gbit/s: off 200, all
     * 208, both ~366: one epoch gains ~0.83 s, about what profiling's 0.8 s
     * estimate said and less than it took (profiled, it reached 0.75-0.93x
     * `all`): the fixed policy. Ten epochs gain 8 s: profile. */
    {"U 1 epoch", 0.6, 2, STD_MS, 1000, 1, 0, 400, 0.8, CL_SHORT_ALL, CL_SHORT_WHY_SHORT},
    {"U 10 epochs", 0.6, 2, STD_MS, 1000, 1, 0, 4000, 0.8, CL_SHORT_PROFILE, CL_SHORT_WHY_PAYS},
    /* A charged overhead (another spec's prior, 0.9 ms) slows both sides
     * and leaves Q's verdict. */
    {"Q prior 0.9 ms", 0.35, 3, STD_MS, 100, 5, 0.9, 400, 0.98, CL_SHORT_OFF, CL_SHORT_WHY_SHORT},
    /* Loopback (unshaped, 10 Gbit/s), workers 8x a 1-CPU client on a costly
     * spec: 160 samples, all. */
    {"loopback 1 epoch", 1, 8, 25, 10000, 0.5, 0, 160, 1.3, CL_SHORT_ALL, CL_SHORT_WHY_SHORT},
    /* 500 epochs of it: the client's 40/s beside all's 320/s gain 25 s. */
    {"loopback long", 1, 8, 25, 10000, 0.5, 0, 80000, 1.3, CL_SHORT_PROFILE, CL_SHORT_WHY_PAYS},
    /* No live workers: nothing to price `all` from: profile (as before). */
    {"no workers", 0.35, 0, STD_MS, 100, 5, 0, 400, 0.98, CL_SHORT_PROFILE, CL_SHORT_WHY_UNKNOWN},
};

START_TEST(test_clusters)
{
    const cluster_case_t *c = &CLUSTERS[_i];
    cl_short_est_t e = {.local_sec = c->local_ms / 1000,
                        .out_bytes = OUT,
                        .overhead = c->overhead_ms / 1000,
                        .client_cpus = c->client_cpus,
                        .worker_cpus = c->worker_cpus,
                        .bandwidth = c->mbit * 1e6 / 8,
                        .recv_per_byte = c->recv_ns * 1e-9,
                        .probe_sec = c->cost};
    cl_short_in_t in;
    cl_short_inputs(&e, c->samples, &in);
    NEAR(in.profile_sec, c->cost, 1e-9);
    cl_short_t r;
    cl_short_decide(&in, &r);
    ck_assert_msg(r.choice == c->choice && r.why == c->why,
                  "%s: %s (%s), off %.1f all %.1f both %.1f, gain %.2f s, profiling %.2f s",
                  c->name, cl_short_name(r.choice), cl_short_why_name(r.why), in.rate_off,
                  in.rate_all, in.rate_both, r.saving_sec, in.profile_sec);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_short_job");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_short_runs_all);
    tcase_add_test(tc, test_short_runs_off);
    tcase_add_test(tc, test_long_or_balanced_profiles);
    tcase_add_test(tc, test_cheap_or_unknown_profiles);
    tcase_add_test(tc, test_unpriced_link);
    tcase_add_test(tc, test_long_one_sided_profiles);
    tcase_add_test(tc, test_forced);
    tcase_add_loop_test(tc, test_clusters, 0, (int)(sizeof(CLUSTERS) / sizeof(CLUSTERS[0])));
    tcase_add_test(tc, test_inputs);
    tcase_add_test(tc, test_profile_wall);
    tcase_add_test(tc, test_probe_sec);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
