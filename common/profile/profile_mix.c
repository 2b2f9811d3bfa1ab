/* profile_mix: each source of a mix profiled on its own (profile_mix.h). */
#include "common/profile/profile_mix.h"

#include <errno.h>
#include <stdlib.h>

#include "common/base/err.h"
#include "common/profile/profiler.h"

static void summarize(const sl_profile_t *pr, sl_profile_source_t *out)
{
    double per = pr->samples > 0 ? 1.0 / (double)pr->samples : 0.0;
    *out = (sl_profile_source_t){.samples = pr->samples,
                                 .read_sec = pr->read_cpu_sec * per,
                                 .encoded_bytes = (double)pr->encoded_bytes * per};
    out->bytes[0] = out->encoded_bytes;
    for (uint32_t u = 0; u < pr->nunits; u++) {
        const sl_unit_stat_t *s = &pr->units[u];
        out->unit_sec[u] = s->cpu_sec * per;
        out->cpu_sec += out->unit_sec[u];
        /* A skipped unit ran on no sample: its input is its output. */
        out->bytes[u + 1] = s->samples > 0 ? (double)s->out_bytes / (double)s->samples
                                           : out->bytes[u];
    }
    if (pr->nunits > 0) {
        const sl_unit_stat_t *last = &pr->units[pr->nunits - 1];
        out->out_bytes = last->samples > 0 ? (double)last->out_bytes / (double)last->samples : 0;
    }
}

int sl_profile_mix(const sl_pipeline_t *p, const sl_source_t *src, const sl_spec_t *spec, size_t n,
                   int max_ms, sl_profile_mix_t *ret, char *err, size_t errlen)
{
    const sl_mix_t *m = spec->mix;
    if (m == NULL || !sl_mix_resolved(m)) {
        return sl_err(err, errlen, -EINVAL, "profile: not a mixed spec");
    }
    size_t per = n / m->nsources > 0 ? n / m->nsources : 1;
    per = per < SL_PROFILE_MAX_SAMPLES ? per : SL_PROFILE_MAX_SAMPLES;
    uint64_t *idx = malloc(per * sizeof(*idx));
    sl_profile_t *pr = malloc(sizeof(*pr)); /* KBs: off the stack */
    if (idx == NULL || pr == NULL) {
        free(idx);
        free(pr);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    ret->nsources = m->nsources;
    ret->nunits = sl_pipeline_nunits(p);
    uint64_t off = 0;
    int rc = 0;
    for (uint32_t j = 0; rc == 0 && j < m->nsources; j++) {
        size_t got = sl_profile_pick(m->src[j].count, per, idx);
        for (size_t i = 0; i < got; i++) {
            idx[i] += off; /* the source's own samples: global indices */
        }
        int ms = max_ms / (int)m->nsources > 0 ? max_ms / (int)m->nsources : 1;
        char msg[256];
        rc = sl_profile_run(p, src, idx, got, ms, pr, msg, sizeof(msg));
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "profile: mix source \"%s\": %s", m->src[j].name, msg);
        } else {
            summarize(pr, &ret->src[j]);
        }
        off += m->src[j].count;
    }
    free(idx);
    free(pr);
    return rc;
}

double sl_profile_mix_sec(const sl_profile_mix_t *pm, const double *w)
{
    double sum = 0.0, cost = 0.0;
    for (uint32_t j = 0; j < pm->nsources; j++) {
        sum += w[j];
        cost += w[j] * pm->src[j].cpu_sec;
    }
    return sum > 0.0 ? cost / sum : 0.0;
}
