/* test_planner_read: dispatcher/planner/planner_read.c, the measured
 * source read rates of remote sources as bounds in the planner's terms,
 * on a hand-made profile:
 *   two units, decode 10 ms and normalize 2 ms; 100 KB encoded, 150 KB
 *   after decode, 600 KB after normalize; receive 1 ns per byte; the client
 *   has 4 cores. One class of 4 workers with 16 cores each, as fast as the
 *   client: their CPUs alone would give 4 x 16 / 0.012 = 5333 samples/s at
 *   K = 2, and links are unmeasured (no network bound).
 * A worker reading the source at 10 MB/s reads 100 samples/s of 100 KB, so
 * 4 of them cap the worker term at 400 / (1 - F). */
#include <check.h>
#include <math.h>
#include <string.h>

#include "common/cost/read_rate.h"
#include "dispatcher/planner/planner.h"
#include "tests/unit/fixtures.h"

static void base(disp_pl_input_t *in)
{
    memset(in, 0, sizeof(*in));
    in->nunits = 2;
    in->unit_sec[0] = 0.010;
    in->unit_sec[1] = 0.002;
    in->bytes[0] = 100e3;
    in->bytes[1] = 150e3;
    in->bytes[2] = 600e3;
    in->recv_sec_per_byte = 1e-9;
    in->client_cores = 4;
    disp_pl_class_t *c = &in->classes[in->nclasses++];
    c->workers = 4;
    c->cores = 16;
    c->profiled = 1;
    c->unit_sec[0] = 0.010;
    c->unit_sec[1] = 0.002;
}

/* No rate measured (local source): the terms are the CPU ones. */
START_TEST(test_unmeasured_sets_no_bound)
{
    disp_pl_input_t in;
    base(&in);
    disp_pl_terms_t t;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 4 * 16 / 0.012, 1e-6);
    disp_planner_terms(&in, 0, 1.0, &t);
    NEAR(t.client, 4 / 0.012, 1e-6);
}
END_TEST

/* Workers at 10 MB/s each: 400 samples/s at F = 0, 800 at F = 0.5. */
START_TEST(test_worker_reads_bound)
{
    disp_pl_input_t in;
    base(&in);
    in.classes[0].source_rate = 10e6;
    disp_pl_terms_t t;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 400.0, 1e-9);
    disp_planner_terms(&in, 2, 0.5, &t);
    NEAR(t.worker, 800.0, 1e-9);
    disp_bind_e b;
    double p = disp_planner_predict(&in, 2, 0.0, &b);
    NEAR(p, 400.0, 1e-9);
    ck_assert_int_eq(b, DISP_BIND_WORKER_CPU); /* the workers' side binds */
    /* A second class without a rate: the workers' sum is unbounded. */
    disp_pl_class_t *c = &in.classes[in.nclasses++];
    *c = in.classes[0];
    c->source_rate = 0.0;
    disp_planner_terms(&in, 2, 0.0, &t);
    ck_assert(t.worker > 400.0);
}
END_TEST

/* The client reading at 5 MB/s: 50 samples/s when it runs everything, 100
 * at F = 0.5, no bound at F = 0 (it reads nothing). */
START_TEST(test_client_reads_bound)
{
    disp_pl_input_t in;
    base(&in);
    in.client_source_rate = 5e6;
    disp_pl_terms_t t;
    disp_planner_terms(&in, 0, 1.0, &t);
    NEAR(t.client, 50.0, 1e-9);
    disp_planner_terms(&in, 2, 0.5, &t);
    ck_assert(t.client <= 100.0 + 1e-9);
    disp_planner_terms(&in, 2, 0.0, &t);
    ck_assert(t.client > 1000.0);
}
END_TEST

/* The plan follows the reads: with the workers' reads slow and the
 * client's fast, the client keeps a share; with the client's slow and the
 * workers' fast, it keeps none. The prediction never exceeds what the
 * reads allow together. */
START_TEST(test_plan_follows_reads)
{
    disp_pl_input_t in;
    base(&in);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    double free_rate = r.cand[r.chosen].predicted;
    in.classes[0].source_rate = 10e6; /* workers: 400 samples/s in all */
    in.client_source_rate = 100e6;    /* client: 1000 samples/s of reads */
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    const disp_pl_cand_t *c = &r.cand[r.chosen];
    ck_assert(c->predicted < free_rate);
    ck_assert(c->predicted <= 400.0 / (1.0 - c->share) + 1e-6);
    ck_assert_msg(c->share > 0.0, "share %.3f: the client should read some itself", c->share);
    in.classes[0].source_rate = 1000e6;
    in.client_source_rate = 1e6; /* 10 samples/s */
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    c = &r.cand[r.chosen];
    ck_assert(c->share * c->predicted <= 10.0 + 1e-6);
}
END_TEST

/* NaN, infinite and negative rates are no rate. */
START_TEST(test_bad_rates_ignored)
{
    disp_pl_input_t in;
    base(&in);
    disp_pl_terms_t t;
    const double bad[] = {NAN, INFINITY, -5e6};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        in.classes[0].source_rate = bad[i];
        in.client_source_rate = bad[i];
        disp_planner_terms(&in, 2, 0.5, &t);
        ck_assert(isfinite(t.worker) && t.worker > 1000.0);
        ck_assert(t.client > 100.0);
    }
}
END_TEST

/* Latency priced: a worker at 10 MB/s (10 ms a sample of 100 KB) whose
 * requests take 160 ms, over its 16 cores, waits 10 ms more a sample: 50
 * samples/s each, 200 for the 4. Two requests a sample: 30 ms, 133.3.
 * The client (4 cores) at 5 MB/s and 40 ms a request: 20 + 10 ms, 33.3 at
 * F = 1. No latency measured: the bytes alone, as before. */
START_TEST(test_latency_priced)
{
    disp_pl_input_t in;
    base(&in);
    in.classes[0].source_rate = 10e6;
    in.classes[0].source_latency = 0.160;
    disp_pl_terms_t t;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 200.0, 1e-9);
    disp_planner_terms(&in, 2, 0.5, &t);
    NEAR(t.worker, 400.0, 1e-9);
    in.source_requests = 2.0;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 4.0 / 0.030, 1e-9);
    in.source_requests = 0.0; /* unknown: one request a sample */
    in.client_source_rate = 5e6;
    in.client_source_latency = 0.040;
    disp_planner_terms(&in, 0, 1.0, &t);
    NEAR(t.client, 1.0 / 0.030, 1e-9);
    /* Latency alone never bounds: a rate must be measured. */
    in.classes[0].source_rate = 0.0;
    disp_planner_terms(&in, 2, 0.0, &t);
    ck_assert(t.worker > 1000.0);
    /* Fewer cores, more of the latency per sample. */
    in.classes[0].source_rate = 10e6;
    in.classes[0].cores = 1;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 4.0 / (0.010 + 0.160), 1e-9);
}
END_TEST

/* The shared formula (common/cost/read_rate.h) on bad inputs. */
START_TEST(test_read_rate_formula)
{
    NEAR(sl_read_samples_per_sec(100e3, 10e6, 0.0, 1, 4), 100.0, 1e-9);
    NEAR(sl_read_samples_per_sec(100e3, 10e6, 0.04, 1, 4), 50.0, 1e-9);
    NEAR(sl_read_samples_per_sec(100e3, 10e6, 0.01, 1, 0), 50.0, 1e-9); /* 0 cores: 1 */
    NEAR(sl_read_samples_per_sec(100e3, 10e6, NAN, 1, 4), 100.0, 1e-9);
    NEAR(sl_read_samples_per_sec(100e3, 10e6, -1.0, 1, 4), 100.0, 1e-9);
    NEAR(sl_read_samples_per_sec(100e3, 10e6, INFINITY, 1, 4), 100.0, 1e-9);
    NEAR(sl_read_samples_per_sec(100e3, 0.0, 0.01, 1, 4), 0.0, 0.0);
    NEAR(sl_read_samples_per_sec(0.0, 10e6, 0.01, 1, 4), 0.0, 0.0);
    NEAR(sl_read_samples_per_sec(NAN, NAN, NAN, NAN, NAN), 0.0, 0.0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("planner_read");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_unmeasured_sets_no_bound);
    tcase_add_test(tc, test_worker_reads_bound);
    tcase_add_test(tc, test_client_reads_bound);
    tcase_add_test(tc, test_plan_follows_reads);
    tcase_add_test(tc, test_bad_rates_ignored);
    tcase_add_test(tc, test_latency_priced);
    tcase_add_test(tc, test_read_rate_formula);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
