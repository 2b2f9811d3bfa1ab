#include "common/base/ring.h"
#include "common/engine/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    sl_pool_fn fn;
    void *arg;
} task_t;

typedef struct {
    sl_pool_t *pool;
    unsigned idx;
} thread_arg_t;

struct sl_pool_s {
    pthread_mutex_t mu;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    sl_ring_t queue;  /* of task_t */
    sl_ring_t urgent; /* of task_t, taken before queue */
    int stopping;
    unsigned nthreads;
    pthread_t *threads;
    thread_arg_t *args;
};

static void *pool_main(void *p)
{
    thread_arg_t *ta = p;
    sl_pool_t *pool = ta->pool;
    for (;;) {
        pthread_mutex_lock(&pool->mu);
        while (sl_ring_len(&pool->queue) == 0 && sl_ring_len(&pool->urgent) == 0 &&
               !pool->stopping) {
            pthread_cond_wait(&pool->not_empty, &pool->mu);
        }
        task_t t;
        if (sl_ring_pop(&pool->urgent, &t) < 0 && sl_ring_pop(&pool->queue, &t) < 0) {
            pthread_mutex_unlock(&pool->mu);
            return NULL;
        }
        /* Either queue may have a submitter waiting: wake them all. */
        pthread_cond_broadcast(&pool->not_full);
        pthread_mutex_unlock(&pool->mu);
        t.fn(t.arg, ta->idx);
    }
}

sl_pool_t *sl_pool_new(unsigned nthreads, size_t queue_cap)
{
    if (nthreads == 0 || nthreads > SL_POOL_MAX_THREADS || queue_cap == 0) {
        return NULL;
    }
    sl_pool_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    int qrc = sl_ring_init(&p->queue, sizeof(task_t), queue_cap);
    if (qrc >= 0) {
        qrc = sl_ring_init(&p->urgent, sizeof(task_t), queue_cap);
    }
    p->threads = calloc(nthreads, sizeof(*p->threads));
    p->args = calloc(nthreads, sizeof(*p->args));
    if (qrc < 0 || p->threads == NULL || p->args == NULL) {
        sl_ring_free(&p->queue);
        sl_ring_free(&p->urgent);
        free(p->threads);
        free(p->args);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->not_empty, NULL);
    pthread_cond_init(&p->not_full, NULL);
    for (unsigned i = 0; i < nthreads; i++) {
        p->args[i].pool = p;
        p->args[i].idx = i;
        if (pthread_create(&p->threads[i], NULL, pool_main, &p->args[i]) != 0) {
            break;
        }
        p->nthreads++;
    }
    if (p->nthreads != nthreads) {
        sl_pool_free(p);
        return NULL;
    }
    return p;
}

static int submit_to(sl_pool_t *p, sl_ring_t *q, sl_pool_fn fn, void *arg)
{
    pthread_mutex_lock(&p->mu);
    task_t t = {fn, arg};
    while (!p->stopping && sl_ring_push_back(q, &t) == -ENOSPC) {
        pthread_cond_wait(&p->not_full, &p->mu);
    }
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        return -ESHUTDOWN;
    }
    pthread_cond_signal(&p->not_empty);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

int sl_pool_submit(sl_pool_t *p, sl_pool_fn fn, void *arg)
{
    return submit_to(p, &p->queue, fn, arg);
}

int sl_pool_submit_urgent(sl_pool_t *p, sl_pool_fn fn, void *arg)
{
    return submit_to(p, &p->urgent, fn, arg);
}

double sl_pool_cpu_sec(const sl_pool_t *p)
{
    double s = 0.0;
    /* The threads run until sl_pool_free joins them, so their clocks stay
     * readable for as long as the pool exists. */
    for (unsigned i = 0; p != NULL && i < p->nthreads; i++) {
        clockid_t cid;
        struct timespec ts;
        if (pthread_getcpuclockid(p->threads[i], &cid) == 0 && clock_gettime(cid, &ts) == 0) {
            s += (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
        }
    }
    return s;
}

void sl_pool_free(sl_pool_t *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->not_empty);
    pthread_cond_broadcast(&p->not_full);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++) {
        pthread_join(p->threads[i], NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->not_empty);
    pthread_cond_destroy(&p->not_full);
    sl_ring_free(&p->queue);
    sl_ring_free(&p->urgent);
    free(p->threads);
    free(p->args);
    free(p);
}
