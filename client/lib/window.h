/* window: the consumer's report window (rates.c): the stall and the
 * delivery rate one ReportRates carries, from the consumer's notes of its
 * sluice_next_batch calls. Definitions (docs/reference/status.md "Rates"):
 *
 * wait fraction: of the window's wall time [start, end), the part during
 *   which the training loop was inside next_batch. Calls are clipped to the
 *   window and overlapping calls count once, so it is in [0, 1] by
 *   construction. A call that straddles the report counts its first part
 *   in this window and the rest in the next (a call still in progress
 *   counts up to the report), where the old figure counted the whole call
 *   in the window it ended in against only that window's wall time (and
 *   the first window counted every call since the job opened): 1.03, 1.27.
 *
 * rate: samples handed out per second, measured from hand-out to hand-out
 *   over the batches of the last CL_WINDOW_RATE_SPAN seconds: the samples
 *   of the batches after the oldest one in that span over the time from it
 *   to the newest (when the span holds one batch, from the one before).
 *   Samples arrive in whole batches, so a 1 s window at 115 samples/s in
 *   batches of 64 holds one or two of them and samples over wall read 64 or
 *   128 (59.8 once the window ran 1.07 s); spans from batch to batch hold
 *   whole batches and read 115, and a few seconds of them hide one late
 *   batch. A window without a hand-out reads at most one batch over the
 *   time since the last one (the rate falls while nothing comes); before two
 *   hand-outs it is samples over wall.
 *
 * Pure arithmetic on monotonic seconds. Not thread-safe: the caller
 * (rates.c) holds its lock. */
#ifndef CL_WINDOW_H
#define CL_WINDOW_H

#include <stdint.h>

#define CL_WINDOW_RATE_SPAN 3.0 /* seconds of hand-outs the rate spans */
#define CL_WINDOW_HANDOUTS 64   /* hand-outs kept: a fast loop's span is shorter */

typedef struct cl_window_handout_s {
    double t;       /* when next_batch returned the batch */
    uint64_t total; /* samples handed out since the start, this batch included */
} cl_window_handout_t;

typedef struct cl_window_acc_s {
    double start;        /* the window's start; 0 = not started */
    double covered;      /* wait counted up to here (never counted twice) */
    double wait;         /* inside next_batch, within the window */
    double outside;      /* outside next_batch: the loop's own time */
    uint32_t inside;     /* calls in progress */
    double inside_since; /* when the oldest call in progress began */
    double last_leave;   /* when next_batch last returned; 0 = never */
    uint64_t samples;    /* handed out in the window */
    uint64_t total;      /* handed out since the start */
    uint32_t last_n;     /* the size of the last batch handed out */
    /* the last hand-outs of batches (n > 0): a ring, oldest at head */
    cl_window_handout_t ho[CL_WINDOW_HANDOUTS];
    uint32_t ho_head, ho_len;
} cl_window_acc_t;

typedef struct cl_window_fig_s {
    double rate;          /* samples/s (above) */
    double wait_fraction; /* in [0, 1] (above) */
    double consumer;      /* the loop's own rate; 0 = unknown */
    uint64_t samples;     /* handed out in the window */
} cl_window_fig_t;

/* Starts the first window at now (calls before it do not count). */
void cl_window_start(cl_window_acc_t *w, double now);
/* A next_batch call began at t. */
void cl_window_enter(cl_window_acc_t *w, double t);
/* The call that began at t_enter returned at t_leave with n samples. */
void cl_window_leave(cl_window_acc_t *w, double t_enter, double t_leave, uint32_t n);
/* Ends the window at now: its figures in *ret; the next window starts. */
void cl_window_take(cl_window_acc_t *w, double now, cl_window_fig_t *ret);

#endif
