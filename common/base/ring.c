#include "common/base/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sl_ring_init(sl_ring_t *r, size_t elem, size_t cap)
{
    memset(r, 0, sizeof(*r));
    if (elem == 0) {
        return -EINVAL;
    }
    r->buf = calloc(cap > 0 ? cap : 1, elem);
    if (r->buf == NULL) {
        return -ENOMEM;
    }
    r->elem = elem;
    r->cap = cap;
    return 0;
}

void sl_ring_free(sl_ring_t *r)
{
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

int sl_ring_push_back(sl_ring_t *r, const void *v)
{
    if (r->len >= r->cap) {
        return -ENOSPC;
    }
    memcpy(r->buf + ((r->head + r->len) % r->cap) * r->elem, v, r->elem);
    r->len++;
    return 0;
}

int sl_ring_push_front(sl_ring_t *r, const void *v)
{
    if (r->len >= r->cap) {
        return -ENOSPC;
    }
    r->head = (r->head + r->cap - 1) % r->cap;
    memcpy(r->buf + r->head * r->elem, v, r->elem);
    r->len++;
    return 0;
}

int sl_ring_pop(sl_ring_t *r, void *ret)
{
    if (r->len == 0) {
        return -ENOENT;
    }
    if (ret != NULL) {
        memcpy(ret, r->buf + r->head * r->elem, r->elem);
    }
    r->head = (r->head + 1) % r->cap;
    r->len--;
    return 0;
}

void *sl_ring_front(const sl_ring_t *r)
{
    return r->len > 0 ? r->buf + r->head * r->elem : NULL;
}

void *sl_ring_at(const sl_ring_t *r, size_t i)
{
    return i < r->len ? r->buf + ((r->head + i) % r->cap) * r->elem : NULL;
}
