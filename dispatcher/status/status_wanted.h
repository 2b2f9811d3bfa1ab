/* status_wanted: the workers the cluster should have, per worker class --
 * the number an autoscaler scales the worker Deployment on
 * (`sluice_workers_wanted{class="..."}` in /metrics, "workers_wanted" in
 * /status; docs/reference/status.md, docs/deploy.md "Autoscaling").
 *
 * Each planned job says, per class of its plan's input, how many workers of
 * that class it wants (planner.h disp_planner_what-if: the fewest within 1 %
 * of what unlimited workers of the class would give it). The raw figure of
 * a class is the sum over the open, active jobs, capped at the dispatcher's
 * max_workers. What is published follows it with hysteresis so that a
 * scaler does not flap while plans settle:
 *   - up at once: a job that wants more workers waits for none;
 *   - down only once the raw figure has stayed below the published one for
 *     DISP_WANTED_DOWN_MS without a break, and then to the highest raw
 *     figure seen in that time (a dip of a few seconds -- a job between
 *     epochs, a re-plan -- never scales down).
 * A class no open job names counts 0 (and goes down as above); it is kept
 * while it publishes more than 0 and for DISP_WANTED_FORGET_MS after, at
 * most DISP_WANTED_MAX_CLASSES classes (more are not published).
 *
 * Runs under d->mu and the history's mutex (status.h), once a second from
 * disp_status_sample; the step rule is pure (disp_wanted_step). */
#ifndef DISP_STATUS_WANTED_H
#define DISP_STATUS_WANTED_H

#include <stdint.h>

#include "dispatcher/disp.h"

#define DISP_WANTED_MAX_CLASSES 64
#define DISP_WANTED_DOWN_MS 60000
#define DISP_WANTED_FORGET_MS (3600 * 1000)
#define DISP_WANTED_KEY_MAX 128

typedef struct disp_wanted_class_s {
    char key[DISP_WANTED_KEY_MAX];
    uint32_t raw;           /* the jobs' sum at the last sample */
    uint32_t published;     /* what the gauge shows */
    uint32_t jobs;          /* jobs that named the class at the last sample */
    int64_t below_since_ms; /* raw < published since then; 0 = not below */
    uint32_t below_peak;    /* the highest raw since below_since_ms */
    int64_t seen_ms;        /* a job last named it */
} disp_wanted_class_t;

typedef struct disp_wanted_s {
    disp_wanted_class_t c[DISP_WANTED_MAX_CLASSES];
    uint32_t n;
} disp_wanted_t;

/* One sample of the rule for one class: raw now at now_ms. Returns the
 * published figure. */
uint32_t disp_wanted_step(disp_wanted_class_t *c, uint32_t raw, int64_t now_ms);

/* Sums the wants of d's open jobs per class and steps every class (d->mu
 * held). */
void disp_wanted_sample(disp_wanted_t *w, const disp_t *d, int64_t now_ms);

#endif
