#include "common/engine/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

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
    task_t *ring;
    size_t cap, head, count;
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
        while (pool->count == 0 && !pool->stopping) {
            pthread_cond_wait(&pool->not_empty, &pool->mu);
        }
        if (pool->count == 0) {
            pthread_mutex_unlock(&pool->mu);
            return NULL;
        }
        task_t t = pool->ring[pool->head];
        pool->head = (pool->head + 1) % pool->cap;
        pool->count--;
        pthread_cond_signal(&pool->not_full);
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
    p->ring = calloc(queue_cap, sizeof(*p->ring));
    p->threads = calloc(nthreads, sizeof(*p->threads));
    p->args = calloc(nthreads, sizeof(*p->args));
    if (p->ring == NULL || p->threads == NULL || p->args == NULL) {
        free(p->ring);
        free(p->threads);
        free(p->args);
        free(p);
        return NULL;
    }
    p->cap = queue_cap;
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

unsigned sl_pool_threads(const sl_pool_t *p) { return p->nthreads; }

int sl_pool_submit(sl_pool_t *p, sl_pool_fn fn, void *arg)
{
    pthread_mutex_lock(&p->mu);
    while (p->count == p->cap && !p->stopping) {
        pthread_cond_wait(&p->not_full, &p->mu);
    }
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        return -ESHUTDOWN;
    }
    p->ring[(p->head + p->count) % p->cap] = (task_t){fn, arg};
    p->count++;
    pthread_cond_signal(&p->not_empty);
    pthread_mutex_unlock(&p->mu);
    return 0;
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
    free(p->ring);
    free(p->threads);
    free(p->args);
    free(p);
}
