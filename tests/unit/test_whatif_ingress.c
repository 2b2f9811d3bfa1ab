/* test_whatif_ingress: the what-if's client ingress when no probe measured
 * it (dispatcher/planner/whatif_ingress.h; issue 39 "Workers wanted"): with
 * one worker, the fastest path measured is taken as the client's ingress,
 * so added workers share it (the W2 cluster: one path 24.1 MB/s, the
 * client's link measured 22.6-24.2 MB/s with two and three workers, where
 * the what-if had priced 48 and 72); a measured ingress is used as it is;
 * nothing is assumed with two workers or no measured path. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "common/base/log.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/whatif_ingress.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_planner.h"

/* A client of 0.3 CPUs (the fixtures' costs: 12 ms a local sample) and one
 * class of workers, 4 CPUs each, at bandwidth bytes/s each. */
static void input(disp_pl_input_t *in, uint32_t workers, double bandwidth)
{
    fx_pl_base(in, 0.3);
    fx_pl_add_class(in, workers, 4.0, 1.0, bandwidth);
}

static const disp_wi_point_t *at(const disp_wi_curve_t *w, int32_t delta)
{
    for (uint32_t i = 0; i < w->npoints; i++) {
        if (w->p[i].delta == delta) {
            return &w->p[i];
        }
    }
    ck_abort_msg("no point at %+d", delta);
    return NULL;
}

START_TEST(test_ingress_choice)
{
    disp_pl_input_t in;
    int assumed = -1;
    /* One worker, nothing measured at the client: its path. */
    input(&in, 1, 24.1e6);
    NEAR(disp_wi_ingress(&in, &assumed), 24.1e6, 0);
    ck_assert_int_eq(assumed, 1);
    /* Measured: as it is. */
    in.client_bandwidth = 22.6e6;
    NEAR(disp_wi_ingress(&in, &assumed), 22.6e6, 0);
    ck_assert_int_eq(assumed, 0);
    /* Two workers and none measured (an older client): no limit, as before. */
    input(&in, 2, 24.1e6);
    NEAR(disp_wi_ingress(&in, &assumed), 0.0, 0);
    ck_assert_int_eq(assumed, 0);
    /* The one path not measured either: nothing to take. */
    input(&in, 1, 0.0);
    NEAR(disp_wi_ingress(&in, &assumed), 0.0, 0);
    ck_assert_int_eq(assumed, 0);
    /* The fastest class with a worker; a class without one says nothing. */
    input(&in, 1, 24.1e6);
    in.classes[1] = in.classes[0];
    in.classes[1].workers = 0;
    in.classes[1].bandwidth = 1e9;
    in.nclasses = 2;
    NEAR(disp_wi_ingress(&in, &assumed), 24.1e6, 0);
    ck_assert_int_eq(assumed, 1);
    in.client_bandwidth = NAN;
    NEAR(disp_wi_ingress(&in, &assumed), 24.1e6, 0);
}
END_TEST

/* The curve: with one worker the current rate is unchanged (its path is
 * the ingress either way), and added workers no longer add links: the
 * rate stops where the one path's bytes end, bound by the network. */
START_TEST(test_curve_shares_the_link)
{
    /* 12 MB/s: 80 samples/s of the fixtures' 150 KB at split 1, below what
     * the client could receive (0.3 CPU at 2.15 ms: 139.5/s). */
    disp_pl_input_t in;
    input(&in, 1, 12e6);
    disp_wi_curve_t w;
    ck_assert_int_eq(disp_planner_whatif(&in, 0, NULL, &w), 0);
    ck_assert_int_eq(w.ingress_assumed, 1);
    NEAR(w.ingress, 12e6, 0);
    /* As before: the same input with an ingress measured far above it. */
    disp_pl_input_t wide = in;
    wide.client_bandwidth = 1e12;
    disp_wi_curve_t old;
    ck_assert_int_eq(disp_planner_whatif(&wide, 0, NULL, &old), 0);
    ck_assert_int_eq(old.ingress_assumed, 0);
    NEAR(at(&w, 0)->predicted, at(&old, 0)->predicted, 1e-6);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    NEAR(at(&w, 0)->predicted, r.cand[r.chosen].predicted, 1e-6);
    ck_assert_msg(at(&w, 1)->predicted < at(&old, 1)->predicted - 1.0,
                  "+1 worker: %.1f with the link shared, %.1f with links added",
                  at(&w, 1)->predicted, at(&old, 1)->predicted);
    ck_assert_int_eq(at(&w, 16)->binding, DISP_BIND_NETWORK);
    NEAR(at(&w, 16)->predicted, at(&w, 1)->predicted, 1e-6);
    ck_assert_uint_le(w.wanted, old.wanted);
    /* Measured by a job with two workers: that figure, nothing assumed. */
    in.client_bandwidth = 48e6;
    ck_assert_int_eq(disp_planner_whatif(&in, 0, NULL, &w), 0);
    ck_assert_int_eq(w.ingress_assumed, 0);
    NEAR(w.ingress, 48e6, 0);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_WARNING);
    Suite *s = suite_create("whatif_ingress");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_ingress_choice);
    tcase_add_test(tc, test_curve_shares_the_link);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
