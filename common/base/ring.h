/* ring: the one bounded FIFO of fixed-size elements (a deque: returned work
 * goes back to the front). Used for the thread pool's task queue, the RPC
 * server's queue of calls waiting for a handler thread and the dispatcher's
 * queues of pending splits. Not thread-safe: the owner holds its own lock.
 * The capacity is fixed at init; a push into a full ring fails (-ENOSPC)
 * instead of growing, so every queue stays bounded. */
#ifndef SL_RING_H
#define SL_RING_H

#include <stddef.h>

typedef struct sl_ring_s {
    unsigned char *buf; /* cap * elem bytes, owned */
    size_t elem, cap, head, len;
} sl_ring_t;

/* Returns 0 or -ENOMEM (-EINVAL for a zero element size). cap 0 is allowed:
 * every push fails. */
int sl_ring_init(sl_ring_t *r, size_t elem, size_t cap);
void sl_ring_free(sl_ring_t *r); /* zeroed ring ok */

int sl_ring_push_back(sl_ring_t *r, const void *v);  /* 0 or -ENOSPC */
int sl_ring_push_front(sl_ring_t *r, const void *v); /* 0 or -ENOSPC */
int sl_ring_pop(sl_ring_t *r, void *ret);            /* 0 or -ENOENT; ret may be NULL */

/* The front element in place (NULL when empty); valid until the next push/pop. */
void *sl_ring_front(const sl_ring_t *r);
/* Element i counted from the front, in place (NULL when i >= len); valid
 * until the next push/pop. */
void *sl_ring_at(const sl_ring_t *r, size_t i);

static inline size_t sl_ring_len(const sl_ring_t *r)
{
    return r->len;
}

#endif
