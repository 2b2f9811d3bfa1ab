/* order_ahead: the next epoch's order computed on a thread of its own, so a
 * costly schedule (balanced or packed batching: common/order/balance.h,
 * pack.h; seconds for a large data set) is ready when the training loop
 * reaches the epoch instead of stalling it there. One epoch ahead, one
 * thread, one order buffer: bounded. The line (line.c) asks for epoch e + 1
 * when it starts using epoch e, and takes it when it gets there; whatever
 * is not ready by then it computes itself, as without this.
 *
 * Thread: the line's (the consumer's) calls; the computing thread runs only
 * fn, which must read nothing the consumer writes. */
#ifndef CL_ORDER_AHEAD_H
#define CL_ORDER_AHEAD_H

#include <stdint.h>

/* One epoch's order: positions -> sample indices (NULL = no buffer), and
 * for packed batching each global step's tokens over every rank. */
typedef struct cl_order_s {
    uint64_t epoch;
    uint64_t *order;
    uint64_t *step_tokens;
} cl_order_t;

/* Computes epoch's order into o, allocating o's buffers if NULL. 0 or a
 * negative errno. Runs on the ahead thread. */
typedef int (*cl_ahead_fn)(const void *arg, uint64_t epoch, cl_order_t *o);

typedef struct cl_ahead_s cl_ahead_t;

/* Starts the thread. 0, -ENOMEM, or pthread_create's error negated. */
int cl_ahead_new(cl_ahead_fn fn, const void *arg, cl_ahead_t **ret);
/* Asks for epoch (ignored while another is being computed). */
void cl_ahead_request(cl_ahead_t *a, uint64_t epoch);
/* Epoch's order if it was asked for: waits while it is being computed,
 * then swaps it into o (o's old buffers go to the thread for reuse).
 * Returns 1 when o now holds it, 0 when it was not asked for or failed. */
int cl_ahead_take(cl_ahead_t *a, uint64_t epoch, cl_order_t *o);
/* Stops and joins the thread (waits for a computation in progress). NULL ok. */
void cl_ahead_free(cl_ahead_t *a);

#endif
