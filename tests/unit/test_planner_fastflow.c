/* test_planner_fastflow: FastFlow's policy (dispatcher/planner/planner_fastflow.c,
 * docs/planner.md "FastFlow"): its local-ratio formula by hand from the
 * paper's utils.calculate_ratio_local_optimal, and Algorithm 1 on the
 * planner's hand-made worker-bound profile (fixtures_planner.h fx_pl_base). */
#include <check.h>
#include <math.h>
#include <syslog.h>

#include "common/base/log.h"
#include "dispatcher/planner/planner.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_planner.h"

/* FastFlow's ratio formula, by hand from utils.calculate_ratio_local_optimal. */
START_TEST(test_ff_ratio)
{
    /* lthp + rthp < gthp: 400 / 700. */
    NEAR(disp_ff_ratio_local(1000, 400, 300, 1, 0.5, 1), 400.0 / 700.0, 1e-12);
    /* ideal_off 600, decode_off 900, lthp < remote: off_data = 900 -> 0.1 */
    NEAR(disp_ff_ratio_local(1000, 400, 800, 1, 0.5, 1), 0.1, 1e-12);
    /* lthp > remote: off_data = (200 + 150) / 2 = 175 -> 325 / 500 */
    NEAR(disp_ff_ratio_local(500, 400, 200, 1, 0.5, 1), 0.65, 1e-12);
    /* unlimited consumer: lthp / (lthp + remote) */
    NEAR(disp_ff_ratio_local(INFINITY, 100, 100, 1, 0.5, 3), 0.25, 1e-12);
    /* never negative */
    NEAR(disp_ff_ratio_local(100, 10, 5000, 1, 0.5, 1), 0.0, 1e-12);
}
END_TEST

/* FastFlow on the worker-bound profile, unlimited consumer:
 * lthp = 333.33, element rthp = min(4/0.0006, 2666.67) = 2666.67,
 * ratio = 333.33 / 3000 = 0.1111 at K = 2 (all units remote).
 * Sluice predicts (2, 0.1111): client 4 / (0.1111*0.012 + 0.8889*0.0006)
 * = 2142.86 -- below the planner's own 2866.67 at F* = 0.0698. */
START_TEST(test_fastflow)
{
    disp_pl_input_t in;
    fx_pl_base(&in, 4);
    fx_pl_add_class(&in, 4, 8, 1.0, 1.25e9);
    disp_ff_result_t f;
    ck_assert_int_eq(disp_planner_fastflow(&in, &f), 0);
    ck_assert(isinf(f.gthp));
    NEAR(f.lthp, 333.3333, 1e-3);
    NEAR(f.pcycle, 0.012, 1e-12);
    ck_assert_int_eq(f.cand[DISP_FF_MIDDLE].applicable, 0);
    NEAR(f.cand[DISP_FF_ELEMENT].rthp, 2666.6667, 1e-3);
    NEAR(f.cand[DISP_FF_ELEMENT].cycles, 0.0006, 1e-12);
    /* score = rthp + lthp (1 - cycles / pcycle) */
    NEAR(f.cand[DISP_FF_ELEMENT].score, 2666.6667 + 333.3333 * 0.95, 1e-3);
    ck_assert_int_eq(f.chosen, DISP_FF_ELEMENT); /* ties with "batch": first wins */
    ck_assert_uint_eq(f.split, 2);
    NEAR(f.share, 1.0 / 9.0, 1e-9);
    NEAR(f.predicted, 4.0 / (0.012 / 9.0 + 0.0006 * 8.0 / 9.0), 1e-6);
    ck_assert_int_eq(f.binding, DISP_BIND_CLIENT_CPU);

    /* No CPU bottleneck (consumer 400 <= 1.3 x 333): no offloading. */
    in.consumer_rate = 400;
    ck_assert_int_eq(disp_planner_fastflow(&in, &f), 0);
    ck_assert_int_eq(f.chosen, -1);
    NEAR(f.share, 1.0, 1e-12);
    NEAR(f.predicted, 333.3333, 1e-3);

    /* Consumer 1000: rthp = 1000, lthp + rthp >= gthp, dc_ratio 0.05,
     * decode_off = 700, off_data = max(1000, 700) -> ratio 0. */
    in.consumer_rate = 1000;
    ck_assert_int_eq(disp_planner_fastflow(&in, &f), 0);
    ck_assert_int_eq(f.chosen, DISP_FF_ELEMENT);
    NEAR(f.share, 0.0, 1e-12);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_WARNING);
    Suite *s = suite_create("planner_fastflow");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_ff_ratio);
    tcase_add_test(tc, test_fastflow);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
