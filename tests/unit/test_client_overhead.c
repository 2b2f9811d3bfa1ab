/* test_client_overhead: client/lib/overhead.c -- the per-sample overhead
 * the client reports: steady under batch-quantised windows (where one
 * window alone swings), nothing before enough samples, a new window on a
 * new plan version, bad inputs ignored, and that it follows a change; and
 * client/lib/owncpu.c -- whose CPU counts as Sluice's: gRPC's threads by
 * name (a fake /proc task directory), a fetch slot's thread by its clock,
 * never a busy thread that is not Sluice's. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/lib/overhead.h"
#include "client/lib/owncpu.h"
#include "client/lib/persec.h"
#include "tests/unit/fixtures.h"

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

/* dir/tid/{comm,schedstat} as the kernel writes them. */
static void fake_task(const char *dir, int tid, const char *comm, unsigned long long run_ns)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%d", dir, tid);
    (void)mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%d/comm", dir, tid);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", comm);
    fclose(f);
    snprintf(path, sizeof(path), "%s/%d/schedstat", dir, tid);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%llu 5000 12\n", run_ns);
    fclose(f);
}

START_TEST(test_grpc_names)
{
    ck_assert(cl_owncpu_is_grpc("default-executo"));
    ck_assert(cl_owncpu_is_grpc("resolver-execut"));
    ck_assert(cl_owncpu_is_grpc("grpc_global_tim"));
    ck_assert(cl_owncpu_is_grpc("event_engine"));
    ck_assert(cl_owncpu_is_grpc("timer_manager"));
    ck_assert(!cl_owncpu_is_grpc("python3"));
    ck_assert(!cl_owncpu_is_grpc("pt_main_thread"));
    ck_assert(!cl_owncpu_is_grpc("sluice"));
    ck_assert(!cl_owncpu_is_grpc(""));
}
END_TEST

/* Only gRPC's threads count; the first sample is a baseline; a thread first
 * seen later started in between and counts whole; one that went is no
 * loss to the others. */
START_TEST(test_grpc_sample)
{
    char dir[] = "/tmp/test_owncpu.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    fake_task(dir, 100, "python3", 9000000000ULL);      /* the training loop */
    fake_task(dir, 101, "default-executo", 1000000ULL); /* 1 ms */
    fake_task(dir, 102, "grpc_global_tim", 2000000ULL); /* 2 ms */
    cl_owncpu_grpc_t *g = calloc(1, sizeof(*g));
    ck_assert_ptr_nonnull(g);
    double sec = -1.0;
    ck_assert_int_eq(cl_owncpu_grpc_sample(g, dir, &sec), 1);
    NEAR(sec, 0.0, 0.0);
    ck_assert_uint_eq(g->n, 2);
    fake_task(dir, 100, "python3", 19000000000ULL);     /* +10 s: not Sluice's */
    fake_task(dir, 101, "default-executo", 4000000ULL); /* +3 ms */
    fake_task(dir, 103, "event_engine", 500000ULL);     /* new: 0.5 ms */
    ck_assert_int_eq(cl_owncpu_grpc_sample(g, dir, &sec), 0);
    NEAR(sec, 0.0035, 1e-12);
    char path[600];
    snprintf(path, sizeof(path), "%s/102/comm", dir);
    unlink(path); /* 102 went */
    ck_assert_int_eq(cl_owncpu_grpc_sample(g, dir, &sec), 0);
    NEAR(sec, 0.0, 1e-12);
    ck_assert_uint_eq(g->n, 2);
    ck_assert_int_eq(cl_owncpu_grpc_sample(g, "/nonexistent/task", &sec), -ENOENT);
    free(g);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

typedef struct {
    double burn_sec;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go; /* 1: burn, 2: exit */
} burner_t;

static void burn(double sec)
{
    struct timespec t0;
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < sec);
}

static void *burner_main(void *arg)
{
    burner_t *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (b->go == 0) {
            pthread_cond_wait(&b->cv, &b->mu);
        }
        if (b->go == 2) {
            break;
        }
        pthread_mutex_unlock(&b->mu);
        burn(b->burn_sec);
        pthread_mutex_lock(&b->mu);
        b->go = 0;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void burner_run(burner_t *b)
{
    pthread_mutex_lock(&b->mu);
    b->go = 1;
    pthread_cond_broadcast(&b->cv);
    while (b->go != 0) {
        pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
}

/* A fetch slot's thread counts what it ran between samples, whatever this
 * (the calling) thread burns meanwhile; an empty slot counts nothing. */
START_TEST(test_fetch_sample)
{
    burner_t b = {.burn_sec = 0.03,
                  .mu = PTHREAD_MUTEX_INITIALIZER,
                  .cv = PTHREAD_COND_INITIALIZER};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, burner_main, &b), 0);
    cl_owncpu_fetch_t f;
    memset(&f, 0, sizeof(f));
    NEAR(cl_owncpu_fetch_sample(&f, 0, 0, t), 0.0, 0.0);
    double first = cl_owncpu_fetch_sample(&f, 3, 1, t); /* first seen: all of it */
    ck_assert(first >= 0.0 && first < 0.02);
    burner_run(&b);
    burn(0.1); /* not the slot's */
    double got = cl_owncpu_fetch_sample(&f, 3, 1, t);
    ck_assert_msg(got >= 0.029 && got < 0.06, "fetch slot counted %.4f s", got);
    NEAR(cl_owncpu_fetch_sample(&f, CL_OWNCPU_MAX_FETCH, 1, t), 0.0, 0.0);
    pthread_mutex_lock(&b.mu);
    b.go = 2;
    pthread_cond_broadcast(&b.cv);
    pthread_mutex_unlock(&b.mu);
    pthread_join(t, NULL);
}
END_TEST

/* A sample-sized probe's overhead (issue 39 part 4): the CPU per sample
 * beyond the per-byte receive cost; never negative; nothing from a probe
 * that measured nothing or a broken figure. */
START_TEST(test_overhead_from_probe)
{
    double v = -1.0;
    /* 4 MB in samples of 40 KB = 100 samples; 0.02 s: 0.2 ms a sample, of
     * which 40 KB x 2 ns = 0.08 ms per byte. */
    ck_assert_int_eq(cl_overhead_from_probe(0.02, 4e6, 4e4, 2e-9, &v), 0);
    NEAR(v, 0.12e-3, 1e-9);
    /* No per-byte figure: all of it. */
    ck_assert_int_eq(cl_overhead_from_probe(0.02, 4e6, 4e4, NAN, &v), 0);
    NEAR(v, 0.2e-3, 1e-9);
    /* The per-byte figure already covers it: 0, not negative. */
    ck_assert_int_eq(cl_overhead_from_probe(0.02, 4e6, 4e4, 1e-8, &v), 0);
    ck_assert(v == 0.0);
    v = 7.0;
    ck_assert_int_eq(cl_overhead_from_probe(0.02, 0.0, 4e4, 2e-9, &v), -EINVAL);
    ck_assert_int_eq(cl_overhead_from_probe(0.02, 3e4, 4e4, 2e-9, &v), -EINVAL);
    ck_assert_int_eq(cl_overhead_from_probe(0.02, 4e6, 0.5, 2e-9, &v), -EINVAL);
    ck_assert_int_eq(cl_overhead_from_probe(-0.01, 4e6, 4e4, 2e-9, &v), -EINVAL);
    ck_assert_int_eq(cl_overhead_from_probe(NAN, 4e6, 4e4, 2e-9, &v), -EINVAL);
    ck_assert_int_eq(cl_overhead_from_probe(0.02, INFINITY, 4e4, 2e-9, &v), -EINVAL);
    ck_assert(v == 7.0); /* untouched on failure */
}
END_TEST

/* The per-second cost's arithmetic (persec.h): the first window (start-up)
 * never enters; then the time-driven threads' CPU over wall time once
 * CL_PERSEC_MIN_WINDOWS entered (0 before), older windows weighing less. */
START_TEST(test_persec_windows)
{
    cl_persec_t s;
    memset(&s, 0, sizeof(s));
    /* Start-up: 0.05 CPU in 1 s, not counted. */
    ck_assert(cl_persec_add(&s, 0.05, 1.0, 0.1, 0.25) == 0.0);
    ck_assert(cl_persec_add(&s, 0.005, 1.0, 0.1, 0.25) == 0.0);
    ck_assert(cl_persec_add(&s, 0.005, 1.0, 0.1, 0.25) == 0.0);
    NEAR(cl_persec_add(&s, 0.005, 1.0, 0.1, 0.25), 0.005, 1e-12);
    ck_assert_uint_eq(s.entered, 3);
    /* Windows of other lengths: CPU over wall time, not per window. */
    NEAR(cl_persec_add(&s, 0.010, 2.0, 0.2, 0.25), 0.005, 1e-12);
    /* A change moves it, older windows weighing less (~30 s of memory). */
    double v = 0.0;
    for (int i = 0; i < 200; i++) {
        v = cl_persec_add(&s, 0.02, 1.0, 0.1, 0.25);
    }
    NEAR(v, 0.02, 1e-4);
}
END_TEST

/* A saturated window -- the process used CL_PERSEC_SATURATED of its budget
 * or more -- never enters: under the quota's throttling the control thread
 * runs late, and its CPU over wall time is what the quota let it do. With
 * no budget known nothing is called saturated. Broken figures never enter. */
START_TEST(test_persec_saturated_left_out)
{
    ck_assert_int_eq(cl_persec_saturated(0.24, 1.0, 0.25), 1);
    ck_assert_int_eq(cl_persec_saturated(0.2, 1.0, 0.25), 0);
    ck_assert_int_eq(cl_persec_saturated(0.45, 2.0, 0.25), 1);
    ck_assert_int_eq(cl_persec_saturated(5.0, 1.0, 0.0), 0);
    ck_assert_int_eq(cl_persec_saturated(5.0, 1.0, NAN), 0);
    cl_persec_t s;
    memset(&s, 0, sizeof(s));
    (void)cl_persec_add(&s, 0.0, 1.0, 0.0, 0.25); /* start-up */
    for (int i = 0; i < 3; i++) {
        NEAR(cl_persec_add(&s, 0.004, 1.0, 0.1, 0.25), i < 2 ? 0.0 : 0.004, 1e-12);
    }
    /* Saturated windows with a low reading (a throttled control thread):
     * the figure stays. */
    for (int i = 0; i < 5; i++) {
        NEAR(cl_persec_add(&s, 0.001, 1.0, 0.25, 0.25), 0.004, 1e-12);
    }
    ck_assert_uint_eq(s.entered, 3);
    /* Broken windows: nothing enters. */
    NEAR(cl_persec_add(&s, NAN, 1.0, 0.1, 0.25), 0.004, 1e-12);
    NEAR(cl_persec_add(&s, -0.1, 1.0, 0.1, 0.25), 0.004, 1e-12);
    NEAR(cl_persec_add(&s, 0.1, 0.0, 0.1, 0.25), 0.004, 1e-12);
    NEAR(cl_persec_add(&s, 0.1, 1.0, INFINITY, 0.25), 0.004, 1e-12);
    ck_assert_uint_eq(s.entered, 3);
    /* Every window saturated from the start: nothing measured. */
    memset(&s, 0, sizeof(s));
    for (int i = 0; i < 10; i++) {
        ck_assert(cl_persec_add(&s, 0.004, 1.0, 0.3, 0.25) == 0.0);
    }
    /* No budget known: windows enter. */
    memset(&s, 0, sizeof(s));
    for (int i = 0; i < 4; i++) {
        (void)(cl_persec_add(&s, 0.004, 1.0, 0.3, 0.0));
    }
    ck_assert_uint_eq(s.entered, 3);
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
    tcase_add_test(tc, test_grpc_names);
    tcase_add_test(tc, test_grpc_sample);
    tcase_add_test(tc, test_fetch_sample);
    tcase_add_test(tc, test_overhead_from_probe);
    tcase_add_test(tc, test_persec_windows);
    tcase_add_test(tc, test_persec_saturated_left_out);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
