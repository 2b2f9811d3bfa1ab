/* status_wanted: see status_wanted.h. */
#include "dispatcher/status/status_wanted.h"

#include <stdio.h>
#include <string.h>

#include "dispatcher/core/jobs.h"
#include "dispatcher/planner/planner_job.h"

uint32_t disp_wanted_step(disp_wanted_class_t *c, uint32_t raw, int64_t now_ms)
{
    c->raw = raw;
    if (raw >= c->published) {
        c->published = raw; /* up at once */
        c->below_since_ms = 0;
        c->below_peak = 0;
        return c->published;
    }
    if (c->below_since_ms == 0) {
        c->below_since_ms = now_ms;
        c->below_peak = raw;
    } else if (raw > c->below_peak) {
        c->below_peak = raw;
    }
    if (now_ms - c->below_since_ms >= DISP_WANTED_DOWN_MS) {
        c->published = c->below_peak;
        /* Still below: the next stretch starts now, from this sample. */
        c->below_since_ms = raw < c->published ? now_ms : 0;
        c->below_peak = raw;
    }
    return c->published;
}

/* The record of class key; a new one when there is room (NULL when not). */
static disp_wanted_class_t *class_of(disp_wanted_t *w, const char *key)
{
    for (uint32_t i = 0; i < w->n; i++) {
        if (strcmp(w->c[i].key, key) == 0) {
            return &w->c[i];
        }
    }
    if (w->n == DISP_WANTED_MAX_CLASSES) {
        return NULL;
    }
    disp_wanted_class_t *c = &w->c[w->n++];
    memset(c, 0, sizeof(*c));
    snprintf(c->key, sizeof(c->key), "%s", key);
    return c;
}

void disp_wanted_sample(disp_wanted_t *w, const disp_t *d, int64_t now_ms)
{
    /* The jobs' sums, in 64 bits (capped below). */
    uint64_t sum[DISP_WANTED_MAX_CLASSES] = {0};
    for (uint32_t i = 0; i < w->n; i++) {
        w->c[i].jobs = 0;
    }
    for (size_t j = 0; j < d->jobs.n; j++) {
        const disp_job_t *job = d->jobs.jobs[j];
        const disp_pjob_t *pj = job->planner;
        if (pj == NULL || job->state != DISP_JOB_ACTIVE) {
            continue;
        }
        for (uint32_t k = 0; k < pj->nwhatif; k++) {
            disp_wanted_class_t *c = class_of(w, disp_pjob_class_key(pj, pj->whatif[k].cls));
            if (c != NULL) {
                sum[c - w->c] += pj->whatif[k].wanted;
                c->jobs++;
                c->seen_ms = now_ms;
            }
        }
    }
    uint64_t cap = d->cfg.max_workers > 0 ? (uint64_t)d->cfg.max_workers : UINT32_MAX;
    uint32_t k = 0;
    for (uint32_t i = 0; i < w->n; i++) {
        disp_wanted_class_t c = w->c[i];
        (void)disp_wanted_step(&c, (uint32_t)(sum[i] < cap ? sum[i] : cap), now_ms);
        /* Forget a class nobody has wanted for long and that publishes 0. */
        if (c.published > 0 || c.jobs > 0 || now_ms - c.seen_ms < DISP_WANTED_FORGET_MS) {
            w->c[k++] = c;
        }
    }
    w->n = k;
}
