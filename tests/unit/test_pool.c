/* The bounded pool: urgent tasks start before queued ordinary ones, each
 * queue in order, and a freed pool runs what was queued. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

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

/* A pool of one thread, returned once that thread is inside the gate (g,
 * which must outlive it): everything submitted next queues. */
static sl_pool_t *held_pool(log_t *l, task_t *g, size_t queue_cap)
{
    sl_pool_t *p = sl_pool_new(1, queue_cap);
    ck_assert_ptr_nonnull(p);
    *g = (task_t){l, 0};
    ck_assert_int_eq(sl_pool_submit(p, gate, g), 0);
    pthread_mutex_lock(&l->mu);
    while (!l->started) {
        pthread_cond_wait(&l->cv, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return p;
}

START_TEST(test_urgent_first)
{
    log_t l = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    task_t g;
    sl_pool_t *p = held_pool(&l, &g, 8);
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

/* Both queues have their own bound: with the one thread held, a submitter
 * to a full queue blocks, and both get in once the thread runs again. (A
 * single wake-up per task taken could reach the submitter whose queue is
 * still full; this test does not reliably catch that, pool.c broadcasts.) */
typedef struct {
    sl_pool_t *pool;
    task_t *task;
    int urgent;
    int done; /* under the log's mutex */
} submitter_t;

static void *submit_main(void *arg)
{
    submitter_t *s = arg;
    int rc = s->urgent ? sl_pool_submit_urgent(s->pool, record, s->task)
                       : sl_pool_submit(s->pool, record, s->task);
    pthread_mutex_lock(&s->task->log->mu);
    s->done = rc == 0 ? 1 : -1;
    pthread_mutex_unlock(&s->task->log->mu);
    return NULL;
}

START_TEST(test_both_queues_bounded)
{
    log_t l = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    task_t g;
    sl_pool_t *p = held_pool(&l, &g, 1);
    task_t t[4] = {{&l, 1}, {&l, 2}, {&l, 3}, {&l, 4}};
    ck_assert_int_eq(sl_pool_submit(p, record, &t[0]), 0);        /* fills the queue */
    ck_assert_int_eq(sl_pool_submit_urgent(p, record, &t[1]), 0); /* fills urgent */
    submitter_t s[2] = {{p, &t[2], 0, 0}, {p, &t[3], 1, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_create(&th[i], NULL, submit_main, &s[i]), 0);
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&l.mu);
    ck_assert_int_eq(s[0].done, 0); /* both still blocked: their queues are full */
    ck_assert_int_eq(s[1].done, 0);
    l.open = 1;
    pthread_cond_broadcast(&l.cv);
    pthread_mutex_unlock(&l.mu);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(s[i].done, 1);
    }
    sl_pool_free(p);
    ck_assert_int_eq(l.n, 4);
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
