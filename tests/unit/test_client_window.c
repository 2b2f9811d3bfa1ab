/* test_client_window: client/lib/window.c -- the stall and the rate each
 * ReportRates carries (docs/reference/status.md "Rates"): the wait fraction
 * stays in [0, 1] on the windows where the old figure (whole calls summed
 * in the window they ended in, over that window's wall time) read 1.03 and
 * more, and the rate reads the loop's rate on batch-quantised windows where
 * samples over wall read 59.8 for 115/s. */
#include <check.h>
#include <math.h>

#include "client/lib/window.h"
#include "tests/unit/fixtures.h"

static void call(cl_window_acc_t *w, double t0, double t1, uint32_t n)
{
    cl_window_enter(w, t0);
    cl_window_leave(w, t0, t1, n);
}

/* A stalled loop: one call waits from 0.1 to 1.9 across the report at 1.0;
 * the next window (1.0 to 2.03) holds its end and a second call. The old
 * figure counted the whole 1.8 s call in the second window. */
START_TEST(test_wait_straddling_call)
{
    cl_window_acc_t w;
    cl_window_fig_t f;
    cl_window_start(&w, 0.0 + 1e-9);
    cl_window_enter(&w, 0.1);
    cl_window_take(&w, 1.0, &f);
    NEAR(f.wait_fraction, 0.9, 1e-6); /* the call in progress, so far */
    cl_window_leave(&w, 0.1, 1.9, 64);
    call(&w, 1.92, 2.03, 64);
    cl_window_take(&w, 2.03, &f);
    double old = ((1.9 - 0.1) + (2.03 - 1.92)) / (2.03 - 1.0);
    ck_assert(old > 1.03);
    NEAR(f.wait_fraction, (0.9 + 0.11) / 1.03, 1e-6);
    ck_assert(f.wait_fraction <= 1.0);
}
END_TEST

/* The first window: calls before the report baseline do not count (the old
 * figure counted every call since the job opened against 1 s). */
START_TEST(test_wait_before_start)
{
    cl_window_acc_t w = {0};
    cl_window_fig_t f;
    call(&w, 0.0, 0.8, 64); /* before the first tick */
    cl_window_start(&w, 1.0);
    call(&w, 1.0, 1.7, 64);
    cl_window_take(&w, 2.0, &f);
    ck_assert((0.8 + 0.7) / 1.0 > 1.0);
    NEAR(f.wait_fraction, 0.7, 1e-6);
    /* A call that began before the window: its loop time before it does
     * not count as the loop's own time in this one (never negative). */
    call(&w, 2.5, 2.6, 64);
    cl_window_take(&w, 3.0, &f);
    cl_window_enter(&w, 2.9);
    cl_window_leave(&w, 2.9, 3.5, 64);
    cl_window_take(&w, 4.0, &f);
    NEAR(f.wait_fraction, 0.5, 1e-6);
    ck_assert(f.consumer >= 0.0);
}
END_TEST

/* Two threads inside next_batch at once for the whole window: the time
 * counts once (the old sum read 2.0). */
START_TEST(test_wait_overlapping_calls)
{
    cl_window_acc_t w;
    cl_window_fig_t f;
    cl_window_start(&w, 1.0);
    cl_window_enter(&w, 1.0);
    cl_window_enter(&w, 1.0);
    cl_window_leave(&w, 1.0, 2.0, 32);
    cl_window_leave(&w, 1.0, 2.0, 32);
    cl_window_take(&w, 2.0, &f);
    NEAR(f.wait_fraction, 1.0, 1e-9);
    /* Random calls and reports: always in [0, 1]. */
    uint64_t x = 88172645463325252ULL;
    double t = 2.0;
    for (int i = 0; i < 2000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double d = (double)(x % 1000) / 1000.0;
        double t1 = t + d * 0.5;
        cl_window_enter(&w, t);
        if (x % 3 == 0) {
            cl_window_take(&w, t + d * 0.25, &f); /* a report while waiting */
            ck_assert(f.wait_fraction >= 0.0 && f.wait_fraction <= 1.0);
        }
        cl_window_leave(&w, t, t1, 64);
        t = t1 + d * 0.1;
        if (x % 5 == 0) {
            cl_window_take(&w, t, &f);
            ck_assert(f.wait_fraction >= 0.0 && f.wait_fraction <= 1.0);
        }
    }
}
END_TEST

/* 115 samples/s in batches of 64 (one every 0.5565 s), reports every 1.0 to
 * 1.07 s: samples over wall read 64/1.07 = 59.8 or 128; hand-out to
 * hand-out reads 115 every window. */
START_TEST(test_rate_batch_quantised)
{
    cl_window_acc_t w;
    cl_window_fig_t f;
    double per = 64.0 / 115.0;
    cl_window_start(&w, 0.0 + 1e-9);
    double next = 0.3;
    double now = 0.0;
    double old_min = 1e9;
    for (int i = 0; i < 30; i++) {
        double end = now + (i % 2 == 0 ? 1.07 : 1.0);
        while (next < end) {
            call(&w, next - 0.01, next, 64);
            next += per;
        }
        cl_window_take(&w, end, &f);
        double old = (double)f.samples / (end - now);
        old_min = old < old_min ? old : old_min;
        if (i > 0) {
            NEAR(f.rate, 115.0, 0.5);
        }
        now = end;
    }
    ck_assert_msg(old_min < 60.0, "old min %.1f", old_min);
}
END_TEST

/* A slow start (the first batch after 5 s of start-up) does not lower the
 * rate once two batches bound it; a stall lowers it: at most one batch over
 * the time since the last. */
START_TEST(test_rate_startup_and_stall)
{
    cl_window_acc_t w;
    cl_window_fig_t f;
    cl_window_start(&w, 1.0);
    call(&w, 1.0, 6.0, 100);
    call(&w, 6.0, 6.5, 100);
    call(&w, 6.5, 7.0, 100);
    cl_window_take(&w, 7.0, &f);
    NEAR(f.rate, 200.0, 1e-6);
    cl_window_take(&w, 8.0, &f); /* nothing for 1 s */
    NEAR(f.rate, 100.0, 1e-6);
    cl_window_take(&w, 11.0, &f); /* nothing for 4 s */
    NEAR(f.rate, 25.0, 1e-6);
    call(&w, 11.0, 11.5, 100);
    cl_window_take(&w, 12.0, &f); /* one batch in 4.5 s since the last */
    NEAR(f.rate, 100.0 / 4.5, 1e-6);
}
END_TEST

/* A loaded machine: one batch in five comes 0.3 s late and the next one
 * early (the loop catches up). One interval alone reads 64 / 0.86 = 74 or
 * 64 / 0.26 = 250; the 3 s span stays within 10 % of 115. */
START_TEST(test_rate_late_batch)
{
    cl_window_acc_t w;
    cl_window_fig_t f;
    double per = 64.0 / 115.0;
    cl_window_start(&w, 1e-9);
    double now = 0.0;
    int k = 0;
    for (int i = 0; i < 20; i++) {
        double end = now + 1.0;
        for (;;) {
            double t = 0.3 + per * k + (k % 5 == 3 ? 0.3 : 0.0);
            if (t >= end) {
                break;
            }
            call(&w, t - 0.01, t, 64);
            k++;
        }
        cl_window_take(&w, end, &f);
        if (i >= 3) {
            NEAR(f.rate, 115.0, 11.5);
        }
        now = end;
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_window");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_wait_straddling_call);
    tcase_add_test(tc, test_wait_before_start);
    tcase_add_test(tc, test_wait_overlapping_calls);
    tcase_add_test(tc, test_rate_batch_quantised);
    tcase_add_test(tc, test_rate_startup_and_stall);
    tcase_add_test(tc, test_rate_late_batch);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
