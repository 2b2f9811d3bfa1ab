/* test_client_probe: the rule that turns several link probes into the one
 * receive cost per byte the planner charges (client/lib/profile.c
 * cl_recv_lowest): the lowest figure any probe measured, in whatever order
 * the probes come, with probes that measured nothing ignored. A probe on a
 * quota-starved client reads high (docs/benchmarks.md saw 3.7-24 ns/B for
 * one link), so an average or the last figure would overcharge. */
#include <check.h>
#include <math.h>

#include "client/lib/profile.h"
#include "tests/unit/fixtures.h"

/* What a planner ends with after probes v[0..n) in that order. */
static double fold(const double *v, int n)
{
    double have = 0.0;
    for (int i = 0; i < n; i++) {
        have = cl_recv_lowest(have, v[i]);
    }
    return have;
}

START_TEST(test_lowest_in_any_order)
{
    /* A class probe, a second class, then the ingress probe (all streams). */
    const double probes[3] = {24e-9, 3.7e-9, 5e-9};
    const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int k = 0; k < 6; k++) {
        double v[3] = {probes[orders[k][0]], probes[orders[k][1]], probes[orders[k][2]]};
        ck_assert_msg(fold(v, 3) == 3.7e-9, "order %d: %g", k, fold(v, 3));
    }
}
END_TEST

START_TEST(test_nothing_measured_is_ignored)
{
    ck_assert(cl_recv_lowest(0.0, 0.0) == 0.0); /* none yet: still none */
    const double bad[5] = {0.0, -1e-9, NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 5; i++) {
        ck_assert_msg(cl_recv_lowest(2e-9, bad[i]) == 2e-9, "probe %g replaced 2e-9", bad[i]);
        ck_assert_msg(cl_recv_lowest(0.0, bad[i]) == 0.0, "probe %g made a figure", bad[i]);
    }
    /* Only the ingress probe measured (every class probe failed): its figure
     * is taken as it is, not compared with a default. */
    const double only_ingress[3] = {0.0, NAN, 7e-9};
    ck_assert(fold(only_ingress, 3) == 7e-9);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_probe");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_lowest_in_any_order);
    tcase_add_test(tc, test_nothing_measured_is_ignored);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
