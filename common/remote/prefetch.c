/* prefetch: SL_RPF_THREADS threads taking (URL, validator) from a queue of
 * at most SL_RPF_QUEUE entries, each fetching one whole object at a time
 * into the cache (sl_remote_open_known: a cached one costs nothing, a
 * concurrent reader of the same entry waits on its fill lock). Bytes in
 * flight are bounded by the threads times the largest object queued, which
 * sl_remote_prefetch keeps under a quarter of cache_bytes. Failures are
 * counted and otherwise dropped: the read that needs the bytes reports.
 * Stopping cuts the downloads in flight (their temporaries are dropped), so
 * a process ends without waiting for shards it no longer needs. */
#include "common/remote/prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/remote/pfill.h"
#include "common/remote/remote_impl.h"

typedef struct pf_item_s {
    char url[SL_URL_MAX];
    uint64_t tag;
    uint64_t size;
} pf_item_t;

struct sl_rpf_s {
    struct sl_remote_s *r;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pf_item_t *q; /* ring of SL_RPF_QUEUE */
    unsigned head, n;
    pf_item_t *run; /* what each thread fetches now (tag 0: idle) */
    pthread_t th[SL_RPF_THREADS];
    unsigned nth;
    bool stop;
    int cancel; /* set (atomic store) by sl_rpf_free: cuts the downloads in flight */
    uint64_t done, failed;
};

int sl_rpf_new(struct sl_remote_s *r, sl_rpf_t **ret)
{
    sl_rpf_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    p->q = calloc(SL_RPF_QUEUE, sizeof(*p->q));
    p->run = calloc(SL_RPF_THREADS, sizeof(*p->run));
    if (p->q == NULL || p->run == NULL) {
        free(p->q);
        free(p->run);
        free(p);
        return -ENOMEM;
    }
    p->r = r;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    *ret = p;
    return 0;
}

typedef struct pf_arg_s {
    sl_rpf_t *p;
    unsigned slot;
} pf_arg_t;

static void *fetcher(void *arg)
{
    sl_rpf_t *p = ((pf_arg_t *)arg)->p;
    unsigned slot = ((pf_arg_t *)arg)->slot;
    free(arg);
    char err[512];
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->n == 0) {
            pthread_cond_wait(&p->cv, &p->mu);
        }
        if (p->stop) {
            break;
        }
        p->run[slot] = p->q[p->head];
        p->head = (p->head + 1) % SL_RPF_QUEUE;
        p->n--;
        pthread_mutex_unlock(&p->mu);
        sl_remote_obj_t o;
        sl_fetch_opts_t opts = p->r->fetch;
        opts.cancel = &p->cancel;
        int rc = 0;
        int fd = sl_remote_lookup(p->r, p->run[slot].url, p->run[slot].tag);
        if (fd < 0) {
            /* Only the ranges not kept yet; a server without Range (or no
             * partial entry possible here): the whole GET. */
            rc = sl_remote_fill_ranged(p->r, p->run[slot].url, p->run[slot].tag, p->run[slot].size,
                                       &p->cancel, err, sizeof(err));
        }
        if (fd < 0 && rc == -ENOTSUP) {
            fd = sl_remote_open_opts(p->r, p->run[slot].url, p->run[slot].tag, &opts, &o, err,
                                     sizeof(err));
            rc = fd < 0 ? fd : 0;
        }
        if (fd >= 0) {
            close(fd);
        }
        pthread_mutex_lock(&p->mu);
        p->run[slot].tag = 0;
        if (rc == 0) {
            p->done++;
        } else {
            p->failed++;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static bool same(const pf_item_t *it, const char *url, uint64_t tag)
{
    return it->tag == tag && strcmp(it->url, url) == 0;
}

/* Under mu: url is queued or being fetched. */
static bool pending(const sl_rpf_t *p, const char *url, uint64_t tag)
{
    for (unsigned i = 0; i < p->n; i++) {
        if (same(&p->q[(p->head + i) % SL_RPF_QUEUE], url, tag)) {
            return true;
        }
    }
    for (unsigned i = 0; i < p->nth; i++) {
        if (same(&p->run[i], url, tag)) {
            return true;
        }
    }
    return false;
}

int sl_rpf_add(sl_rpf_t *p, const char *url, uint64_t tag, uint64_t size)
{
    if (strlen(url) >= SL_URL_MAX || tag == 0) {
        return -EINVAL;
    }
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    if (p->stop) {
        rc = -EAGAIN;
    } else if (pending(p, url, tag)) {
        rc = 1;
    } else if (p->n == SL_RPF_QUEUE) {
        rc = -EAGAIN;
    }
    while (rc == 0 && p->nth < SL_RPF_THREADS) {
        pf_arg_t *a = malloc(sizeof(*a));
        if (a == NULL) {
            break;
        }
        *a = (pf_arg_t){.p = p, .slot = p->nth};
        if (pthread_create(&p->th[p->nth], NULL, fetcher, a) != 0) {
            free(a);
            break;
        }
        p->nth++;
    }
    if (rc == 0 && p->nth == 0) {
        rc = -EAGAIN;
    }
    if (rc == 0) {
        pf_item_t *it = &p->q[(p->head + p->n) % SL_RPF_QUEUE];
        snprintf(it->url, sizeof(it->url), "%s", url);
        it->tag = tag;
        it->size = size;
        p->n++;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void sl_rpf_counts(sl_rpf_t *p, uint64_t *ret_done, uint64_t *ret_failed)
{
    pthread_mutex_lock(&p->mu);
    *ret_done = p->done;
    *ret_failed = p->failed;
    pthread_mutex_unlock(&p->mu);
}

void sl_rpf_free(sl_rpf_t *p)
{
    if (p == NULL) {
        return;
    }
    __atomic_store_n(&p->cancel, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nth; i++) {
        pthread_join(p->th[i], NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->q);
    free(p->run);
    free(p);
}
