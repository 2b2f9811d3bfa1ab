/* window: see window.h. */
#include "client/lib/window.h"

#include <string.h>

static double dmax(double a, double b) { return a > b ? a : b; }

void cl_window_start(cl_window_acc_t *w, double now)
{
    memset(w, 0, sizeof(*w));
    w->start = now;
    w->covered = now;
}

void cl_window_enter(cl_window_acc_t *w, double t)
{
    if (w->inside++ == 0) {
        w->inside_since = t;
    }
}

/* Counts [from, to) as wait unless already counted: segments never overlap
 * and never start before the window, so their sum is at most its length. */
static void count_wait(cl_window_acc_t *w, double from, double to)
{
    from = dmax(from, dmax(w->start, w->covered));
    if (to > from) {
        w->wait += to - from;
        w->covered = to;
    }
}

void cl_window_leave(cl_window_acc_t *w, double t_enter, double t_leave, uint32_t n)
{
    if (w->inside > 0) {
        w->inside--;
    }
    if (w->start == 0.0) {
        return; /* not started: before the first report's baseline */
    }
    double out_from = dmax(w->last_leave, w->start); /* the loop's own time, in the window */
    if (w->last_leave > 0.0 && t_enter > out_from) {
        w->outside += t_enter - out_from;
    }
    count_wait(w, t_enter, t_leave);
    w->last_leave = t_leave;
    if (n == 0) {
        return;
    }
    w->samples += n;
    w->total += n;
    w->last_n = n;
    uint32_t slot = (w->ho_head + w->ho_len) % CL_WINDOW_HANDOUTS;
    if (w->ho_len == CL_WINDOW_HANDOUTS) {
        w->ho_head = (w->ho_head + 1) % CL_WINDOW_HANDOUTS; /* the oldest goes */
    } else {
        w->ho_len++;
    }
    w->ho[slot] = (cl_window_handout_t){t_leave, w->total};
}

static const cl_window_handout_t *handout(const cl_window_acc_t *w, uint32_t back)
{
    return &w->ho[(w->ho_head + w->ho_len - 1 - back) % CL_WINDOW_HANDOUTS];
}

/* The rate (window.h): hand-out to hand-out where two hand-outs bound it. */
static double window_rate(const cl_window_acc_t *w, double now, double wall)
{
    if (w->ho_len < 2) {
        return (double)w->samples / wall;
    }
    const cl_window_handout_t *last = handout(w, 0);
    uint32_t k = 1; /* the oldest hand-out in the span, at least the one before */
    while (k + 1 < w->ho_len && handout(w, k + 1)->t >= last->t - CL_WINDOW_RATE_SPAN) {
        k++;
    }
    const cl_window_handout_t *from = handout(w, k);
    double rate = last->t > from->t ? (double)(last->total - from->total) / (last->t - from->t)
                                    : (double)w->samples / wall;
    if (last->t <= w->start && now > last->t) {
        /* Nothing in this window: the next batch would come now at best. */
        double bound = (double)w->last_n / (now - last->t);
        rate = rate < bound ? rate : bound;
    }
    return rate;
}

void cl_window_take(cl_window_acc_t *w, double now, cl_window_fig_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    double wall = now - w->start;
    if (w->start == 0.0 || wall <= 0.0) {
        return;
    }
    if (w->inside > 0) {
        count_wait(w, w->inside_since, now); /* the call in progress, so far */
    }
    ret->wait_fraction = w->wait / wall;
    /* The clocks of a call that returned while the window was being taken
     * may run a hair past now. */
    ret->wait_fraction = ret->wait_fraction > 1.0 ? 1.0 : ret->wait_fraction;
    ret->rate = window_rate(w, now, wall);
    ret->samples = w->samples;
    /* The consumer's own rate: samples over the time the loop spent outside
     * next_batch. A loop that is nearly always inside (waiting) says
     * nothing about how fast it could go: 0 = unknown. */
    ret->consumer = w->outside > 0.05 * wall && w->samples > 0 ? (double)w->samples / w->outside
                                                               : 0.0;
    w->start = now;
    w->covered = dmax(w->covered, now);
    w->wait = 0.0;
    w->outside = 0.0;
    w->samples = 0;
}
