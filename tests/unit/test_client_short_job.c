/* test_client_short_job: client/lib/short_job.c -- the short-job guard's
 * decision: a job whose profiling could save no more than it costs starts
 * on the better fixed policy (off or all); a long one, one whose profiling
 * is cheap, or one with nothing to estimate from profiles; and the
 * estimates it decides from. */
#include <check.h>
#include <math.h>
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
    cl_short_in_t bal = {.samples = 400, .profile_sec = 1.5, .rate_off = 100, .rate_all = 100};
    cl_short_decide(&bal, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_PROFILE); /* 4 s vs 2 s: saves 2 s > 1.5 s */
    bal.samples = 200;                            /* 2 s vs 1 s: saves 1 s < 1.5 s */
    cl_short_decide(&bal, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_OFF); /* a tie goes to off (no workers needed) */
}
END_TEST

/* Profiling under CL_SHORT_MIN_PROFILE_SEC always profiles; nothing known
 * (a rate 0, NaN, no samples) profiles; a broken cost counts as 0. */
START_TEST(test_cheap_or_unknown_profiles)
{
    cl_short_t r;
    cl_short_in_t in = {.samples = 160,
                        .profile_sec = CL_SHORT_MIN_PROFILE_SEC * 0.9,
                        .rate_off = 50,
                        .rate_all = 400};
    cl_short_decide(&in, &r);
    ck_assert_int_eq(r.choice, CL_SHORT_PROFILE);
    ck_assert(r.saving_sec > 0.0); /* still estimated, for --explain */
    const cl_short_in_t bad[] = {
        {.samples = 160, .profile_sec = 5, .rate_off = 0, .rate_all = 400},
        {.samples = 160, .profile_sec = 5, .rate_off = 50, .rate_all = NAN},
        {.samples = 0, .profile_sec = 5, .rate_off = 50, .rate_all = 400},
        {.samples = 160, .profile_sec = NAN, .rate_off = 50, .rate_all = 400},
        {.samples = 160, .profile_sec = -3, .rate_off = 50, .rate_all = 400},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cl_short_decide(&bad[i], &r);
        ck_assert_msg(r.choice == CL_SHORT_PROFILE, "case %zu", i);
    }
    ck_assert_str_eq(cl_short_name((cl_short_e)7), "?");
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
    NEAR(in.profile_sec, (32 + 1) * 0.01 / 0.25 + 0.6, 1e-9); /* + the untimed first sample */
    e.bandwidth = 5e6; /* the link binds: 50/s */
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.rate_all, 50.0, 1e-9);
    e.bandwidth = 0.0; /* unknown: no limit; the client's receive binds */
    e.worker_cpus = 8;
    cl_short_inputs(&e, 3200, &in);
    NEAR(in.rate_all, 312.5, 1e-9);
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
    NEAR(cl_short_probe_sec(0.0, 0, 0, mib), 0.0, 1e-12);
    /* Unknown link: the flat figure per probe. */
    NEAR(cl_short_probe_sec(0.0, 0, 1, 0.0), CL_SHORT_PROBE_SEC, 1e-12);
    NEAR(cl_short_probe_sec(0.0, 0, 1, mib), 2 * CL_SHORT_PROBE_SEC, 1e-12);
    NEAR(cl_short_probe_sec(NAN, 0, 3, mib), 3 * CL_SHORT_PROBE_SEC, 1e-12);
    /* 12.5 MB/s, three workers: the overhead probe's 1 MiB, the class's
     * chunk, the ingress's three chunks. */
    double bw = 12.5e6;
    NEAR(cl_short_probe_sec(bw, 0, 3, mib), 3 * CL_SHORT_PROBE_SEC + mib / bw + c / bw + 3 * c / bw,
         1e-12);
    NEAR(cl_short_probe_sec(bw, 1, 3, mib), CL_SHORT_PROBE_SEC + mib / bw, 1e-12); /* cached */
    NEAR(cl_short_probe_sec(bw, 1, 3, 0.0), 0.0, 1e-12); /* cached, overhead known */
    /* The ingress probe streams from at most CL_PROBE_CONCURRENT workers. */
    NEAR(cl_short_probe_sec(bw, 0, 100, 0.0),
         2 * CL_SHORT_PROBE_SEC + c / bw + CL_PROBE_CONCURRENT * c / bw, 1e-12);
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
    tcase_add_test(tc, test_inputs);
    tcase_add_test(tc, test_profile_wall);
    tcase_add_test(tc, test_probe_sec);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
