/* planner_cache_cost: the measured read-back cost (planner_cache_cost.h). */
#include "dispatcher/planner/planner_cache_cost.h"

#include <math.h>

#include "dispatcher/planner/planner_cache.h"

static double fin(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

int disp_pc_cost_fit(const disp_pc_sums_t *s, disp_pc_cost_t *ret)
{
    double n = fin(s->n);
    if (n < 1.0 || !(fin(s->t) > 0.0)) {
        return -1;
    }
    double mb = fin(s->b) / n;
    double mt = s->t / n * 1e-9; /* s a hit */
    double var = fin(s->bb) / n - mb * mb;
    double cov = s->bt / n * 1e-9 - mb * mt;
    double a = 0.0, k = 0.0;
    if (var > DISP_PC_COST_MIN_CV * DISP_PC_COST_MIN_CV * mb * mb && cov > 0.0) {
        k = cov / var;
        a = mt - k * mb;
        if (a < 0.0) {
            /* The line passes below the origin: all of it per byte. */
            a = 0.0;
            k = mt / mb;
        }
    } else {
        /* One size (or no relation): the assumed model's shape, scaled to
         * the measured mean at the mean size. */
        double assumed = DISP_PC_ENTRY_SEC + DISP_PC_SEC_PER_BYTE * mb;
        a = mt * DISP_PC_ENTRY_SEC / assumed;
        k = mt * DISP_PC_SEC_PER_BYTE / assumed;
    }
    ret->have = 1;
    ret->entry_sec = a;
    ret->byte_sec = k;
    ret->hits = n;
    return 0;
}

static int close_due(disp_pc_costwin_t *w)
{
    disp_pc_sums_t d = {w->cum.n - w->start.n, w->cum.b - w->start.b, w->cum.t - w->start.t,
                        w->cum.bb - w->start.bb, w->cum.bt - w->start.bt};
    if (d.n < DISP_PC_COST_WINDOW) {
        return 0;
    }
    w->start = w->cum;
    /* A window with no time (a peer that does not time its hits): no figure
     * from it, the last one stays. */
    return disp_pc_cost_fit(&d, &w->cost) == 0;
}

int disp_pc_costwin_add(disp_pc_costwin_t *w, const disp_pc_sums_t *d)
{
    w->cum.n += fin(d->n);
    w->cum.b += fin(d->b);
    w->cum.t += fin(d->t);
    w->cum.bb += fin(d->bb);
    w->cum.bt += fin(d->bt);
    return close_due(w);
}

int disp_pc_costwin_set(disp_pc_costwin_t *w, const disp_pc_sums_t *cum)
{
    if (cum->n < w->cum.n || cum->t < w->cum.t) {
        w->start = *cum; /* restarted: a new window from here */
    }
    w->cum = *cum;
    return close_due(w);
}

int disp_pc_hitwin_note(disp_pc_hitwin_t *w, uint64_t hits, uint64_t misses)
{
    if (hits < w->win_hits || misses < w->win_misses) {
        w->win_hits = hits; /* restarted: a new window */
        w->win_misses = misses;
    }
    w->hits = hits;
    w->misses = misses;
    uint64_t dh = hits - w->win_hits;
    uint64_t dm = misses - w->win_misses;
    if (dh + dm < DISP_PC_WINDOW) {
        return 0;
    }
    w->hit_rate = (double)dh / (double)(dh + dm);
    w->have_rate = 1;
    w->win_hits = hits;
    w->win_misses = misses;
    return 1;
}

double disp_pc_cost_sec(const disp_pc_cost_t *c, double stored_bytes)
{
    return fin(c->entry_sec) + fin(c->byte_sec) * fin(stored_bytes);
}

void disp_pc_cost_mean(const disp_pc_cost_t *const *v, uint32_t n, disp_pc_cost_t *ret)
{
    double w = 0.0, a = 0.0, k = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] != NULL && v[i]->have) {
            double h = v[i]->hits > 0.0 ? v[i]->hits : 1.0;
            w += h;
            a += h * fin(v[i]->entry_sec);
            k += h * fin(v[i]->byte_sec);
        }
    }
    ret->have = w > 0.0;
    ret->entry_sec = w > 0.0 ? a / w : 0.0;
    ret->byte_sec = w > 0.0 ? k / w : 0.0;
    ret->hits = w;
}
