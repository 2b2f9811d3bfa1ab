/* bufpool: see bufpool.h. */
#include "common/engine/bufpool.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/engine/bigbuf.h"

struct sl_bufpool_s {
    pthread_mutex_t mu;
    unsigned refs;
    size_t size;
    uint8_t *idle[SL_BATCHER_POOL_MAX];
    size_t nidle;
    size_t out, peak; /* buffers handed out and not yet back; most at once */
    uint64_t made;    /* buffers allocated (not reused) */
};

sl_bufpool_t *sl_bufpool_new(void)
{
    sl_bufpool_t *p = calloc(1, sizeof(*p));
    if (p != NULL && pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return NULL;
    }
    if (p != NULL) {
        p->refs = 1;
    }
    return p;
}

void sl_bufpool_unref(sl_bufpool_t *p)
{
    pthread_mutex_lock(&p->mu);
    unsigned left = --p->refs;
    pthread_mutex_unlock(&p->mu);
    if (left == 0) {
        for (size_t i = 0; i < p->nidle; i++) {
            sl_bigbuf_free(p->idle[i], p->size);
        }
        pthread_mutex_destroy(&p->mu);
        free(p);
    }
}

uint8_t *sl_bufpool_get(sl_bufpool_t *p, size_t n)
{
    uint8_t *buf = NULL;
    if (p != NULL) {
        pthread_mutex_lock(&p->mu);
        if (p->nidle > 0 && p->size == n) {
            buf = p->idle[--p->nidle];
        }
        if (buf == NULL) {
            buf = sl_bigbuf_alloc(n);
            p->made += buf != NULL;
        }
        if (buf != NULL && ++p->out > p->peak) {
            p->peak = p->out;
        }
        pthread_mutex_unlock(&p->mu);
        return buf;
    }
    return malloc(n);
}

void sl_bufpool_put(sl_bufpool_t *p, uint8_t *buf, size_t n)
{
    uint8_t *drop[SL_BATCHER_POOL_MAX + 1];
    size_t dropn[SL_BATCHER_POOL_MAX + 1];
    size_t ndrop = 0;
    pthread_mutex_lock(&p->mu);
    p->out -= p->out > 0;
    size_t keep = p->peak < SL_BATCHER_POOL ? SL_BATCHER_POOL : p->peak;
    keep = keep < SL_BATCHER_POOL_MAX ? keep : SL_BATCHER_POOL_MAX;
    if (p->size != n) {
        while (p->nidle > 0) {
            dropn[ndrop] = p->size;
            drop[ndrop++] = p->idle[--p->nidle];
        }
        p->size = n;
    }
    if (p->nidle < keep) {
        p->idle[p->nidle++] = buf;
    } else {
        dropn[ndrop] = n;
        drop[ndrop++] = buf;
    }
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < ndrop; i++) {
        sl_bigbuf_free(drop[i], dropn[i]);
    }
}

void sl_bufpool_ref(sl_bufpool_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->refs++;
    pthread_mutex_unlock(&p->mu);
}

uint64_t sl_bufpool_made(sl_bufpool_t *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t made = p->made;
    pthread_mutex_unlock(&p->mu);
    return made;
}
