/* The client's live splits: a table with open addressing on the split id and
 * backward-shift deletion, so lookups stay O(1) however long the job runs;
 * each split's state (client_impl.h cl_split_state_e) with its transitions
 * in cl_split_on; the id lists they feed. Called with job->mu held, from the
 * consumer (samples batched and taken) and the control thread (assignments,
 * answers). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"

static size_t slot_of(uint64_t id)
{
    return (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 48) % CL_MAX_SPLITS;
}

/* The slot holding id, else the free slot that ends its probe run; NULL
 * when the table is full without it. */
static cl_split_t *probe(struct sluice_job *job, uint64_t id)
{
    size_t i = slot_of(id);
    for (size_t n = 0; n < CL_MAX_SPLITS; n++) {
        cl_split_t *s = &job->splits[i];
        if (s->state == CL_SPLIT_FREE || s->id == id) {
            return s;
        }
        i = (i + 1) % CL_MAX_SPLITS;
    }
    return NULL;
}

cl_split_t *cl_split_find(struct sluice_job *job, uint64_t id)
{
    cl_split_t *s = probe(job, id);
    return s != NULL && s->state != CL_SPLIT_FREE ? s : NULL;
}

cl_split_t *cl_split_add(struct sluice_job *job, uint64_t id)
{
    cl_split_t *s = probe(job, id);
    if (s == NULL) {
        snprintf(job->failure, sizeof(job->failure),
                 "more than %d live splits: raise split_size", CL_MAX_SPLITS);
        return NULL;
    }
    if (s->state == CL_SPLIT_FREE) {
        *s = (cl_split_t){.id = id, .owner = UINT64_MAX, .state = CL_SPLIT_HEARD};
    }
    return s;
}

void cl_split_remove(struct sluice_job *job, cl_split_t *s)
{
    size_t i = (size_t)(s - job->splits);
    job->splits[i].state = CL_SPLIT_FREE;
    /* Backward shift: pull later entries of the probe run into the hole. */
    size_t j = i;
    for (;;) {
        j = (j + 1) % CL_MAX_SPLITS;
        if (job->splits[j].state == CL_SPLIT_FREE) {
            return;
        }
        size_t home = slot_of(job->splits[j].id);
        /* Entry j may move to hole i if its home is not in (i, j]. */
        int between = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!between) {
            job->splits[i] = job->splits[j];
            job->splits[j].state = CL_SPLIT_FREE;
            i = j;
        }
    }
}

/* Queues s's id on q and moves it to state; out of memory fails the job. */
static void queue(struct sluice_job *job, cl_split_t *s, cl_ids_t *q, cl_split_state_e state)
{
    if (cl_ids_push(q, s->id) < 0) {
        snprintf(job->failure, sizeof(job->failure), "out of memory queueing acks");
        return;
    }
    s->state = state;
    if (q->n == 1) {
        cl_control_due(job); /* the dispatcher frees the split's credit on it */
    }
}

void cl_split_on(struct sluice_job *job, cl_split_t *s, cl_split_ev_e ev)
{
    if (s->state == CL_SPLIT_ACKED) {
        return; /* done with: later copies and answers change nothing */
    }
    switch (ev) {
    case CL_SPLIT_EV_LISTED:
        /* HEARD: the caller has set the range. RECEIVED: the dispatcher
         * took it back (a returned worker) and hands it out anew: its slot
         * is to be freed again. */
        if (s->state == CL_SPLIT_HEARD || s->state == CL_SPLIT_RECEIVED) {
            s->state = CL_SPLIT_OPEN;
        }
        break;
    case CL_SPLIT_EV_ADDED:
        s->added++;
        break;
    case CL_SPLIT_EV_DONE:
        s->done++;
        break;
    case CL_SPLIT_EV_REPORTED:
        if (s->state == CL_SPLIT_RECEIVING) {
            s->state = CL_SPLIT_RECEIVED;
        }
        break;
    }
    if (s->state == CL_SPLIT_HEARD) {
        return; /* complete only once its range is known */
    }
    uint64_t size = s->end - s->begin;
    if (s->done >= size) {
        queue(job, s, &job->acks, CL_SPLIT_ACKED);
    } else if (job->ack_on_pop && s->state == CL_SPLIT_OPEN && s->added >= size) {
        queue(job, s, &job->recvd, CL_SPLIT_RECEIVING);
    }
}

int cl_ids_push(cl_ids_t *q, uint64_t id)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        uint64_t *p = realloc(q->v, cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        q->v = p;
        q->cap = cap;
    }
    q->v[q->n++] = id;
    return 0;
}

void cl_ids_drop(cl_ids_t *q, size_t n)
{
    if (n == 0) {
        return; /* v may be NULL */
    }
    memmove(q->v, q->v + n, (q->n - n) * sizeof(*q->v));
    q->n -= n;
}

void cl_ids_free(cl_ids_t *q)
{
    free(q->v);
    *q = (cl_ids_t){0};
}
