/* planner_cache: the prefix cache decision and its pricing (planner_cache.h). */
#include "dispatcher/planner/planner_cache.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double fin(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

double disp_pc_read_sec(double out_bytes, double ratio, double decompress_sec, double *ret_stored)
{
    double raw = fin(out_bytes);
    double stored = raw;
    double sec = DISP_PC_ENTRY_SEC;
    /* The cache compresses an entry with the wire's codec when that makes
     * it smaller (docs/cache.md "Entries"): the client's codec profile at
     * the prefix's boundary says by how much and at what CPU. */
    if (fin(ratio) > DISP_PL_MIN_RATIO) {
        stored = raw / ratio;
        sec += fin(decompress_sec);
    }
    sec += stored * DISP_PC_SEC_PER_BYTE;
    if (ret_stored != NULL) {
        *ret_stored = stored;
    }
    return sec;
}

/* "1.5 GB", "150.0 KB": the sizes the reason prints. */
static void size_str(char *buf, size_t len, double bytes)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    size_t u = 0;
    while (bytes >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.1f %s", bytes, units[u]);
}

void disp_pc_decide(const disp_pc_in_t *in, disp_pc_decision_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->fit = 1.0;
    if (in->spec_off) {
        snprintf(ret->why, sizeof(ret->why), "off: the spec says \"cache\": \"off\"");
        return;
    }
    if (in->prefix == 0) {
        snprintf(ret->why, sizeof(ret->why),
                 "off: nothing to cache (the first unit draws randomness)");
        return;
    }
    ret->read_sec = disp_pc_read_sec(in->out_bytes, in->ratio, in->decompress_sec,
                                     &ret->stored_bytes);
    if (in->measured.have) {
        /* Measured on hits, decompression included. */
        ret->read_sec = disp_pc_cost_sec(&in->measured, ret->stored_bytes);
        ret->measured = 1;
    }
    ret->total_bytes = ret->stored_bytes * fin(in->samples);
    double compute = fin(in->compute_sec);
    char fitbuf[128];
    if (in->budget > 0.0 && ret->total_bytes > 0.0) {
        ret->fit = fmin(1.0, in->budget / ret->total_bytes);
        char a[32];
        char b[32];
        size_str(a, sizeof(a), ret->total_bytes);
        size_str(b, sizeof(b), in->budget);
        snprintf(fitbuf, sizeof(fitbuf), "%.0f%% of its %s fit the workers' %s", ret->fit * 100.0,
                 a, b);
    } else {
        char a[32];
        size_str(a, sizeof(a), ret->total_bytes);
        snprintf(fitbuf, sizeof(fitbuf),
                 "its %s not checked against a budget (no live worker "
                 "reported one)",
                 a);
    }
    char cost[160];
    snprintf(cost, sizeof(cost),
             "computing units 0..%u costs %.3f ms a sample, reading %.3f ms (%s)", in->prefix - 1,
             compute * 1e3, ret->read_sec * 1e3, ret->measured ? "measured" : "assumed");
    if (compute <= ret->read_sec) {
        snprintf(ret->why, sizeof(ret->why), "off: %s; not cheaper", cost);
        return;
    }
    if (ret->fit < DISP_PC_MIN_FIT) {
        snprintf(ret->why, sizeof(ret->why), "off: %s; only %s (at least %.0f%% must)", cost,
                 fitbuf, DISP_PC_MIN_FIT * 100.0);
        return;
    }
    if (in->epochs <= 1 && !in->seen) {
        snprintf(ret->why, sizeof(ret->why),
                 "off: %s; nothing reads it again (1 epoch, the spec not seen before)", cost);
        return;
    }
    ret->on = 1;
    char again[48];
    if (in->epochs > 1) {
        snprintf(again, sizeof(again), "%u epochs", in->epochs);
    } else {
        snprintf(again, sizeof(again), "the spec seen before");
    }
    snprintf(ret->why, sizeof(ret->why), "on: %s; %s; read again: %s", cost, fitbuf, again);
}

void disp_pc_note(disp_pc_job_t *c, uint64_t hits, uint64_t misses)
{
    if (hits < c->win_hits || misses < c->win_misses) {
        c->win_hits = hits; /* counters restarted (a restored job): a new window */
        c->win_misses = misses;
    }
    c->hits = hits;
    c->misses = misses;
    uint64_t dh = hits - c->win_hits;
    uint64_t dm = misses - c->win_misses;
    if (dh + dm >= DISP_PC_WINDOW) {
        c->hit_rate = (double)dh / (double)(dh + dm);
        c->have_rate = 1;
        c->win_hits = hits;
        c->win_misses = misses;
    }
}

double disp_pc_rate(const disp_pc_job_t *c)
{
    return c->decided && c->d.on && c->have_rate ? c->hit_rate : 0.0;
}

void disp_pc_price(disp_pl_input_t *in, uint32_t prefix, double h, double read_sec)
{
    if (!(h > 0.0) || prefix == 0) {
        return;
    }
    h = fmin(h, 1.0);
    uint32_t n = prefix < in->nunits ? prefix : in->nunits;
    for (uint32_t c = 0; c < in->nclasses && c < DISP_PL_MAX_CLASSES; c++) {
        disp_pl_class_t *k = &in->classes[c];
        if (!k->profiled) {
            continue; /* the planner prices it at the client's costs */
        }
        k->read_sec = (1.0 - h) * k->read_sec + h * fin(read_sec);
        for (uint32_t u = 0; u < n; u++) {
            k->unit_sec[u] *= 1.0 - h;
        }
    }
}

void disp_pc_price_client(disp_pl_input_t *in, uint32_t prefix, double h, double read_sec)
{
    in->local_cache_sec = 0.0;
    if (!(h > 0.0) || prefix == 0) {
        return;
    }
    uint32_t n = prefix < in->nunits ? prefix : in->nunits;
    double computed = fin(in->read_sec);
    for (uint32_t u = 0; u < n; u++) {
        computed += fin(in->unit_sec[u]);
    }
    double saved = fmin(h, 1.0) * (computed - fin(read_sec));
    in->local_cache_sec = saved > 0.0 ? saved : 0.0;
}

double disp_pc_client_rate(const disp_pc_job_t *c)
{
    return c->decided && c->d.on && c->client.have_rate ? c->client.hit_rate : 0.0;
}

int disp_pc_replan_due(const disp_pc_job_t *c, char *why, size_t whylen)
{
    if (!c->decided || !c->d.on) {
        return 0;
    }
    if (c->have_rate && fabs(c->hit_rate - c->priced_rate) > DISP_PC_REPLAN_DIFF) {
        snprintf(why, whylen, "prefix cache hit rate %.0f%% -> %.0f%%", c->priced_rate * 100.0,
                 c->hit_rate * 100.0);
        return 1;
    }
    if (c->client.have_rate &&
        fabs(c->client.hit_rate - c->client_priced_rate) > DISP_PC_REPLAN_DIFF) {
        snprintf(why, whylen, "the client's prefix cache hit rate %.0f%% -> %.0f%%",
                 c->client_priced_rate * 100.0, c->client.hit_rate * 100.0);
        return 1;
    }
    return 0;
}
