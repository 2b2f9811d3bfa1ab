/* planner_mix: a mixed job's per-source costs weighted for the planner
 * (planner_mix.h). All numbers from the client are cleaned (finite, >= 0;
 * unit costs above DISP_PJ_MAX_UNIT_SEC count as 0) before they are kept. */
#include "dispatcher/planner/planner_mix.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/order/blend.h"
#include "common/spec/resume.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/planner/planner_job_impl.h"

/* Weights closer than this are the same mix (a schedule entry repeating
 * the weights in force must not re-plan). */
#define PMIX_SAME 1e-9

void disp_pjob_mix_free(disp_pmix_t *m)
{
    if (m != NULL) {
        sl_mix_free(m->mix);
        free(m);
    }
}

static double unit_cost(double v)
{
    double c = disp_pj_fin(v);
    return c <= DISP_PJ_MAX_UNIT_SEC ? c : 0.0;
}

/* Source j's costs from the wire, checked against the mix and the
 * pipeline. */
static int take_source(disp_pmix_t *m, uint32_t j, const Sluice__MixSourceCost *c,
                       const sl_mix_t *mix, char *err, size_t errlen)
{
    const char *want = mix->src[j].name;
    if (c == NULL || c->name == NULL || strcmp(c->name, want) != 0) {
        return sl_err(err, errlen, -EINVAL,
                      "planner: mix_sources[%u] is \"%s\", the mix's source %u is \"%s\"", j,
                      c != NULL && c->name != NULL ? c->name : "", j, want);
    }
    if (c->n_unit_cpu_sec_per_sample != m->nunits || c->n_bytes_per_sample != m->nunits + 1) {
        return sl_err(err, errlen, -EINVAL,
                      "planner: mix_sources[%u] (\"%s\"): %zu unit costs and %zu boundaries' "
                      "bytes, the pipeline has %u units (%u boundaries)",
                      j, want, c->n_unit_cpu_sec_per_sample, c->n_bytes_per_sample, m->nunits,
                      m->nunits + 1);
    }
    snprintf(m->names[j], sizeof(m->names[j]), "%s", want);
    for (uint32_t u = 0; u < m->nunits; u++) {
        m->unit_sec[j][u] = unit_cost(c->unit_cpu_sec_per_sample[u]);
    }
    for (uint32_t k = 0; k <= m->nunits; k++) {
        m->bytes[j][k] = disp_pj_fin(c->bytes_per_sample[k]);
    }
    m->read_sec[j] = unit_cost(c->read_cpu_sec_per_sample);
    m->samples[j] = c->samples;
    m->profiled[j] = disp_pj_fin(c->profiled_share);
    return 0;
}

static void weights_at(const disp_pmix_t *m, uint64_t step, double *w);

/* The profiled shares normalized; none: the weights of step 0. */
static void profiled_mix(disp_pmix_t *m)
{
    double sum = 0.0;
    for (uint32_t j = 0; j < m->nsources; j++) {
        sum += m->profiled[j];
    }
    if (!(sum > 0.0)) {
        weights_at(m, 0, m->profiled);
        return;
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        m->profiled[j] /= sum;
    }
}

int disp_pjob_mix_new(disp_pjob_t *pj, const Sluice__PlannerInputs *in, const sl_spec_t *spec,
                      char *err, size_t errlen)
{
    pj->mix = NULL;
    const sl_mix_t *mix = spec->mix;
    if (mix == NULL || in->n_mix_sources == 0) {
        return 0;
    }
    if (in->n_mix_sources != mix->nsources) {
        return sl_err(err, errlen, -EINVAL,
                      "planner: mix_sources has %zu sources, the spec's mix %u", in->n_mix_sources,
                      mix->nsources);
    }
    disp_pmix_t *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->mix = sl_mix_dup(mix)) == NULL) {
        free(m);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    m->nsources = mix->nsources;
    m->nunits = pj->nunits;
    int rc = 0;
    for (uint32_t j = 0; rc == 0 && j < m->nsources; j++) {
        rc = take_source(m, j, in->mix_sources[j], mix, err, errlen);
    }
    if (rc != 0) {
        disp_pjob_mix_free(m);
        return rc;
    }
    m->step_len = (uint64_t)spec->batch_size * (spec->world_size > 0 ? spec->world_size : 1);
    for (uint32_t u = 0; u < m->nunits; u++) {
        m->blend_unit[u] = pj->client.units[u].cpu_sec_per_sample;
    }
    m->blend_read = pj->client.read_sec;
    for (uint32_t c = 0; c < pj->nclasses; c++) {
        for (uint32_t u = 0; u < m->nunits; u++) {
            m->class_unit[c][u] = pj->classes[c].prof.units[u].cpu_sec_per_sample;
        }
        m->class_read[c] = pj->classes[c].prof.read_sec;
    }
    profiled_mix(m);
    m->cached = in->mix_sources_cached;
    pj->mix = m;
    disp_pjob_mix_apply(pj, 0);
    return 0;
}

/* The weights in force at step, normalized (the blend's rule: all 0
 * cannot happen in a parsed spec; it would weigh the sources alike). */
static void weights_at(const disp_pmix_t *m, uint64_t step, double *w)
{
    sl_mix_weights_at(m->mix, step, w);
    double sum = 0.0;
    for (uint32_t j = 0; j < m->nsources; j++) {
        sum += w[j];
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        w[j] = sum > 0.0 ? w[j] / sum : 1.0 / m->nsources;
    }
}

/* A worker's cost of a unit moves as the sources' weighted cost does:
 * `was` at the profiled mix, `now` at the weights in force. A unit the
 * profiled mix never ran (0) takes the client's new cost: nothing says the
 * worker differs. */
static double scaled(double worker, double was, double now)
{
    if (was > 0.0) {
        return worker * (now / was);
    }
    return now > 0.0 ? now : worker;
}

/* sum_j w_j x[j][u] over the sources (x: unit_sec; u < 0: read_sec). */
static double weighted(const disp_pmix_t *m, const double *w, int u)
{
    double v = 0.0;
    for (uint32_t j = 0; j < m->nsources; j++) {
        v += w[j] * (u < 0 ? m->read_sec[j] : m->unit_sec[j][u]);
    }
    return v;
}

void disp_pjob_mix_apply(disp_pjob_t *pj, uint64_t step)
{
    disp_pmix_t *m = pj->mix;
    if (m == NULL) {
        return;
    }
    weights_at(m, step, m->weights);
    m->step = step;
    double read = weighted(m, m->weights, -1);
    double bytes0 = 0.0;
    for (uint32_t j = 0; j < m->nsources; j++) {
        bytes0 += m->weights[j] * m->bytes[j][0];
    }
    pj->client.read_sec = read;
    pj->client.encoded_bytes = bytes0;
    for (uint32_t u = 0; u < m->nunits; u++) {
        double sec = weighted(m, m->weights, (int)u), was = weighted(m, m->profiled, (int)u);
        double out = 0.0;
        for (uint32_t j = 0; j < m->nsources; j++) {
            out += m->weights[j] * m->bytes[j][u + 1];
        }
        pj->client.units[u].cpu_sec_per_sample = sec;
        pj->client.units[u].out_bytes_per_sample = out;
        for (uint32_t c = 0; c < pj->nclasses; c++) {
            if (pj->classes[c].profiled) {
                pj->classes[c].prof.units[u].cpu_sec_per_sample = scaled(m->class_unit[c][u], was,
                                                                         sec);
            }
        }
    }
    double read_was = weighted(m, m->profiled, -1);
    for (uint32_t c = 0; c < pj->nclasses; c++) {
        if (pj->classes[c].profiled) {
            pj->classes[c].prof.read_sec = scaled(m->class_read[c], read_was, read);
        }
    }
}

/* "a 0.70 b 0.30" into buf, as much as fits. */
static void weights_text(const disp_pmix_t *m, const double *w, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t j = 0; j < m->nsources && at < len; j++) {
        int n = snprintf(buf + at, len - at, "%s%s %.2f", j > 0 ? " " : "", m->names[j], w[j]);
        at += n > 0 ? (size_t)n : 0;
    }
}

int disp_pjob_mix_due(disp_pjob_t *pj, uint64_t step, char *why, size_t whylen)
{
    disp_pmix_t *m = pj->mix;
    if (m == NULL) {
        return 0;
    }
    double w[SL_MIX_MAX_SOURCES];
    weights_at(m, step, w);
    int same = 1;
    for (uint32_t j = 0; j < m->nsources; j++) {
        same = same && fabs(w[j] - m->weights[j]) <= PMIX_SAME;
    }
    if (same) {
        m->step = step;
        return 0;
    }
    char before[128], after[128];
    weights_text(m, m->weights, before, sizeof(before));
    weights_text(m, w, after, sizeof(after));
    snprintf(why, whylen, "mix weights at step %llu: %s -> %s", (unsigned long long)step, before,
             after);
    disp_pjob_mix_apply(pj, step);
    m->changes++;
    return 1;
}

int disp_pjob_mix_stale(const disp_pjob_t *pj) { return pj->mix != NULL && pj->mix->changes > 0; }

uint64_t disp_job_mix_step(const disp_job_t *job)
{
    const sl_mix_t *mix = job->spec.mix;
    if (mix == NULL) {
        return 0;
    }
    uint64_t epoch = job->nep > 0 ? job->ep[0].epoch : job->next_epoch;
    uint64_t q = job->nep > 0 ? job->ep[0].acked_positions : 0;
    /* As sl_spec_epoch_order: an epoch resumed with other weights counts
     * its steps in the resuming world, after the positions it carried. */
    const sl_resume_epoch_t *re = sl_resume_find(job->spec.resume, epoch);
    const sl_resume_carry_t *carry = re != NULL ? re->carry : NULL;
    uint32_t world = carry != NULL ? carry->world : job->spec.world_size;
    world = world > 0 ? world : 1;
    uint64_t step_len = (uint64_t)job->spec.batch_size * world;
    uint64_t p = q * world + (carry != NULL ? carry->consumed : 0);
    return sl_blend_step(mix, step_len, epoch, p);
}

static json_t *ms_array(const double *sec, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t u = 0; a != NULL && u < n; u++) {
        if (json_array_append_new(a, json_real(sec[u] * 1e3)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *source_json(const disp_pmix_t *m, uint32_t j)
{
    double cpu = 0.0;
    for (uint32_t u = 0; u < m->nunits; u++) {
        cpu += m->unit_sec[j][u];
    }
    json_t *bytes = json_array();
    for (uint32_t k = 0; bytes != NULL && k <= m->nunits; k++) {
        json_array_append_new(bytes, json_real(m->bytes[j][k]));
    }
    return json_pack("{s:s, s:f, s:f, s:I, s:f, s:o*, s:f, s:o*}", "name", m->names[j],
                     "weight_share", m->weights[j], "profiled_share", m->profiled[j], "samples",
                     (json_int_t)m->samples[j], "cpu_ms_per_sample", cpu * 1e3, "unit_ms",
                     ms_array(m->unit_sec[j], m->nunits), "read_ms", m->read_sec[j] * 1e3,
                     "bytes_per_sample", bytes);
}

json_t *disp_pjob_mix_json(const disp_pjob_t *pj)
{
    const disp_pmix_t *m = pj != NULL ? pj->mix : NULL;
    if (m == NULL) {
        return NULL;
    }
    json_t *a = json_array();
    for (uint32_t j = 0; a != NULL && j < m->nsources; j++) {
        json_t *s = source_json(m, j);
        if (s == NULL || json_array_append_new(a, s) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    double now[DISP_PL_MAX_UNITS];
    for (uint32_t u = 0; u < m->nunits; u++) {
        now[u] = pj->client.units[u].cpu_sec_per_sample;
    }
    return json_pack("{s:I, s:i, s:b, s:b, s:o*, s:o*, s:o*}", "step", (json_int_t)m->step,
                     "weights_changes", (int)m->changes, "measured_costs_used",
                     !disp_pjob_mix_stale(pj), "costs_cached", m->cached, "sources", a, "unit_ms",
                     ms_array(now, m->nunits), "profiled_unit_ms",
                     ms_array(m->blend_unit, m->nunits));
}
