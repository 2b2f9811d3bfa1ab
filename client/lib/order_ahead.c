#include "client/lib/order_ahead.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

typedef enum { AHEAD_IDLE = 0, AHEAD_ASKED, AHEAD_RUNNING, AHEAD_READY, AHEAD_FAILED } state_e;

struct cl_ahead_s {
    cl_ahead_fn fn;
    const void *arg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    state_e state;
    int stop;
    uint64_t epoch;
    cl_order_t slot; /* the thread's while RUNNING, else under mu */
};

static void *run(void *p)
{
    cl_ahead_t *a = p;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->stop && a->state != AHEAD_ASKED) {
            pthread_cond_wait(&a->cv, &a->mu);
        }
        if (a->stop) {
            break;
        }
        a->state = AHEAD_RUNNING;
        uint64_t epoch = a->epoch;
        pthread_mutex_unlock(&a->mu);
        int rc = a->fn(a->arg, epoch, &a->slot);
        pthread_mutex_lock(&a->mu);
        a->slot.epoch = epoch;
        a->state = rc == 0 ? AHEAD_READY : AHEAD_FAILED;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int cl_ahead_new(cl_ahead_fn fn, const void *arg, cl_ahead_t **ret)
{
    cl_ahead_t *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return -ENOMEM;
    }
    a->fn = fn;
    a->arg = arg;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    int rc = pthread_create(&a->thread, NULL, run, a);
    if (rc != 0) {
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
        free(a);
        return -rc;
    }
    *ret = a;
    return 0;
}

void cl_ahead_request(cl_ahead_t *a, uint64_t epoch)
{
    pthread_mutex_lock(&a->mu);
    if (a->state != AHEAD_RUNNING && a->state != AHEAD_ASKED &&
        !(a->state == AHEAD_READY && a->slot.epoch == epoch)) {
        a->epoch = epoch;
        a->state = AHEAD_ASKED;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

int cl_ahead_take(cl_ahead_t *a, uint64_t epoch, cl_order_t *o)
{
    int took = 0;
    pthread_mutex_lock(&a->mu);
    while ((a->state == AHEAD_ASKED || a->state == AHEAD_RUNNING) && a->epoch == epoch) {
        pthread_cond_wait(&a->cv, &a->mu);
    }
    if (a->state == AHEAD_READY && a->slot.epoch == epoch) {
        cl_order_t mine = *o;
        *o = a->slot;
        a->slot = mine; /* buffers the thread reuses next time */
        a->state = AHEAD_IDLE;
        took = 1;
    }
    pthread_mutex_unlock(&a->mu);
    return took;
}

void cl_ahead_free(cl_ahead_t *a)
{
    if (a == NULL) {
        return;
    }
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    free(a->slot.order);
    free(a->slot.step_tokens);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}
