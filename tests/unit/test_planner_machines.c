/* test_planner_machines: hosts that share a machine (dispatcher/planner/planner.h
 * "Shared machines", dispatcher/planner/planner_machines.c) on hand-made profiles.
 *
 * The profile (as in test_planner.c): two units, decode 10 ms and
 * normalize 2 ms; 100 KB encoded, 150 KB after decode, 600 KB after
 * normalize; receiving costs 1 ns per byte. Here the client has 2 cores and
 * two workers of client speed have 2 cores each. So a = 0.012 s per local
 * sample, b(2) = 0.0006 per received one, and a sample costs at least
 * 0.012 CPU s wherever it is made: one 2-CPU machine does at most
 * 2 / 0.012 = 166.67 samples/s, whatever the plan. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cost/hostfacts.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/planner_machines.h"
#include "dispatcher/core/registry.h"
#include "tests/unit/fixtures_planner.h"
#include "tests/unit/fixtures.h"

static void base(disp_pl_input_t *in, uint32_t workers)
{
    fx_pl_base(in, 2);
    disp_pl_class_t *c = &in->classes[in->nclasses++];
    c->workers = workers;
    c->cores = 2;
    c->profiled = 1;
    c->unit_sec[0] = 0.010;
    c->unit_sec[1] = 0.002;
}

/* One machine of `cores` CPUs with `workers` of class 0 (and the client). */
static void share(disp_pl_input_t *in, double cores, uint32_t workers, int client)
{
    disp_pl_machine_t *m = &in->machines[in->nmachines++];
    memset(m, 0, sizeof(*m));
    m->cores = cores;
    m->workers[0] = workers;
    m->client = client;
}

static const disp_pl_cand_t *chosen(const disp_pl_result_t *r) { return &r->cand[r->chosen]; }

/* Two workers and the client on one 2-CPU machine (the issue: 3,019
 * predicted vs 688 measured): no candidate may predict more than the
 * machine does, so offloading does not pay and "off" (166.67) is chosen.
 * Counted as three machines, K=1 would predict 495 (next test). */
START_TEST(test_one_machine_caps_everything)
{
    disp_pl_input_t in;
    base(&in, 2);
    share(&in, 2, 2, 1);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    for (uint32_t i = 0; i < r.ncand; i++) {
        ck_assert_msg(r.cand[i].predicted <= 2.0 / 0.012 * (1 + 1e-6),
                      "K=%u F=%.3f predicts %.1f on a 2-CPU machine", r.cand[i].split,
                      r.cand[i].share, r.cand[i].predicted);
    }
    ck_assert(chosen(&r)->off);
    NEAR(chosen(&r)->predicted, 2.0 / 0.012, 1e-6);
    /* Any fixed plan too: half the samples remote at K=2 costs the machine
     * 0.5 * 0.012 + 0.5 * (0.012 + 0.0006) = 0.0123 s each. */
    disp_bind_e b;
    NEAR(disp_planner_predict(&in, 2, 0.5, &b), 2.0 / 0.0123, 1e-3);
    ck_assert_int_eq(b, DISP_BIND_WORKER_CPU);
}
END_TEST

/* The same profiles on three machines: exactly the old closed form.
 * K=1 (b = 0.00215): R = 4 / 0.010 = 400, F* = (2 - R b) / (2 + R (a - b))
 * = 1.14 / 5.94, T = R / (1 - F*) = 495 (K=2: R = 333.33, 483.33). A
 * machine list without the client that lists one worker alone changes
 * nothing either. */
START_TEST(test_three_machines_unchanged)
{
    disp_pl_input_t in;
    base(&in, 2);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert_uint_eq(chosen(&r)->split, 1);
    NEAR(chosen(&r)->share, 1.14 / 5.94, 1e-9);
    NEAR(chosen(&r)->predicted, 495.0, 1e-6);
    /* Unlimited workers: K=2 bound by the client, 2 / 0.0006 = 3333.3,
     * reached with n 2 / 0.012 >= 3333.3, n = 20 (19: 3166.7): 18 more. */
    ck_assert_uint_eq(r.workers_needed, 18);
    ck_assert_int_eq(r.hint_new_machines, 0);
    disp_pl_result_t r2;
    share(&in, 2, 1, 0);
    ck_assert_int_eq(disp_planner_plan(&in, &r2), 0);
    NEAR(chosen(&r2)->predicted, chosen(&r)->predicted, 1e-9);
    NEAR(chosen(&r2)->share, chosen(&r)->share, 1e-12);
}
END_TEST

/* Two workers on one 2-CPU machine, the client on its own: the workers
 * give 2 / 0.012 = 166.67 together at K=2, not 333.33. K=1: R = 2 / 0.010
 * = 200, F* = (2 - 0.43) / (2 + 1.97) = 1.57 / 3.97, T = R / (1 - F*) =
 * 330.83 (K=2: 325). */
START_TEST(test_workers_share_a_machine)
{
    disp_pl_input_t in;
    base(&in, 2);
    share(&in, 2, 2, 0);
    disp_pl_terms_t t;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 2.0 / 0.012, 1e-9);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert_uint_eq(chosen(&r)->split, 1);
    NEAR(chosen(&r)->share, 1.57 / 3.97, 1e-9);
    NEAR(chosen(&r)->predicted, 200.0 * 3.97 / 2.4, 1e-6);
    /* Machine cores not known (0): only the workers' own cores count. */
    in.machines[0].cores = 0;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 4.0 / 0.012, 1e-9);
}
END_TEST

/* "Workers needed" on a saturated machine: a third worker there adds
 * nothing, and the hint counts its extra workers as machines of their own
 * (and says so). The client plus the machine's two workers: at K=2 with
 * F = 0 the client needs 0.0006 s per sample; with 2 cores left over after
 * that the workers make (2 - 0.0006 T) / 0.012 = T, T = 2 / 0.0126. */
START_TEST(test_hint_never_adds_to_a_saturated_machine)
{
    disp_pl_input_t in;
    base(&in, 2);
    share(&in, 2, 2, 1);
    disp_pl_terms_t t;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 2.0 / 0.0126, 1e-6);
    disp_pl_result_t r2;
    ck_assert_int_eq(disp_planner_plan(&in, &r2), 0);
    in.classes[0].workers = 3;
    in.machines[0].workers[0] = 3;
    disp_pl_result_t r3;
    ck_assert_int_eq(disp_planner_plan(&in, &r3), 0);
    NEAR(chosen(&r3)->predicted, chosen(&r2)->predicted, 1e-9);
    ck_assert_uint_gt(r2.workers_needed, 0);
    ck_assert_int_eq(r2.hint_new_machines, 1);
    ck_assert(r2.lifted_rate > chosen(&r2)->predicted * 1.5);
}
END_TEST

/* The client and one worker share a 2-CPU machine, a second worker has a
 * machine of its own: more than the client alone, less than three
 * separate machines, and never more than the 4 CPUs there are allow. */
START_TEST(test_mixed)
{
    disp_pl_input_t in;
    base(&in, 2);
    share(&in, 2, 1, 1);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    double p = chosen(&r)->predicted;
    ck_assert_msg(p > 2.0 / 0.012 * 1.2 && p < 495.0 && p <= 4.0 / 0.012 * (1 + 1e-9),
                  "predicted %.1f", p);
    ck_assert(!chosen(&r)->off);
}
END_TEST

/* Broken machine lists: too many is refused; a machine claiming more
 * workers than are live is cut to what is live; NaN cores do not limit. */
START_TEST(test_bad_machines)
{
    disp_pl_input_t in;
    disp_pl_result_t r;
    base(&in, 2);
    in.nmachines = DISP_PL_MAX_MACHINES + 1;
    ck_assert_int_eq(disp_planner_plan(&in, &r), -EINVAL);
    base(&in, 2);
    share(&in, 2, 1000, 1);
    share(&in, 2, 7, 0);
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    NEAR(chosen(&r)->predicted, 2.0 / 0.012, 1e-6);
    base(&in, 2);
    share(&in, NAN, 2, 0);
    disp_pl_terms_t t;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 4.0 / 0.012, 1e-9);
}
END_TEST

static sl_cpuset_t set_of(const char *s)
{
    sl_cpuset_t c;
    ck_assert_int_eq(sl_cpuset_parse(s, &c), 0);
    return c;
}

/* Grouping: one id and overlapping CPUs share; disjoint CPU sets on one
 * machine, different ids and hosts without an id (older peers) do not; an
 * unknown CPU set overlaps everything on its machine. Cores: the union of
 * the CPU sets, capped by what the members may use. */
START_TEST(test_group)
{
    disp_pl_input_t in;
    base(&in, 3);
    sl_cpuset_t c01 = set_of("0-1");
    sl_cpuset_t c1 = set_of("1");
    sl_cpuset_t c23 = set_of("2-3");
    disp_pm_host_t h[] = {
        {"m1", &c01, 2, -1}, {"m1", &c1, 1, 0}, {"m1", &c23, 2, 0}, {"m2", &c01, 2, 0},
        {"", &c01, 2, 0},    {NULL, NULL, 2, 0},
    };
    disp_pm_group(h, 6, &in);
    ck_assert_uint_eq(in.nmachines, 1);
    NEAR(in.machines[0].cores, 2.0, 0);
    ck_assert_int_eq(in.machines[0].client, 1);
    ck_assert_uint_eq(in.machines[0].workers[0], 1);
    /* An unknown CPU set joins m1's group and the cap is the sum, 2 + 1 + 2. */
    h[3] = (disp_pm_host_t){"m1", NULL, 2, 0};
    disp_pm_group(h, 6, &in);
    ck_assert_uint_eq(in.nmachines, 1);
    ck_assert_uint_eq(in.machines[0].workers[0], 3);
    NEAR(in.machines[0].cores, 7.0, 0);
    /* Nobody shares: no machine list at all, the planner's old view. */
    disp_pm_host_t alone[] = {{"a", &c01, 2, -1}, {"b", &c01, 2, 0}, {"", NULL, 2, 0}};
    disp_pm_group(alone, 3, &in);
    ck_assert_uint_eq(in.nmachines, 0);
}
END_TEST

/* What a worker sends at registration, broken every way a peer can. */
START_TEST(test_note_machine)
{
    disp_worker_t w;
    memset(&w, 0, sizeof(w));
    disp_worker_note_machine(&w, "0123456789abcdef", "0-3,8", 2.5);
    ck_assert_str_eq(w.machine_id, "0123456789abcdef");
    ck_assert_int_eq(w.has_cpus, 1);
    ck_assert_uint_eq(sl_cpuset_count(&w.cpus), 5);
    NEAR(w.cpu_budget, 2.5, 0);
    char longid[SL_MACHINE_ID_MAX + 8];
    memset(longid, 'a', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    const char *bad_ids[] = {NULL, "", "has space", "tab\there", "\x7f", "caf\xc3\xa9", longid};
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
        disp_worker_note_machine(&w, bad_ids[i], "0", 1);
        ck_assert_str_eq(w.machine_id, "");
    }
    const char *bad_sets[] = {NULL, "", "-1", "1-", "3-1", "1,,2", "1024", "x", "1 2", "0-1,"};
    for (size_t i = 0; i < sizeof(bad_sets) / sizeof(bad_sets[0]); i++) {
        disp_worker_note_machine(&w, "m", bad_sets[i], NAN);
        ck_assert_msg(w.has_cpus == 0, "cpu_set \"%s\" accepted", bad_sets[i]);
        NEAR(w.cpu_budget, 0.0, 0);
    }
    disp_worker_note_machine(&w, "m", "0", -3);
    NEAR(w.cpu_budget, 0.0, 0);
}
END_TEST

/* Why an auto plan keeps everything local (issue #38 item 3), in the
 * plan's local_reason: workers on the client's own machine; no worker; a
 * worker so slow that remote loses (one 1-core worker at 1/100 the speed:
 * 1 / 1.2 = 0.83/s remote, within the 1 % tie of the client's 166.67);
 * and nothing when work is offloaded. */
START_TEST(test_local_reason)
{
    disp_pl_input_t in;
    base(&in, 2);
    share(&in, 2, 2, 1);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert(chosen(&r)->off);
    ck_assert_msg(strstr(r.local_reason, "workers share the client's host: predicted") ==
                      r.local_reason,
                  "%s", r.local_reason);
    ck_assert_ptr_nonnull(strstr(r.local_reason, "vs 167 local"));

    base(&in, 0);
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert_str_eq(r.local_reason, "no worker: none registered");

    base(&in, 1);
    in.classes[0].cores = 1;
    in.classes[0].unit_sec[0] = 1.0;
    in.classes[0].unit_sec[1] = 0.2;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert(chosen(&r)->off);
    ck_assert_msg(strstr(r.local_reason, "workers slower than the client: predicted 1 samples/s "
                                         "remote") == r.local_reason,
                  "%s", r.local_reason);

    base(&in, 2); /* two workers of their own: offloading pays */
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert(!chosen(&r)->off);
    ck_assert_str_eq(r.local_reason, "");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("planner_machines");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_one_machine_caps_everything);
    tcase_add_test(tc, test_three_machines_unchanged);
    tcase_add_test(tc, test_workers_share_a_machine);
    tcase_add_test(tc, test_hint_never_adds_to_a_saturated_machine);
    tcase_add_test(tc, test_mixed);
    tcase_add_test(tc, test_bad_machines);
    tcase_add_test(tc, test_group);
    tcase_add_test(tc, test_note_machine);
    tcase_add_test(tc, test_local_reason);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
