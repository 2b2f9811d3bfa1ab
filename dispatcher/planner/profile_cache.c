/* profile_cache: HostProfiles kept by (spec hash, host) for an hour, so
 * that a re-submitted job skips profiling (GetPlanContext hands them back);
 * steady report windows refresh the cached overhead and unit costs. The
 * types are planner_job.h's. Runs under the dispatcher mutex. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/planner/first_plan.h"
#include "dispatcher/planner/planner_job_impl.h"

disp_pcache_t *disp_pcache_new(void) { return calloc(1, sizeof(disp_pcache_t)); }

void disp_pcache_free(disp_pcache_t *c) { free(c); }

static int fresh(const disp_pcache_entry_t *e, int64_t now_ms)
{
    return e->used && now_ms - e->stored_ms < DISP_PCACHE_TTL_MS;
}

void disp_pcache_put(disp_pcache_t *c, uint64_t spec_hash, const disp_hprof_t *p, int64_t now_ms)
{
    if (c == NULL || p->host[0] == '\0' || p->samples == 0) {
        return;
    }
    disp_pcache_entry_t *match = NULL;
    disp_pcache_entry_t *victim = NULL; /* a free slot, else the least recently used */
    for (size_t i = 0; i < DISP_PCACHE_MAX && match == NULL; i++) {
        disp_pcache_entry_t *e = &c->e[i];
        if (e->used && e->spec_hash == spec_hash && strcmp(e->prof.host, p->host) == 0) {
            match = e;
        } else if (!e->used) {
            if (victim == NULL || victim->used) {
                victim = e;
            }
        } else if (victim == NULL || (victim->used && e->used_ms < victim->used_ms)) {
            victim = e;
        }
    }
    disp_pcache_entry_t *slot = match != NULL ? match : victim;
    slot->used = 1;
    slot->spec_hash = spec_hash;
    slot->stored_ms = now_ms;
    slot->used_ms = now_ms;
    /* A re-stored profile keeps its measured overhead's mark only if it
     * carries an overhead. */
    slot->overhead_seq = match != NULL && p->overhead_sec > 0.0 ? slot->overhead_seq : 0;
    /* The host's per-second cost is no part of the profile: kept. */
    slot->persec_seq = match != NULL ? slot->persec_seq : 0;
    slot->persec_cpu = match != NULL ? slot->persec_cpu : 0.0;
    slot->prof = *p;
}

/* The cached profile of (spec, host); store keeps one per pair. */
static disp_pcache_entry_t *pcache_find(disp_pcache_t *c, uint64_t spec_hash, const char *host)
{
    for (size_t i = 0; c != NULL && i < DISP_PCACHE_MAX; i++) {
        disp_pcache_entry_t *e = &c->e[i];
        if (e->used && e->spec_hash == spec_hash && strcmp(e->prof.host, host) == 0) {
            return e;
        }
    }
    return NULL;
}

int disp_pcache_host_prior(const disp_pcache_t *c, const char *host, uint64_t except_spec,
                           int64_t now_ms, double *ret)
{
    const disp_pcache_entry_t *best = NULL;
    for (size_t i = 0; c != NULL && host != NULL && i < DISP_PCACHE_MAX; i++) {
        const disp_pcache_entry_t *e = &c->e[i];
        if (fresh(e, now_ms) && e->overhead_seq > 0 && e->spec_hash != except_spec &&
            strcmp(e->prof.host, host) == 0 &&
            (best == NULL || e->overhead_seq > best->overhead_seq)) {
            best = e;
        }
    }
    if (best == NULL) {
        return 0;
    }
    *ret = best->prof.overhead_sec;
    return 1;
}

void disp_pcache_not_prior(disp_pcache_t *c, uint64_t spec_hash, const char *host)
{
    disp_pcache_entry_t *e = pcache_find(c, spec_hash, host);
    if (e != NULL) {
        e->overhead_seq = 0;
    }
}

int disp_pcache_note_overhead(disp_pcache_t *c, uint64_t spec_hash, const char *host,
                              double overhead_sec, double *ret_bound)
{
    disp_pcache_entry_t *e = pcache_find(c, spec_hash, host);
    if (e == NULL) {
        return -ENOENT;
    }
    double local = e->prof.read_sec;
    for (uint32_t u = 0; u < e->prof.nunits && u < DISP_PL_MAX_UNITS; u++) {
        local += e->prof.units[u].cpu_sec_per_sample;
    }
    double bound = fmax(DISP_PCACHE_OVERHEAD_MAX_X * local, DISP_PCACHE_OVERHEAD_FLOOR_SEC);
    if (!(overhead_sec >= 0.0) || overhead_sec > bound) {
        *ret_bound = bound;
        return -ERANGE;
    }
    e->prof.overhead_sec = overhead_sec;
    e->overhead_seq = ++c->overhead_seq;
    return 0;
}

void disp_pcache_note_units(disp_pcache_t *c, uint64_t spec_hash, const char *host,
                            const disp_stage_stat_t *units, uint32_t n)
{
    disp_pcache_entry_t *e = pcache_find(c, spec_hash, host);
    for (uint32_t u = 0; e != NULL && u < n && u < e->prof.nunits && u < DISP_PL_MAX_UNITS; u++) {
        const disp_stage_stat_t *m = &units[u];
        if (m->samples >= DISP_PCACHE_MIN_UNIT_SAMPLES && m->cpu_sec_per_sample > 0.0 &&
            strcmp(m->name, e->prof.units[u].name) == 0) {
            e->prof.units[u].cpu_sec_per_sample = m->cpu_sec_per_sample;
        }
    }
}

size_t disp_pcache_list(disp_pcache_t *c, uint64_t spec_hash, int64_t now_ms,
                        const disp_hprof_t **ret, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; c != NULL && i < DISP_PCACHE_MAX && n < max; i++) {
        disp_pcache_entry_t *e = &c->e[i];
        if (fresh(e, now_ms) && e->spec_hash == spec_hash) {
            e->used_ms = now_ms;
            ret[n++] = &e->prof;
        }
    }
    if (c != NULL) {
        if (n > 0) {
            c->hits++;
        } else {
            c->misses++;
        }
    }
    return n;
}

int disp_pcache_note_persec(disp_pcache_t *c, uint64_t spec_hash, const char *host,
                            double persec_cpu, double budget, double *ret_bound)
{
    disp_pcache_entry_t *e = pcache_find(c, spec_hash, host);
    if (e == NULL) {
        return -ENOENT;
    }
    double b = isfinite(budget) && budget > 0.0 ? budget : 0.0;
    double bound = fmin(DISP_PERSEC_MAX_SHARE * b, DISP_PERSEC_MAX_CPU);
    if (!(persec_cpu > 0.0) || persec_cpu > bound) {
        *ret_bound = bound;
        return -ERANGE;
    }
    e->persec_cpu = persec_cpu;
    e->persec_seq = ++c->persec_seq;
    return 0;
}

int disp_pcache_host_persec(const disp_pcache_t *c, const char *host, int64_t now_ms, double *ret)
{
    const disp_pcache_entry_t *best = NULL;
    for (size_t i = 0; c != NULL && host != NULL && i < DISP_PCACHE_MAX; i++) {
        const disp_pcache_entry_t *e = &c->e[i];
        if (fresh(e, now_ms) && e->persec_seq > 0 && strcmp(e->prof.host, host) == 0 &&
            (best == NULL || e->persec_seq > best->persec_seq)) {
            best = e;
        }
    }
    if (best == NULL) {
        return 0;
    }
    *ret = best->persec_cpu;
    return 1;
}
