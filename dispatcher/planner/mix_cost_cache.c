/* mix_cost_cache: per-source costs of mixed jobs by (spec, host)
 * (mix_cost_cache.h). */
#include "dispatcher/planner/mix_cost_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/planner/planner_job.h"

disp_mcache_t *disp_mcache_new(void) { return calloc(1, sizeof(disp_mcache_t)); }

void disp_mcache_free(disp_mcache_t *c) { free(c); }

static int fresh(const disp_mcache_entry_t *e, int64_t now_ms)
{
    return e->used && now_ms - e->stored_ms < DISP_PCACHE_TTL_MS;
}

/* The entry of (spec_hash, host) whether fresh or not, else the slot to
 * reuse: a free one, else the least recently used. */
static disp_mcache_entry_t *slot_for(disp_mcache_t *c, uint64_t spec_hash, const char *host)
{
    disp_mcache_entry_t *victim = NULL;
    for (size_t i = 0; i < DISP_MCACHE_MAX; i++) {
        disp_mcache_entry_t *e = &c->e[i];
        if (e->used && e->spec_hash == spec_hash && strcmp(e->host, host) == 0) {
            return e;
        }
        if (victim == NULL || (victim->used && (!e->used || e->used_ms < victim->used_ms))) {
            victim = e;
        }
    }
    return victim;
}

void disp_mcache_put(disp_mcache_t *c, const Sluice__PlannerInputs *in, int64_t now_ms)
{
    const char *host = in->client_host;
    if (c == NULL || in->n_mix_sources == 0 || in->mix_sources_cached || host == NULL ||
        host[0] == '\0' || strlen(host) >= DISP_MCACHE_HOST_MAX ||
        in->n_mix_sources > SL_MIX_MAX_SOURCES || in->mix_sources[0] == NULL) {
        return;
    }
    size_t nunits = in->mix_sources[0]->n_unit_cpu_sec_per_sample;
    if (nunits > DISP_PL_MAX_UNITS) {
        return;
    }
    for (size_t j = 0; j < in->n_mix_sources; j++) {
        const Sluice__MixSourceCost *s = in->mix_sources[j];
        if (s == NULL || s->name == NULL || strlen(s->name) >= SL_MIX_NAME_MAX ||
            s->n_unit_cpu_sec_per_sample != nunits || s->n_bytes_per_sample != nunits + 1) {
            return;
        }
    }
    disp_mcache_entry_t *e = slot_for(c, in->spec_hash, host);
    memset(e, 0, sizeof(*e));
    e->used = 1;
    e->spec_hash = in->spec_hash;
    snprintf(e->host, sizeof(e->host), "%s", host);
    e->stored_ms = e->used_ms = now_ms;
    e->nsources = (uint32_t)in->n_mix_sources;
    e->nunits = (uint32_t)nunits;
    for (uint32_t j = 0; j < e->nsources; j++) {
        const Sluice__MixSourceCost *s = in->mix_sources[j];
        disp_mcost_t *d = &e->src[j];
        snprintf(d->name, sizeof(d->name), "%s", s->name);
        memcpy(d->unit_sec, s->unit_cpu_sec_per_sample, nunits * sizeof(double));
        memcpy(d->bytes, s->bytes_per_sample, (nunits + 1) * sizeof(double));
        d->read_sec = s->read_cpu_sec_per_sample;
        d->samples = s->samples;
        d->profiled_share = s->profiled_share;
    }
}

const disp_mcache_entry_t *disp_mcache_get(disp_mcache_t *c, uint64_t spec_hash, const char *host,
                                           int64_t now_ms)
{
    if (c == NULL || host == NULL || host[0] == '\0') {
        return NULL;
    }
    for (size_t i = 0; i < DISP_MCACHE_MAX; i++) {
        disp_mcache_entry_t *e = &c->e[i];
        if (fresh(e, now_ms) && e->spec_hash == spec_hash && strcmp(e->host, host) == 0) {
            e->used_ms = now_ms;
            c->hits++;
            return e;
        }
    }
    c->misses++;
    return NULL;
}
