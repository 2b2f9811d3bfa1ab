/* profile_mix_inputs: a mixed job's per-source costs on the wire
 * (profile_mix_inputs.h). */
#include "client/lib/profile_mix_inputs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/planner_impl.h"
#include "common/base/err.h"
#include "common/order/blend.h"
#include "common/profile/profile_mix.h"

/* The messages and the storage they point into: p->mix. */
struct cl_mix_inputs_s {
    Sluice__MixSourceCost msg[SL_MIX_MAX_SOURCES];
    Sluice__MixSourceCost *pmsg[SL_MIX_MAX_SOURCES];
    double unit_sec[SL_MIX_MAX_SOURCES][SL_PIPE_MAX_UNITS];
    double bytes[SL_MIX_MAX_SOURCES][SL_PIPE_MAX_UNITS + 1];
    char names[SL_MIX_MAX_SOURCES][SL_MIX_NAME_MAX];
};

static void fill(cl_mix_inputs_t *mi, const sl_mix_t *m, const sl_profile_mix_t *pm)
{
    for (uint32_t j = 0; j < pm->nsources; j++) {
        const sl_profile_source_t *s = &pm->src[j];
        Sluice__MixSourceCost *c = &mi->msg[j];
        sluice__mix_source_cost__init(c);
        snprintf(mi->names[j], sizeof(mi->names[j]), "%s", m->src[j].name);
        c->name = mi->names[j];
        for (uint32_t u = 0; u < pm->nunits; u++) {
            mi->unit_sec[j][u] = s->unit_sec[u];
        }
        for (uint32_t k = 0; k <= pm->nunits; k++) {
            mi->bytes[j][k] = s->bytes[k];
        }
        c->n_unit_cpu_sec_per_sample = pm->nunits;
        c->unit_cpu_sec_per_sample = mi->unit_sec[j];
        c->n_bytes_per_sample = pm->nunits + 1;
        c->bytes_per_sample = mi->bytes[j];
        c->read_cpu_sec_per_sample = s->read_sec;
        c->samples = s->samples;
        mi->pmsg[j] = c;
    }
}

/* Each source's share of the blend profile's samples. */
static void profiled_shares(Sluice__MixSourceCost *msg, const sl_mix_t *m, const uint64_t *idx,
                            size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t j = sl_blend_source_of(m, idx[i]);
        if (j < m->nsources) {
            msg[j].profiled_share += 1.0 / (double)n;
        }
    }
}

int cl_planner_mix_cached(cl_planner_t *p, const cl_plan_args_t *a,
                          const Sluice__PlanContextResponse *ctx)
{
    const sl_mix_t *m = a->spec->mix;
    uint32_t nunits = sl_pipeline_nunits(a->pipe);
    if (m == NULL || ctx == NULL || ctx->n_cached_mix_sources != m->nsources ||
        nunits > SL_PIPE_MAX_UNITS) {
        return 0;
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        const Sluice__MixSourceCost *c = ctx->cached_mix_sources[j];
        if (c == NULL || c->name == NULL || strcmp(c->name, m->src[j].name) != 0 ||
            c->n_unit_cpu_sec_per_sample != nunits || c->n_bytes_per_sample != nunits + 1) {
            return 0;
        }
    }
    if (p->mix == NULL && (p->mix = calloc(1, sizeof(*p->mix))) == NULL) {
        return 0; /* out of memory: profiling will say so */
    }
    cl_mix_inputs_t *mi = p->mix;
    for (uint32_t j = 0; j < m->nsources; j++) {
        const Sluice__MixSourceCost *s = ctx->cached_mix_sources[j];
        Sluice__MixSourceCost *c = &mi->msg[j];
        sluice__mix_source_cost__init(c);
        snprintf(mi->names[j], sizeof(mi->names[j]), "%s", m->src[j].name);
        c->name = mi->names[j];
        memcpy(mi->unit_sec[j], s->unit_cpu_sec_per_sample, nunits * sizeof(double));
        memcpy(mi->bytes[j], s->bytes_per_sample, (nunits + 1) * sizeof(double));
        c->n_unit_cpu_sec_per_sample = nunits;
        c->unit_cpu_sec_per_sample = mi->unit_sec[j];
        c->n_bytes_per_sample = (size_t)nunits + 1;
        c->bytes_per_sample = mi->bytes[j];
        c->read_cpu_sec_per_sample = s->read_cpu_sec_per_sample;
        c->samples = s->samples;
        c->profiled_share = s->profiled_share;
        mi->pmsg[j] = c;
    }
    p->in.n_mix_sources = m->nsources;
    p->in.mix_sources = mi->pmsg;
    p->in.mix_sources_cached = 1;
    return 1;
}

int cl_planner_mix_costs(cl_planner_t *p, const cl_plan_args_t *a, size_t samples, int max_ms,
                         const uint64_t *idx, size_t nblend, char *err, size_t errlen)
{
    const sl_mix_t *m = a->spec->mix;
    if (m == NULL) {
        return 0;
    }
    sl_profile_mix_t *pm = calloc(1, sizeof(*pm)); /* KBs: off the stack */
    if (p->mix == NULL) {
        p->mix = calloc(1, sizeof(*p->mix));
    }
    if (pm == NULL || p->mix == NULL) {
        free(pm);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = sl_profile_mix(a->pipe, a->src, a->spec, samples, max_ms, pm, err, errlen);
    for (uint32_t j = 0; rc == 0 && j < pm->nsources; j++) {
        if (pm->src[j].samples == 0) {
            rc = sl_err(err, errlen, -EIO,
                        "profile: mix source \"%s\": no sample could be "
                        "processed",
                        m->src[j].name);
        }
    }
    if (rc == 0) {
        fill(p->mix, m, pm);
        profiled_shares(p->mix->msg, m, idx, nblend);
        p->in.n_mix_sources = pm->nsources;
        p->in.mix_sources = p->mix->pmsg;
    }
    free(pm);
    return rc;
}
