#include "common/engine/batcher.h"

#include "common/engine/bigbuf.h"
#include "common/engine/bufpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A sample waiting in the heap for its turn: a sl_sample_t without its URL
 * versions (the batcher ignores them), so that reordering moves 88 bytes
 * a sample, not 608. */
typedef struct {
    uint64_t epoch, position, index;
    int32_t label;
    int skip;
    uint64_t split_id;
    sl_tensor_t t;
} held_t;

typedef struct {
    held_t *v;
    size_t n, cap;
} vec_t;

/* A sample of the batch being built: its bytes are either its own tensor
 * or, when inbuf, already in place in the epoch's batch buffer at off. */
typedef struct {
    sl_sample_t s;
    size_t off;
    int inbuf;
} slot_t;

typedef struct {
    slot_t *v;
    size_t n, cap;
} acc_t;

typedef struct {
    uint64_t epoch;
    uint64_t n;
    uint64_t accepted;
    uint64_t released; /* deterministic: next position to release */
    uint8_t *seen;     /* bitmap of accepted positions; freed once complete */
    int complete;      /* every position accepted and released */
    acc_t acc;         /* samples of the batch being built */
    /* The batch being built, assembled in place: batch_size slots of
     * slot_bytes, the first used bytes written. Started by the batch's first
     * pixel sample; samples of another size keep their own buffers and the
     * batch is then concatenated at emit (a copy). */
    uint8_t *buf;
    size_t slot_bytes, buf_cap, used;
} epoch_t;

typedef struct batch_node_s {
    sl_batch_t *batch;
    struct batch_node_s *next;
} batch_node_t;

struct sl_batcher_s {
    uint32_t batch_size;
    int drop_last;
    int deterministic;
    int aligned;     /* batches end at every batch_size-th position (packs) */
    epoch_t *epochs; /* declared epochs in increasing order */
    size_t nepochs, capepochs;
    vec_t heap; /* deterministic: min-heap on (epoch, position) */
    batch_node_t *ready_head, *ready_tail;
    sl_batcher_stats_t stats;
    int track_drops;
    uint64_t *dropped; /* split ids of drop_last-discarded samples, not yet taken */
    size_t ndropped, capdropped;
    sl_bufpool_t *pool; /* NULL if it could not be made: plain malloc/free */
};

static int vec_push(vec_t *v, sl_sample_t *s)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        held_t *p = realloc(v->v, cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = (held_t){.epoch = s->epoch,
                            .position = s->position,
                            .index = s->index,
                            .label = s->label,
                            .skip = s->skip,
                            .split_id = s->split_id,
                            .t = s->t};
    sl_tensor_init(&s->t); /* the data now belongs to the vector */
    return 0;
}

static void vec_clear(vec_t *v)
{
    for (size_t i = 0; i < v->n; i++) {
        sl_tensor_free(&v->v[i].t);
    }
    v->n = 0;
}

static void vec_free(vec_t *v)
{
    vec_clear(v);
    free(v->v);
    memset(v, 0, sizeof(*v));
}

static int acc_push(acc_t *a, sl_sample_t *s, size_t off, int inbuf)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        slot_t *p = realloc(a->v, cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = (slot_t){.s = *s, .off = off, .inbuf = inbuf};
    sl_tensor_init(&s->t); /* the data, if any, now belongs to the slot */
    return 0;
}

/* Empties the batch being built (its samples' bytes and the buffer). */
static void acc_clear(epoch_t *e, sl_bufpool_t *pool)
{
    for (size_t i = 0; i < e->acc.n; i++) {
        sl_tensor_free(&e->acc.v[i].s.t);
    }
    e->acc.n = 0;
    if (e->buf != NULL && pool != NULL) {
        sl_bufpool_put(pool, e->buf, e->buf_cap);
    } else {
        free(e->buf);
    }
    e->buf = NULL;
    e->slot_bytes = e->buf_cap = e->used = 0;
}

static void acc_free(epoch_t *e, sl_bufpool_t *pool)
{
    acc_clear(e, pool);
    free(e->acc.v);
    memset(&e->acc, 0, sizeof(e->acc));
}

sl_batcher_t *sl_batcher_new(uint32_t batch_size, int drop_last, int deterministic)
{
    if (batch_size == 0) {
        return NULL;
    }
    sl_batcher_t *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return NULL;
    }
    b->batch_size = batch_size;
    b->pool = sl_bufpool_new();
    b->drop_last = drop_last;
    b->deterministic = deterministic;
    return b;
}

void sl_batcher_free(sl_batcher_t *b)
{
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < b->nepochs; i++) {
        free(b->epochs[i].seen);
        acc_free(&b->epochs[i], b->pool);
    }
    free(b->epochs);
    free(b->dropped);
    vec_free(&b->heap);
    if (b->pool != NULL) {
        sl_bufpool_unref(b->pool);
    }
    while (b->ready_head != NULL) {
        batch_node_t *n = b->ready_head;
        b->ready_head = n->next;
        sl_batch_free(n->batch);
        free(n);
    }
    free(b);
}

static epoch_t *find_epoch(const sl_batcher_t *b, uint64_t epoch)
{
    for (size_t i = 0; i < b->nepochs; i++) {
        if (b->epochs[i].epoch == epoch) {
            return &b->epochs[i];
        }
    }
    return NULL;
}

int sl_batcher_begin_epoch(sl_batcher_t *b, uint64_t epoch, uint64_t n)
{
    if (b->nepochs > 0 && epoch <= b->epochs[b->nepochs - 1].epoch) {
        return -EINVAL;
    }
    if (b->nepochs == b->capepochs) {
        size_t cap = b->capepochs ? b->capepochs * 2 : 8;
        epoch_t *p = realloc(b->epochs, cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        b->epochs = p;
        b->capepochs = cap;
    }
    epoch_t *e = &b->epochs[b->nepochs];
    memset(e, 0, sizeof(*e));
    e->epoch = epoch;
    e->n = n;
    if (n > 0) {
        e->seen = calloc((n + 7) / 8, 1);
        if (e->seen == NULL) {
            return -ENOMEM;
        }
    } else {
        e->complete = 1;
    }
    b->nepochs++;
    return 0;
}

static void free_meta_data(sl_batch_t *batch)
{
    free(batch->meta);
    if (batch->pool != NULL) {
        if (batch->data != NULL) {
            sl_bufpool_put(batch->pool, batch->data, batch->cap);
        }
        sl_bufpool_unref(batch->pool);
    } else {
        free(batch->data);
    }
    free(batch);
}

void sl_batch_free(sl_batch_t *batch)
{
    if (batch != NULL) {
        free_meta_data(batch);
    }
}

/* Moves the accumulated samples into one contiguous batch on the ready list. */
/* At most batch_size - 1 per epoch, taken by the producer as it goes. */
static int remember_drops(sl_batcher_t *b, const acc_t *acc)
{
    if (!b->track_drops) {
        return 0;
    }
    if (b->ndropped + acc->n > b->capdropped) {
        size_t cap = (b->ndropped + acc->n) * 2;
        uint64_t *p = realloc(b->dropped, cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        b->dropped = p;
        b->capdropped = cap;
    }
    for (size_t i = 0; i < acc->n; i++) {
        b->dropped[b->ndropped++] = acc->v[i].s.split_id;
    }
    return 0;
}

void sl_batcher_track_drops(sl_batcher_t *b) { b->track_drops = 1; }

int sl_batcher_align(sl_batcher_t *b)
{
    if (!b->deterministic) {
        return -EINVAL; /* positions end batches only when released in order */
    }
    b->aligned = 1;
    b->drop_last = 0; /* a pack holds what fits: short is its normal size */
    return 0;
}

static int emit(sl_batcher_t *b, epoch_t *e);

/* Aligned: the position just released ends its batch's span. */
static int end_of_span(sl_batcher_t *b, epoch_t *e)
{
    return b->aligned && e->released % b->batch_size == 0 ? emit(b, e) : 0;
}

size_t sl_batcher_take_dropped(sl_batcher_t *b, uint64_t *out, size_t max)
{
    size_t n = b->ndropped < max ? b->ndropped : max;
    if (n == 0) {
        return 0;
    }
    memcpy(out, b->dropped, n * sizeof(*out));
    memmove(b->dropped, b->dropped + n, (b->ndropped - n) * sizeof(*out));
    b->ndropped -= n;
    return n;
}

static int emit(sl_batcher_t *b, epoch_t *e)
{
    acc_t *acc = &e->acc;
    if (acc->n == 0) {
        return 0;
    }
    if (acc->n < b->batch_size && b->drop_last) {
        int rc = remember_drops(b, acc);
        acc_clear(e, b->pool);
        return rc;
    }
    size_t total = 0;
    int all_inbuf = 1;
    for (size_t i = 0; i < acc->n; i++) {
        total += acc->v[i].s.t.nbytes;
        all_inbuf &= acc->v[i].inbuf;
    }
    sl_batch_t *batch = calloc(1, sizeof(*batch));
    batch_node_t *node = calloc(1, sizeof(*node));
    if (batch != NULL) {
        batch->meta = calloc(acc->n, sizeof(*batch->meta));
        /* Assembled in place: the buffer becomes the batch (the common case:
         * no copy). Otherwise concatenate. */
        if (all_inbuf && e->buf != NULL) {
            batch->data = e->buf;
            batch->cap = e->buf_cap;
        } else {
            batch->cap = total ? total : 1;
            batch->data = sl_bufpool_get(b->pool, batch->cap);
        }
    }
    if (batch == NULL || node == NULL || batch->meta == NULL || batch->data == NULL) {
        if (batch != NULL) {
            if (batch->data == e->buf) {
                batch->data = NULL;
            }
            if (b->pool != NULL) {
                sl_bigbuf_free(batch->data, batch->cap); /* sl_bufpool_get's */
            } else {
                free(batch->data);
            }
            batch->data = NULL;
            free_meta_data(batch);
        }
        free(node);
        return -ENOMEM;
    }
    batch->epoch = e->epoch;
    batch->n = (uint32_t)acc->n;
    batch->nbytes = total;
    batch->uniform = 1;
    size_t off = 0;
    for (size_t i = 0; i < acc->n; i++) {
        const slot_t *sl = &acc->v[i];
        const sl_sample_t *s = &sl->s;
        sl_sample_meta_t *m = &batch->meta[i];
        *m = (sl_sample_meta_t){.index = s->index, .position = s->position, .label = s->label,
                                .dtype = s->t.dtype, .layout = s->t.layout, .h = s->t.h,
                                .w = s->t.w, .c = s->t.c, .offset = off, .nbytes = s->t.nbytes,
                                .split_id = s->split_id};
        if (batch->data != e->buf) {
            memcpy(batch->data + off, sl->inbuf ? e->buf + sl->off : s->t.data, s->t.nbytes);
        }
        off += s->t.nbytes;
        const sl_sample_meta_t *m0 = &batch->meta[0];
        if (m->dtype != m0->dtype || m->layout != m0->layout || m->h != m0->h || m->w != m0->w ||
            m->c != m0->c || m->nbytes != m0->nbytes) {
            batch->uniform = 0;
        }
    }
    if (batch->data == e->buf) {
        e->buf = NULL; /* the batch owns it now (a short one keeps the spare slots) */
    }
    if (b->pool != NULL) {
        sl_bufpool_ref(b->pool);
        batch->pool = b->pool;
    }
    acc_clear(e, b->pool);
    node->batch = batch;
    if (b->ready_tail != NULL) {
        b->ready_tail->next = node;
    } else {
        b->ready_head = node;
    }
    b->ready_tail = node;
    b->stats.batches++;
    return 0;
}

/* Where a delivered sample of n bytes goes in e's batch being built: its
 * slot in the batch buffer (started here for the batch's first pixel
 * sample), or NULL when it must keep a buffer of its own. */
static uint8_t *slot_for(sl_batcher_t *b, epoch_t *e, const sl_sample_t *s)
{
    size_t n = s->t.nbytes;
    if (n == 0 || s->t.dtype == SL_DT_BYTES || s->t.dtype == SL_DT_RECORD) {
        return NULL; /* encoded files and records differ in size: no fixed slots */
    }
    if (e->buf == NULL && e->acc.n == 0) {
        if (n > SIZE_MAX / b->batch_size) {
            return NULL;
        }
        e->buf = sl_bufpool_get(b->pool, n * b->batch_size);
        if (e->buf == NULL) {
            return NULL; /* the sample keeps its buffer; emit concatenates */
        }
        e->slot_bytes = n;
        e->buf_cap = n * b->batch_size;
        e->used = 0;
    }
    if (e->buf == NULL || n != e->slot_bytes || e->buf_cap - e->used < n) {
        return NULL;
    }
    return e->buf + e->used;
}

/* Appends one released sample to its epoch's batch; emits full batches.
 * With fill, s has no bytes yet: fill writes them, once, to their final
 * place (the batch buffer, or a buffer of the sample's own). */
static int release(sl_batcher_t *b, epoch_t *e, sl_sample_t *s, sl_batcher_fill_fn fill,
                   void *arg)
{
    if (s->skip >= 0) {
        if (s->skip < SL_SKIP__COUNT) {
            b->stats.skipped[s->skip]++;
        }
        sl_tensor_free(&s->t);
        return 0;
    }
    uint8_t *dst = slot_for(b, e, s);
    int rc;
    if (dst != NULL) {
        if (fill != NULL) {
            fill(arg, dst, s->t.nbytes);
        } else {
            memcpy(dst, s->t.data, s->t.nbytes); /* the copy emit would have made */
        }
        free(s->t.data); /* the shape stays: the batch's meta is built from it */
        s->t.data = NULL;
        s->t.cap = 0;
        rc = acc_push(&e->acc, s, e->used, 1);
        if (rc == 0) {
            e->used += e->slot_bytes;
        }
    } else {
        if (fill != NULL) {
            s->t.data = malloc(s->t.nbytes);
            if (s->t.data == NULL) {
                return -ENOMEM;
            }
            s->t.cap = s->t.nbytes;
            fill(arg, s->t.data, s->t.nbytes);
        }
        rc = acc_push(&e->acc, s, 0, 0);
    }
    if (rc < 0) {
        return rc;
    }
    b->stats.delivered++;
    if (e->acc.n == b->batch_size) {
        return emit(b, e);
    }
    return 0;
}

static int heap_less(const held_t *a, const held_t *c)
{
    return a->epoch < c->epoch || (a->epoch == c->epoch && a->position < c->position);
}

static int heap_push(vec_t *h, sl_sample_t *s)
{
    int rc = vec_push(h, s);
    if (rc < 0) {
        return rc;
    }
    size_t i = h->n - 1;
    while (i > 0 && heap_less(&h->v[i], &h->v[(i - 1) / 2])) {
        held_t t = h->v[i];
        h->v[i] = h->v[(i - 1) / 2];
        h->v[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return 0;
}

static void heap_pop(vec_t *h, sl_sample_t *ret)
{
    const held_t *top = &h->v[0];
    *ret = (sl_sample_t){.epoch = top->epoch,
                         .position = top->position,
                         .index = top->index,
                         .label = top->label,
                         .skip = top->skip,
                         .split_id = top->split_id,
                         .t = top->t};
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && heap_less(&h->v[l], &h->v[m])) {
            m = l;
        }
        if (r < h->n && heap_less(&h->v[r], &h->v[m])) {
            m = r;
        }
        if (m == i) {
            break;
        }
        held_t t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
}

static void finish_epoch(epoch_t *e)
{
    free(e->seen);
    e->seen = NULL;
    e->complete = 1;
}

/* Deterministic: releases from the heap while its top is the next expected
 * (epoch, position); epochs complete in order. */
static int drain_ordered(sl_batcher_t *b)
{
    for (size_t i = 0; i < b->nepochs; i++) {
        epoch_t *e = &b->epochs[i];
        if (e->complete) {
            continue;
        }
        while (e->released < e->n && b->heap.n > 0 && b->heap.v[0].epoch == e->epoch &&
               b->heap.v[0].position == e->released) {
            sl_sample_t s;
            heap_pop(&b->heap, &s);
            e->released++;
            int rc = release(b, e, &s, NULL, NULL);
            if (rc == 0) {
                rc = end_of_span(b, e);
            }
            if (rc < 0) {
                sl_tensor_free(&s.t);
                return rc;
            }
        }
        if (e->released < e->n) {
            return 0; /* later epochs wait for this one */
        }
        int rc = emit(b, e);
        finish_epoch(e);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* Deterministic: is s the very next sample to release (the first
 * incomplete epoch's next position)? Then it skips the heap and, with fill,
 * is written straight into its batch. */
static int next_in_order(const sl_batcher_t *b, const epoch_t *e, const sl_sample_t *s)
{
    for (size_t i = 0; i < b->nepochs; i++) {
        if (!b->epochs[i].complete) {
            return &b->epochs[i] == e && s->position == e->released;
        }
    }
    return 0;
}

static int add(sl_batcher_t *b, sl_sample_t *s, sl_batcher_fill_fn fill, void *arg)
{
    epoch_t *e = find_epoch(b, s->epoch);
    if (e == NULL) {
        if (b->nepochs > 0 && s->epoch < b->epochs[0].epoch) {
            b->stats.duplicates++;
            sl_tensor_free(&s->t);
            return 1;
        }
        return -EINVAL;
    }
    if (s->position >= e->n) {
        return -EINVAL;
    }
    if (e->complete || (e->seen[s->position / 8] & (1u << (s->position % 8)))) {
        b->stats.duplicates++;
        sl_tensor_free(&s->t);
        return 1;
    }
    e->seen[s->position / 8] |= (uint8_t)(1u << (s->position % 8));
    e->accepted++;
    int rc;
    if (b->deterministic) {
        if (next_in_order(b, e, s)) {
            e->released++;
            rc = release(b, e, s, fill, arg);
            if (rc == 0) {
                rc = end_of_span(b, e);
            }
        } else {
            if (fill != NULL) { /* waits in the heap: it needs bytes of its own */
                s->t.data = malloc(s->t.nbytes);
                if (s->t.data == NULL) {
                    return -ENOMEM;
                }
                s->t.cap = s->t.nbytes;
                fill(arg, s->t.data, s->t.nbytes);
            }
            rc = heap_push(&b->heap, s);
        }
        if (rc == 0) {
            rc = drain_ordered(b);
        }
        return rc;
    }
    rc = release(b, e, s, fill, arg);
    if (rc == 0 && e->accepted == e->n) {
        rc = emit(b, e);
        finish_epoch(e);
    }
    return rc;
}

int sl_batcher_add(sl_batcher_t *b, sl_sample_t *s) { return add(b, s, NULL, NULL); }

int sl_batcher_add_fill(sl_batcher_t *b, sl_sample_t *s, sl_batcher_fill_fn fill, void *arg)
{
    if (fill == NULL || s->skip >= 0 || s->t.data != NULL || s->t.nbytes == 0 ||
        s->t.nbytes > SL_TENSOR_MAX_BYTES) {
        return -EINVAL;
    }
    return add(b, s, fill, arg);
}

int64_t sl_batcher_mark_done(sl_batcher_t *b, uint64_t epoch, uint64_t begin, uint64_t end)
{
    const epoch_t *e = find_epoch(b, epoch);
    if (e == NULL || begin > end || end > e->n) {
        return -EINVAL;
    }
    int64_t n = 0;
    for (uint64_t p = begin; p < end; p++) {
        /* SL_SKIP__COUNT: a skip that release() counts under no reason. */
        sl_sample_t s = {.epoch = epoch, .position = p, .skip = SL_SKIP__COUNT};
        sl_tensor_init(&s.t);
        int rc = sl_batcher_add(b, &s);
        if (rc < 0) {
            return rc;
        }
        n += rc == 0;
    }
    return n;
}

int sl_batcher_seen(const sl_batcher_t *b, uint64_t epoch, uint64_t position)
{
    const epoch_t *e = find_epoch(b, epoch);
    if (e == NULL) {
        return b->nepochs > 0 && epoch < b->epochs[0].epoch;
    }
    if (e->complete) {
        return 1;
    }
    return position < e->n && (e->seen[position / 8] & (1u << (position % 8))) != 0;
}

sl_batch_t *sl_batcher_pop(sl_batcher_t *b)
{
    batch_node_t *n = b->ready_head;
    if (n == NULL) {
        return NULL;
    }
    b->ready_head = n->next;
    if (b->ready_head == NULL) {
        b->ready_tail = NULL;
    }
    sl_batch_t *batch = n->batch;
    free(n);
    return batch;
}

int sl_batcher_epoch_done(const sl_batcher_t *b, uint64_t epoch)
{
    for (const batch_node_t *n = b->ready_head; n != NULL; n = n->next) {
        if (n->batch->epoch == epoch) {
            return 0;
        }
    }
    for (size_t i = b->nepochs; i-- > 0;) { /* the asked-for epochs are the recent ones */
        if (b->epochs[i].epoch == epoch) {
            return b->epochs[i].complete;
        }
    }
    return 0;
}

int sl_batcher_done(const sl_batcher_t *b)
{
    if (b->ready_head != NULL) {
        return 0;
    }
    for (size_t i = 0; i < b->nepochs; i++) {
        if (!b->epochs[i].complete) {
            return 0;
        }
    }
    return 1;
}

void sl_batcher_get_stats(const sl_batcher_t *b, sl_batcher_stats_t *ret)
{
    *ret = b->stats;
    if (b->pool != NULL) {
        ret->buffers_made = sl_bufpool_made(b->pool);
    }
}
