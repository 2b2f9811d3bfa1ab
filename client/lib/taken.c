/* taken: per-epoch consumed ranges (client/lib/taken.h). */
#include "client/lib/taken.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void cl_taken_init(cl_taken_t *t, uint64_t first_epoch)
{
    memset(t, 0, sizeof(*t));
    t->done_below = first_epoch;
}

void cl_taken_clear(cl_taken_t *t)
{
    for (size_t i = 0; i < t->nep; i++) {
        free(t->ep[i].r);
    }
    t->nep = 0;
}

/* The epoch's entry, made (in order) when missing; NULL when full. */
static cl_taken_epoch_t *entry(cl_taken_t *t, uint64_t epoch)
{
    size_t i = 0;
    while (i < t->nep && t->ep[i].epoch < epoch) {
        i++;
    }
    if (i < t->nep && t->ep[i].epoch == epoch) {
        return &t->ep[i];
    }
    if (t->nep == CL_TAKEN_MAX_EPOCHS) {
        return NULL;
    }
    memmove(&t->ep[i + 1], &t->ep[i], (t->nep - i) * sizeof(t->ep[0]));
    t->nep++;
    t->ep[i] = (cl_taken_epoch_t){.epoch = epoch};
    return &t->ep[i];
}

int cl_taken_add(cl_taken_t *t, uint64_t epoch, uint64_t begin, uint64_t end)
{
    if (epoch < t->done_below || begin >= end) {
        return 0;
    }
    cl_taken_epoch_t *e = entry(t, epoch);
    if (e == NULL) {
        t->overflow = 1;
        return -E2BIG;
    }
    if (e->complete) {
        return 0;
    }
    /* First range ending at or after begin: the one it may join. */
    size_t lo = 0, hi = e->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e->r[mid].end < begin) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    size_t j = lo;
    while (j < e->n && e->r[j].begin <= end) { /* overlapping or adjacent: merged */
        begin = e->r[j].begin < begin ? e->r[j].begin : begin;
        end = e->r[j].end > end ? e->r[j].end : end;
        j++;
    }
    if (j == lo) { /* a new range at lo */
        if (e->n == CL_TAKEN_MAX_RANGES) {
            t->overflow = 1;
            return -E2BIG;
        }
        if (e->n == e->cap) {
            size_t cap = e->cap ? e->cap * 2 : 16;
            cl_range_t *r = realloc(e->r, cap * sizeof(*r));
            if (r == NULL) {
                t->overflow = 1;
                return -ENOMEM;
            }
            e->r = r;
            e->cap = cap;
        }
        memmove(&e->r[lo + 1], &e->r[lo], (e->n - lo) * sizeof(e->r[0]));
        e->n++;
    } else if (j > lo + 1) { /* ranges lo..j-1 become one */
        memmove(&e->r[lo + 1], &e->r[j], (e->n - j) * sizeof(e->r[0]));
        e->n -= j - lo - 1;
    }
    e->r[lo] = (cl_range_t){begin, end};
    return 0;
}

void cl_taken_complete(cl_taken_t *t, uint64_t epoch)
{
    if (epoch < t->done_below) {
        return;
    }
    cl_taken_epoch_t *e = entry(t, epoch);
    if (e == NULL) {
        t->overflow = 1;
        return;
    }
    e->complete = 1;
    free(e->r);
    e->r = NULL;
    e->n = e->cap = 0;
    /* Drop complete epochs at the front; done_below follows them. */
    size_t k = 0;
    while (k < t->nep && t->ep[k].complete && t->ep[k].epoch == t->done_below) {
        t->done_below++;
        k++;
    }
    memmove(&t->ep[0], &t->ep[k], (t->nep - k) * sizeof(t->ep[0]));
    t->nep -= k;
}

uint64_t cl_taken_count(const cl_taken_t *t, uint64_t epoch, uint64_t limit)
{
    for (size_t i = 0; i < t->nep; i++) {
        if (t->ep[i].epoch != epoch) {
            continue;
        }
        uint64_t c = 0;
        for (size_t k = 0; k < t->ep[i].n; k++) {
            uint64_t b = t->ep[i].r[k].begin, e = t->ep[i].r[k].end;
            e = e < limit ? e : limit;
            c += e > b ? e - b : 0;
        }
        return c;
    }
    return 0;
}
