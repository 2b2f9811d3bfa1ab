/* bufpool: idle batch buffers, all of one size (a job's batches are the
 * same size but for each epoch's last), shared by a batcher and the batches
 * it handed out, freed with the last reference; thread-safe. It keeps as
 * many idle buffers as were ever out at once (at least SL_BATCHER_POOL, at
 * most SL_BATCHER_POOL_MAX): a consumer that holds a few batches while the
 * batcher fills more (the receive path's credits let it run ahead) would
 * otherwise free the extra buffers each time and fault fresh ones in (issue
 * 39), and memory stays what the job already used at its peak. Buffers come
 * from common/engine/bigbuf.h. */
#ifndef SL_BUFPOOL_H
#define SL_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "common/engine/batcher.h" /* SL_BATCHER_POOL, SL_BATCHER_POOL_MAX */

typedef struct sl_bufpool_s sl_bufpool_t;

/* One reference, or NULL (out of memory). */
sl_bufpool_t *sl_bufpool_new(void);
void sl_bufpool_ref(sl_bufpool_t *p);
void sl_bufpool_unref(sl_bufpool_t *p); /* the last frees the idle buffers */
/* A buffer of n bytes: an idle one of that size, or a new one; NULL when
 * none can be made. With p NULL: plain malloc. */
uint8_t *sl_bufpool_get(sl_bufpool_t *p, size_t n);
/* Keeps buf (of n bytes, from sl_bufpool_get) for reuse, or frees it. A new
 * size replaces the idle buffers of the old one. */
void sl_bufpool_put(sl_bufpool_t *p, uint8_t *buf, size_t n);
uint64_t sl_bufpool_made(sl_bufpool_t *p); /* buffers allocated, not reused */

#endif
