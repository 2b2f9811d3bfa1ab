/* test_client_overhead: client/lib/overhead.c -- the per-sample overhead
 * the client reports: steady under batch-quantised windows (where one
 * window alone swings), nothing before enough samples, a new window on a
 * new plan version, bad inputs ignored, and that it follows a change. */
#include <check.h>
#include <math.h>

#include "client/lib/overhead.h"
#include "tests/unit/fixtures.h"

#define NEAR(x, want, tol) \
    ck_assert_msg(fabs((x) - (want)) <= (tol), "%s = %.6f, want %.6f", #x, (double)(x), \
                  (double)(want))

/* 190 samples/s in batches of 64: windows deliver 128 or 192 samples while
 * the CPU (1 ms a sample) is spent evenly, 0.19 s every window. */
static double batch_window(int i) { return (i % 3 == 0) ? 128.0 : 192.0; }

START_TEST(test_steady_under_batches)
{
    cl_overhead_t o = {0};
    double last = 0.0;
    for (int i = 0; i < 40; i++) {
        double one = 0.19 / batch_window(i); /* what that window alone says */
        ck_assert(one < 0.99e-3 || one > 1.4e-3);
        last = cl_overhead_add(&o, 1, batch_window(i), 0.19);
        if (i >= 5) {
            /* the windows' mean is 170.7 delivered to 190 produced */
            NEAR(last, 0.19 / ((128.0 + 2 * 192.0) / 3.0), 0.12e-3);
        }
    }
    NEAR(last, 0.19 / ((128.0 + 2 * 192.0) / 3.0), 0.03e-3);
}
END_TEST

START_TEST(test_needs_samples)
{
    cl_overhead_t o = {0};
    NEAR(cl_overhead_add(&o, 1, 20.0, 0.02), 0.0, 0.0);
    NEAR(cl_overhead_add(&o, 1, 20.0, 0.02), 0.0, 0.0);
    /* 20 + 20 aged + 20 >= 50 */
    ck_assert(cl_overhead_add(&o, 1, 20.0, 0.02) > 0.0);
}
END_TEST

START_TEST(test_new_plan_new_window)
{
    cl_overhead_t o = {0};
    for (int i = 0; i < 20; i++) {
        (void)cl_overhead_add(&o, 1, 200.0, 0.2); /* 1 ms */
    }
    /* Plan v2 costs 0.5 ms a sample: none of v1's windows count. */
    NEAR(cl_overhead_add(&o, 2, 200.0, 0.1), 0.5e-3, 1e-12);
    NEAR(cl_overhead_add(&o, 2, 200.0, 0.1), 0.5e-3, 1e-12);
}
END_TEST

START_TEST(test_follows_a_change)
{
    cl_overhead_t o = {0};
    for (int i = 0; i < 30; i++) {
        (void)cl_overhead_add(&o, 1, 200.0, 0.2);
    }
    /* The host gets busier: 2 ms a sample from now on, same plan. */
    double v = 0.0;
    for (int i = 0; i < 60; i++) {
        v = cl_overhead_add(&o, 1, 200.0, 0.4);
    }
    ck_assert_msg(v > 1.85e-3 && v < 2.0e-3, "after 60 windows: %g", v);
}
END_TEST

START_TEST(test_bad_inputs)
{
    cl_overhead_t o = {0};
    (void)cl_overhead_add(&o, 1, 100.0, 0.1);
    /* A negative CPU delta (units summed ahead of the process clock) or a
     * non-finite one adds samples but no CPU; a bad count adds nothing. */
    NEAR(cl_overhead_add(&o, 1, 100.0, -0.05), 0.1 * (1 - 1 / CL_OVERHEAD_WINDOW_REPORTS) /
                                                    (100.0 * (1 - 1 / CL_OVERHEAD_WINDOW_REPORTS) + 100.0),
         1e-12);
    double before = o.cpu / o.samples;
    (void)cl_overhead_add(&o, 1, NAN, NAN);
    (void)cl_overhead_add(&o, 1, -5.0, INFINITY);
    NEAR(o.cpu / o.samples, before, 1e-12);
    ck_assert(isfinite(cl_overhead_add(&o, 1, 0.0, 0.0)));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_overhead");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_steady_under_batches);
    tcase_add_test(tc, test_needs_samples);
    tcase_add_test(tc, test_new_plan_new_window);
    tcase_add_test(tc, test_follows_a_change);
    tcase_add_test(tc, test_bad_inputs);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
