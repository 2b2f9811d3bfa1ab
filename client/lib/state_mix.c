/* state_mix: a mixed job's state across a weight change (state_mix.h). */
#include "client/lib/state_mix.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "client/lib/client_impl.h"
#include "common/engine/balance_costs.h"
#include "common/order/blend.h"
#include "common/order/resume_mix.h"
#include "common/spec/mix.h"

static json_t *weights_json(const double *w, uint32_t k)
{
    json_t *a = json_array();
    for (uint32_t j = 0; a != NULL && j < k; j++) {
        if (json_array_append_new(a, json_real(w[j])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *cl_state_mix_json(const sl_spec_t *spec)
{
    const sl_mix_t *m = spec->mix;
    double w[SL_MIX_MAX_SOURCES];
    for (uint32_t j = 0; j < m->nsources; j++) {
        w[j] = m->src[j].weight;
    }
    json_t *steps = json_array();
    for (uint32_t i = 0; steps != NULL && i < m->nsteps; i++) {
        if (json_array_append_new(steps,
                                  json_pack("{s:I,s:o}", "from_step",
                                            (json_int_t)m->steps[i].from_step, "weights",
                                            weights_json(m->steps[i].weights, m->nsources))) < 0) {
            json_decref(steps);
            steps = NULL;
        }
    }
    json_t *ws = weights_json(w, m->nsources);
    if (steps == NULL || ws == NULL) {
        json_decref(steps);
        json_decref(ws);
        return NULL;
    }
    return json_pack("{s:o,s:o,s:I}", "weights", ws, "schedule", steps, "samples_per_epoch",
                     (json_int_t)m->samples_per_epoch);
}

/* k weights: finite, >= 0, some > 0; every one > 0 when positive. */
static int get_weights(const json_t *a, uint32_t k, bool positive, double *out)
{
    if (!json_is_array(a) || json_array_size(a) != k) {
        return -EINVAL;
    }
    bool some = false;
    for (uint32_t j = 0; j < k; j++) {
        const json_t *v = json_array_get(a, j);
        double w = json_is_number(v) ? json_number_value(v) : NAN;
        if (!isfinite(w) || w < 0.0 || (positive && w == 0.0)) {
            return -EINVAL;
        }
        out[j] = w;
        some = some || w > 0.0;
    }
    return some ? 0 : -EINVAL;
}

int cl_state_mix_set(sl_spec_t *spec, const json_t *v)
{
    sl_mix_t *m = spec->mix;
    const json_t *steps = json_object_get(v, "schedule");
    const json_t *spe = json_object_get(v, "samples_per_epoch");
    double w[SL_MIX_MAX_SOURCES];
    if (m == NULL || !json_is_array(steps) || json_array_size(steps) > SL_MIX_MAX_SCHEDULE ||
        !json_is_integer(spe) || json_integer_value(spe) <= 0 ||
        (uint64_t)json_integer_value(spe) > SL_MIX_SPE_MAX ||
        get_weights(json_object_get(v, "weights"), m->nsources, true, w) < 0) {
        return -EINVAL;
    }
    sl_mix_step_t st[SL_MIX_MAX_SCHEDULE];
    uint64_t prev = 0;
    for (size_t i = 0; i < json_array_size(steps); i++) {
        const json_t *e = json_array_get(steps, i);
        const json_t *from = json_object_get(e, "from_step");
        if (!json_is_integer(from) || json_integer_value(from) <= (json_int_t)prev ||
            get_weights(json_object_get(e, "weights"), m->nsources, false, st[i].weights) < 0) {
            return -EINVAL;
        }
        prev = (uint64_t)json_integer_value(from);
        st[i].from_step = prev;
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        m->src[j].weight = w[j];
    }
    m->nsteps = (uint32_t)json_array_size(steps);
    for (uint32_t i = 0; i < m->nsteps; i++) {
        m->steps[i] = st[i];
    }
    m->samples_per_epoch = (uint64_t)json_integer_value(spe);
    return 0;
}

int cl_state_mix_neutral(sl_spec_t *spec)
{
    sl_mix_t *m = spec->mix;
    if (m == NULL) {
        return 0;
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        m->src[j].weight = 1.0;
    }
    m->nsteps = 0;
    m->samples_per_epoch = 1;
    return 0;
}

/* Epoch e of r becomes {carry, gens [{world 1, runs [[0, 0, min(K, len)]]}]}. */
static int to_carry(sl_resume_epoch_t *ep, sl_resume_carry_t *c, uint64_t len)
{
    sl_resume_gen_t *g = calloc(1, sizeof(*g));
    sl_resume_run_t *run = malloc(sizeof(*run));
    if (g == NULL || run == NULL) {
        free(g);
        free(run);
        return -ENOMEM;
    }
    *run = (sl_resume_run_t){.rank = 0, .begin = 0, .end = c->consumed < len ? c->consumed : len};
    *g = (sl_resume_gen_t){.world = 1, .nruns = 1, .runs = run};
    for (uint32_t i = 0; i < ep->ngens; i++) {
        free(ep->gens[i].runs);
    }
    free(ep->gens);
    sl_resume_carry_free(ep->carry);
    ep->gens = g;
    ep->ngens = 1;
    ep->carry = c;
    return 0;
}

int cl_state_mix_carry(const sluice_job_t *job, const sl_spec_t *saved, sl_resume_t *r)
{
    size_t n = job->num_samples > 0 ? job->num_samples : 1;
    float *cost = NULL;
    uint32_t *tok = NULL, *tiles = NULL;
    int rc = 0;
    if (saved->batching.mode != SL_BATCHING_COUNT) { /* the layouts need the predictions */
        cost = malloc(n * sizeof(*cost));
        tok = malloc(n * sizeof(*tok));
        tiles = malloc(n * sizeof(*tiles));
        rc = cost != NULL && tok != NULL && tiles != NULL
                 ? sl_balance_sample_costs(&job->spec, job->src, cost, tok, tiles)
                 : -ENOMEM;
        rc = rc < 0 ? -ENOMEM : 0;
    }
    uint64_t len = sl_spec_epoch_len(&job->spec, job->num_samples);
    for (uint32_t e = 0; rc == 0 && e < r->nepochs; e++) {
        sl_resume_carry_t *c = NULL;
        rc = sl_resume_mix_carry(saved, r->ep[e].epoch, job->num_samples, cost, tok, tiles,
                                 job->spec.world_size, &c);
        if (rc == 0) {
            rc = to_carry(&r->ep[e], c, len);
            if (rc < 0) {
                sl_resume_carry_free(c);
            }
        }
    }
    free(cost);
    free(tok);
    free(tiles);
    return rc;
}
