/* The bounded pool: urgent tasks start before queued ordinary ones, each
 * queue in order, and a freed pool runs what was queued. */
#include <check.h>
#include <errno.h>
#include <pthread.h>

#include "common/engine/pool.h"
#include "tests/unit/fixtures.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;    /* the gate task may finish */
    int started; /* the gate task runs */
    int order[16];
    int n;
} log_t;

typedef struct {
    log_t *log;
    int id;
} task_t;

static void gate(void *arg, unsigned thread_idx)
{
    (void)thread_idx;
    log_t *l = ((task_t *)arg)->log;
    pthread_mutex_lock(&l->mu);
    l->started = 1;
    pthread_cond_broadcast(&l->cv);
    while (!l->open) {
        pthread_cond_wait(&l->cv, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
}

static void record(void *arg, unsigned thread_idx)
{
    (void)thread_idx;
    task_t *t = arg;
    pthread_mutex_lock(&t->log->mu);
    if (t->log->n < 16) {
        t->log->order[t->log->n++] = t->id;
    }
    pthread_mutex_unlock(&t->log->mu);
}

START_TEST(test_urgent_first)
{
    log_t l = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    sl_pool_t *p = sl_pool_new(1, 8);
    ck_assert_ptr_nonnull(p);
    task_t g = {&l, 0};
    ck_assert_int_eq(sl_pool_submit(p, gate, &g), 0);
    /* The one thread is inside the gate: everything below queues. */
    pthread_mutex_lock(&l.mu);
    while (!l.started) {
        pthread_cond_wait(&l.cv, &l.mu);
    }
    pthread_mutex_unlock(&l.mu);
    task_t t[6] = {{&l, 1}, {&l, 2}, {&l, 3}, {&l, 4}, {&l, 5}, {&l, 6}};
    ck_assert_int_eq(sl_pool_submit(p, record, &t[0]), 0);
    ck_assert_int_eq(sl_pool_submit(p, record, &t[1]), 0);
    ck_assert_int_eq(sl_pool_submit_urgent(p, record, &t[2]), 0);
    ck_assert_int_eq(sl_pool_submit(p, record, &t[3]), 0);
    ck_assert_int_eq(sl_pool_submit_urgent(p, record, &t[4]), 0);
    ck_assert_int_eq(sl_pool_submit_urgent(p, record, &t[5]), 0);
    pthread_mutex_lock(&l.mu);
    l.open = 1;
    pthread_cond_broadcast(&l.cv);
    pthread_mutex_unlock(&l.mu);
    sl_pool_free(p); /* runs what is queued */
    const int want[6] = {3, 5, 6, 1, 2, 4};
    ck_assert_int_eq(l.n, 6);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(l.order[i], want[i]);
    }
}
END_TEST

/* Both queues have their own bound; a full one blocks only its submitter
 * until a thread takes a task, whichever queue that comes from. */
START_TEST(test_both_queues_bounded)
{
    log_t l = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    sl_pool_t *p = sl_pool_new(2, 2);
    ck_assert_ptr_nonnull(p);
    task_t t[12];
    for (int i = 0; i < 12; i++) {
        t[i] = (task_t){&l, i};
        int rc = i % 2 ? sl_pool_submit_urgent(p, record, &t[i]) : sl_pool_submit(p, record, &t[i]);
        ck_assert_int_eq(rc, 0);
    }
    sl_pool_free(p);
    ck_assert_int_eq(l.n, 12);
    ck_assert_ptr_null(sl_pool_new(0, 2));
    ck_assert_ptr_null(sl_pool_new(1, 0));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_urgent_first);
    tcase_add_test(tc, test_both_queues_bounded);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
