/* test_client_budget: client/lib/profile_budget.c -- the CPU budget of a
 * client that could not read one: the lone-thread estimate of the profile
 * pass, the running windows (a throttled process, a busy but unthrottled
 * host, an idle one), and the run-queue reader over a fake /proc task
 * directory and this process's own. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/lib/profile_budget.h"
#include "tests/unit/fixtures.h"

START_TEST(test_lone_thread)
{
    cl_budget_est_t e;
    cl_budget_est_init(&e, 2.0);
    /* A quarter-CPU quota: one thread flat out gets a quarter of a core. */
    NEAR(cl_budget_est_lone(&e, 0.30, 1.2), 0.25, 1e-12);
    NEAR(e.estimate, 0.25, 1e-12);
    /* A full core: nothing known (a quota >= 1 CPU does not show). */
    cl_budget_est_init(&e, 2.0);
    NEAR(cl_budget_est_lone(&e, 0.95, 1.0), 0.0, 0.0);
    NEAR(e.estimate, 0.0, 0.0);
    /* Too short to span a quota period, or nonsense: nothing. */
    NEAR(cl_budget_est_lone(&e, 0.01, 0.1), 0.0, 0.0);
    NEAR(cl_budget_est_lone(&e, NAN, 1.0), 0.0, 0.0);
    NEAR(cl_budget_est_lone(&e, 0.5, NAN), 0.0, 0.0);
    /* Never above the nominal budget (the threads' cap). */
    cl_budget_est_init(&e, 0.5);
    NEAR(cl_budget_est_lone(&e, 0.6, 1.0), 0.5, 1e-12);
    cl_budget_est_init(&e, NAN);
    NEAR(e.nominal, 1.0, 0.0);
}
END_TEST

START_TEST(test_windows)
{
    cl_budget_est_t e;
    /* Throttled at 0.25 with the pipeline's 2 threads busy: 0.25 CPU-s in
     * a second, 1.75 thread-seconds waited. The first window sets it. */
    cl_budget_est_init(&e, 2.0);
    ck_assert_int_eq(cl_budget_est_window(&e, 0.25, 1.75, 1.0), 1);
    NEAR(e.estimate, 0.25, 1e-12);
    ck_assert_uint_eq(e.windows, 1);
    NEAR(e.last_demand, 2.0, 1e-12);
    /* The next measuring ones move it half way. */
    (void)cl_budget_est_window(&e, 0.35, 1.65, 1.0);
    NEAR(e.estimate, 0.30, 1e-12);
    /* An idle window (little demand, no wait) lowers nothing. */
    ck_assert_int_eq(cl_budget_est_window(&e, 0.05, 0.0, 1.0), 0);
    NEAR(e.estimate, 0.30, 1e-12);
    /* One that got more than the estimate raises it: it had that much. */
    ck_assert_int_eq(cl_budget_est_window(&e, 0.6, 0.0, 1.0), 1);
    NEAR(e.estimate, 0.6, 1e-12);
    /* Too short, or the wait unknown: nothing. */
    ck_assert_int_eq(cl_budget_est_window(&e, 0.1, 0.3, 0.2), 0);
    ck_assert_int_eq(cl_budget_est_window(&e, 0.1, -1.0, 1.0), 0);
    NEAR(e.estimate, 0.6, 1e-12);

    /* A busy but unthrottled 2-CPU host: a lone thread got half a core,
     * so the start guessed 0.5; once the pipeline's two threads run they
     * get a core between them and wait as much: measured 1.0. */
    cl_budget_est_init(&e, 2.0);
    NEAR(cl_budget_est_lone(&e, 0.5, 1.0), 0.5, 1e-12);
    ck_assert_int_eq(cl_budget_est_window(&e, 1.0, 1.0, 1.0), 1);
    NEAR(e.estimate, 0.75, 1e-12);
    (void)cl_budget_est_window(&e, 1.0, 1.0, 1.0);
    NEAR(e.estimate, 0.875, 1e-12);
    /* A little waiting with little demand (one thread of two) measures
     * nothing: the pipeline was not asking for its budget. */
    cl_budget_est_init(&e, 2.0);
    ck_assert_int_eq(cl_budget_est_window(&e, 0.6, 0.4, 1.0), 0);
    NEAR(e.estimate, 0.0, 0.0);
    /* An idle, unthrottled host: the threads get all they want, no wait:
     * no estimate (the nominal budget stands). */
    ck_assert_int_eq(cl_budget_est_window(&e, 1.9, 0.02, 1.0), 0);
    NEAR(e.estimate, 0.0, 0.0);
    /* Never above nominal. */
    cl_budget_est_init(&e, 1.0);
    (void)cl_budget_est_window(&e, 3.0, 1.0, 1.0);
    NEAR(e.estimate, 1.0, 1e-12);
}
END_TEST

static void put_schedstat(const char *dir, int tid, unsigned long long run,
                          unsigned long long wait)
{
    char path[256];
    char text[96];
    snprintf(path, sizeof(path), "%s/%d", dir, tid);
    (void)mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%d/schedstat", dir, tid);
    int n = snprintf(text, sizeof(text), "%llu %llu 17\n", run, wait);
    ck_assert_int_eq(fx_write_file(path, text, (size_t)n), 0);
}

START_TEST(test_rundelay)
{
    char dir[FX_TMPDIR_LEN];
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    cl_rundelay_t *rd = calloc(1, sizeof(*rd));
    ck_assert_ptr_nonnull(rd);
    double sec = -1;
    /* No thread: nothing to read. */
    ck_assert_int_eq(cl_rundelay_sample(rd, dir, &sec), -ENOENT);
    put_schedstat(dir, 10, 5000000, 1000000000ull);
    put_schedstat(dir, 11, 5000000, 500000000ull);
    /* The first sample is a baseline. */
    ck_assert_int_eq(cl_rundelay_sample(rd, dir, &sec), 1);
    NEAR(sec, 0.0, 0.0);
    /* Thread 10 waited 0.3 s more, 11 left, 12 is new with 0.2 s. */
    put_schedstat(dir, 10, 6000000, 1300000000ull);
    char path[256];
    snprintf(path, sizeof(path), "%s/11/schedstat", dir);
    ck_assert_int_eq(remove(path), 0);
    snprintf(path, sizeof(path), "%s/11", dir);
    ck_assert_int_eq(remove(path), 0);
    put_schedstat(dir, 12, 1000, 200000000ull);
    ck_assert_int_eq(cl_rundelay_sample(rd, dir, &sec), 0);
    NEAR(sec, 0.5, 1e-9);
    /* Garbage and a counter that went backwards count nothing. */
    snprintf(path, sizeof(path), "%s/notatid", dir);
    (void)mkdir(path, 0755);
    put_schedstat(dir, 12, 1000, 100000000ull);
    ck_assert_int_eq(cl_rundelay_sample(rd, dir, &sec), 0);
    NEAR(sec, 0.0, 0.0);
    fx_rmtree(dir);

    /* This process's own threads (kernels without schedstat: -ENOENT). */
    memset(rd, 0, sizeof(*rd));
    int rc = cl_rundelay_sample(rd, NULL, &sec);
    ck_assert(rc == 1 || rc == -ENOENT);
    if (rc == 1) {
        ck_assert_int_eq(cl_rundelay_sample(rd, NULL, &sec), 0);
        ck_assert(sec >= 0.0);
    }
    free(rd);
}
END_TEST

/* Busy: the window used at least CL_BUSY_FRACTION of the budget. */
START_TEST(test_busy)
{
    ck_assert(cl_budget_busy(0.24, 1.0, 0.25));                 /* a saturated quota */
    ck_assert(cl_budget_busy(0.9 * 0.25 * 2.0, 2.0, 0.25));     /* exactly at the line */
    ck_assert(!cl_budget_busy(0.8 * 0.25 * 2.0, 2.0, 0.25));    /* waiting part of the time */
    ck_assert(!cl_budget_busy(0.95, 1.0, 2.0));                 /* one of two CPUs */
    ck_assert(!cl_budget_busy(1.0, 1.0, 0.0));                  /* no budget known */
    ck_assert(!cl_budget_busy(1.0, 0.0, 1.0));                  /* no time passed */
    ck_assert(!cl_budget_busy(NAN, 1.0, 1.0));
    ck_assert(!cl_budget_busy(1.0, 1.0, NAN));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_budget");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_lone_thread);
    tcase_add_test(tc, test_windows);
    tcase_add_test(tc, test_rundelay);
    tcase_add_test(tc, test_busy);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
