/* planner_job_inputs: a job's PlannerInputs taken in (planner_job.h): the
 * client's and each worker class's HostProfile, the codec numbers, budgets
 * and links, checked against the pipeline's units (disp_pjob_new). All
 * peer-supplied numbers are cleaned (finite, >= 0) and text is copied with
 * disp_text_copy before it is stored. Runs under the dispatcher mutex. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/spec/spec_layout.h"
#include "common/spec/spec_prefix.h"
#include "dispatcher/planner/planner_job_impl.h"
#include "dispatcher/planner/planner_mix.h"

void disp_hprof_from_pb(const Sluice__HostProfile *m, disp_hprof_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (m == NULL) {
        return;
    }
    disp_text_copy(ret->host, sizeof(ret->host), m->host);
    for (size_t u = 0; u < m->n_units && u < DISP_PL_MAX_UNITS; u++) {
        const Sluice__StageStat *s = m->units[u];
        if (s == NULL) {
            continue;
        }
        disp_text_copy(ret->units[u].name, sizeof(ret->units[u].name), s->name);
        ret->units[u].cpu_sec_per_sample = disp_pj_fin(s->cpu_sec_per_sample);
        ret->units[u].out_bytes_per_sample = disp_pj_fin(s->out_bytes_per_sample);
        ret->units[u].samples = s->samples;
        ret->nunits = (uint32_t)u + 1;
    }
    ret->read_sec = disp_pj_fin(m->read_cpu_sec_per_sample);
    ret->encoded_bytes = disp_pj_fin(m->encoded_bytes_per_sample);
    ret->samples = m->samples;
    ret->seconds = disp_pj_fin(m->seconds);
    ret->model_error = disp_pj_fin(m->cost_model_error);
    ret->size_error = disp_pj_fin(m->size_cost_error);
    if (m->n_cost_model_coef == DISP_PJ_COST_COEF) {
        ret->ncoef = DISP_PJ_COST_COEF;
        for (size_t i = 0; i < DISP_PJ_COST_COEF; i++) {
            if (!isfinite(m->cost_model_coef[i])) {
                ret->ncoef = 0; /* a broken model is no model */
            }
            ret->coef[i] = m->cost_model_coef[i];
        }
    }
    ret->overhead_sec = fmin(disp_pj_fin(m->sample_overhead_sec), DISP_PJ_MAX_OVERHEAD_SEC);
    ret->source_rate = disp_pj_fin(m->source_bytes_per_sec);
    ret->source_latency = disp_pj_fin(m->source_latency_sec);
}

/* A profile fits the pipeline when it has a row per unit, by name. */
static int fits(const disp_pjob_t *pj, const disp_hprof_t *p)
{
    if (p->nunits != pj->nunits || p->samples == 0) {
        return 0;
    }
    for (uint32_t u = 0; u < pj->nunits; u++) {
        if (strcmp(p->units[u].name, pj->unit_names[u]) != 0) {
            return 0;
        }
    }
    return 1;
}

/* The client's codec numbers, one per boundary 0..nunits. Anything else
 * (an older client: none; a broken one: another count) leaves them 0, and
 * the planner never compresses. The planner cleans the values. */
static void codec_from_pb(disp_pjob_t *pj, const Sluice__PlannerInputs *in)
{
    size_t n = (size_t)pj->nunits + 1;
    if (in->n_codec_ratio != n || in->n_codec_compress_sec_per_sample != n ||
        in->n_codec_decompress_sec_per_sample != n) {
        return;
    }
    for (size_t k = 0; k < n; k++) {
        pj->codec_ratio[k] = disp_pj_fin(in->codec_ratio[k]);
        pj->codec_compress[k] = disp_pj_fin(in->codec_compress_sec_per_sample[k]);
        pj->codec_decompress[k] = disp_pj_fin(in->codec_decompress_sec_per_sample[k]);
    }
}

int disp_pjob_new(const Sluice__PlannerInputs *in, const sl_spec_t *spec, sl_offload_e policy,
                  disp_pjob_t **ret, char *err, size_t errlen)
{
    sl_layout_t l;
    int rc = sl_spec_layout(spec, 0, &l);
    if (rc != 0) {
        return sl_err(err, errlen, rc, "the spec's stages make no pipeline");
    }
    disp_pjob_t *pj = calloc(1, sizeof(*pj));
    if (pj == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    pj->policy = policy;
    pj->nunits = l.nunits;
    for (uint32_t u = 0; u < pj->nunits && u < DISP_PL_MAX_UNITS; u++) {
        snprintf(pj->unit_names[u], sizeof(pj->unit_names[u]), "%s", sl_layout_unit_name(&l, u));
    }
    if (pj->nunits == 0 || pj->nunits > DISP_PL_MAX_UNITS) {
        uint32_t n = pj->nunits;
        free(pj);
        return sl_err(err, errlen, -EINVAL, "planner: the pipeline has %u units", n);
    }
    pj->spec_hash = in->spec_hash;
    pj->drift_window_ms = DISP_REPLAN_DRIFT_MS;
    disp_hprof_from_pb(in->client, &pj->client);
    if (!fits(pj, &pj->client)) {
        uint32_t n = pj->client.nunits;
        uint32_t want = pj->nunits;
        free(pj);
        return sl_err(err, errlen, -EINVAL,
                      "planner: the client's profile has %u units, the pipeline %u (or the "
                      "names differ, or no sample could be profiled)",
                      n, want);
    }
    pj->client_budget = disp_pj_fin(in->client_cpu_budget);
    disp_text_copy(pj->budget_source, sizeof(pj->budget_source), in->client_cpu_budget_source);
    /* The profile pass's estimate is already the client's budget. */
    pj->budget_measured = fmin(disp_pj_fin(in->client_cpu_budget_measured), DISP_PJ_MAX_BUDGET);
    pj->budget_from_measured = pj->budget_measured > 0.0;
    pj->recv_sec_per_byte = disp_pj_fin(in->recv_cpu_sec_per_byte);
    pj->consumer_target = disp_pj_fin(in->consumer_rate);
    pj->client_bandwidth = disp_pj_fin(in->client_bandwidth);
    pj->links_cached = in->links_cached != 0;
    pj->overhead_profiled_sec = fmin(disp_pj_fin(in->client_overhead_profiled_sec),
                                     DISP_PJ_MAX_OVERHEAD_SEC);
    disp_text_copy(pj->client_machine, sizeof(pj->client_machine), in->client_machine_id);
    pj->client_has_cpus = sl_cpuset_parse(in->client_cpu_set, &pj->client_cpus) == 0;
    codec_from_pb(pj, in);
    /* The prefix cache (planner_cache.h): what the workers would cache, and
     * whether a job of the spec ran before (its profile was cached). */
    pj->cache.in.prefix = sl_spec_cache_prefix(spec, &l);
    pj->cache.in.spec_off = spec->cache == SL_CACHE_OFF;
    pj->cache.in.epochs = spec->epochs;
    pj->cache.in.seen = in->client != NULL && in->client->cached;
    for (size_t i = 0; i < in->n_classes && pj->nclasses < DISP_PL_MAX_CLASSES; i++) {
        const Sluice__WorkerClass *m = in->classes[i];
        if (m == NULL) {
            continue;
        }
        disp_pclass_t *c = &pj->classes[pj->nclasses++];
        disp_text_copy(c->key, sizeof(c->key), m->key);
        c->threads = m->threads;
        c->cpu_budget = disp_pj_fin(m->cpu_budget);
        c->bandwidth = disp_pj_fin(m->bandwidth_bytes_per_sec);
        if (m->profile != NULL) {
            disp_hprof_from_pb(m->profile, &c->prof);
            c->profiled = fits(pj, &c->prof);
        }
        for (size_t k = 0; k < m->n_worker_ids && c->nids < DISP_PJ_MAX_IDS; k++) {
            c->ids[c->nids++] = m->worker_ids[k];
        }
    }
    /* A mix's costs are its sources' under the weights in force. */
    rc = disp_pjob_mix_new(pj, in, spec, err, errlen);
    if (rc != 0) {
        free(pj);
        return rc;
    }
    *ret = pj;
    return 0;
}

void disp_pjob_free(disp_pjob_t *pj)
{
    if (pj != NULL) {
        disp_pjob_mix_free(pj->mix);
        free(pj);
    }
}
