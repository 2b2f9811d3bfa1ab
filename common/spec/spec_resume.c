/* spec_resume: the "resume" section's data and JSON (common/spec/resume.h). */
#include "common/spec/resume.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"

void sl_resume_free(sl_resume_t *r)
{
    if (r == NULL) {
        return;
    }
    for (uint32_t e = 0; r->ep != NULL && e < r->nepochs; e++) {
        for (uint32_t g = 0; r->ep[e].gens != NULL && g < r->ep[e].ngens; g++) {
            free(r->ep[e].gens[g].runs);
        }
        free(r->ep[e].gens);
        sl_resume_carry_free(r->ep[e].carry);
    }
    free(r->ep);
    free(r);
}

void sl_resume_carry_free(sl_resume_carry_t *c)
{
    if (c != NULL) {
        free(c->runs);
        free(c);
    }
}

const sl_resume_epoch_t *sl_resume_find(const sl_resume_t *r, uint64_t epoch)
{
    for (uint32_t e = 0; r != NULL && e < r->nepochs; e++) {
        if (r->ep[e].epoch == epoch) {
            return &r->ep[e];
        }
    }
    return NULL;
}

/* A JSON integer in [0, max]. */
static int get_uint(const json_t *v, uint64_t max, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > max) {
        return -EINVAL;
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_runs(const json_t *a, sl_resume_gen_t *g, uint64_t *budget, const char *at,
                      char *err, size_t errlen)
{
    if (!json_is_array(a)) {
        return sl_err(err, errlen, -EINVAL, "%s.runs: must be an array of [rank, begin, end]",
                      at);
    }
    size_t n = json_array_size(a);
    if (n > *budget) {
        return sl_err(err, errlen, -EINVAL, "%s.runs: more than %d runs in the state", at,
                      SL_RESUME_MAX_RUNS);
    }
    *budget -= n;
    g->runs = calloc(n > 0 ? n : 1, sizeof(*g->runs));
    if (g->runs == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(a, i);
        uint64_t rank, b, e;
        if (!json_is_array(t) || json_array_size(t) != 3 ||
            get_uint(json_array_get(t, 0), g->world - 1, &rank) < 0 ||
            get_uint(json_array_get(t, 1), INT64_MAX, &b) < 0 ||
            get_uint(json_array_get(t, 2), INT64_MAX, &e) < 0 || b >= e) {
            return sl_err(err, errlen, -EINVAL,
                          "%s.runs[%zu]: must be [rank, begin, end] with rank < world (%u) "
                          "and 0 <= begin < end",
                          at, i, g->world);
        }
        const sl_resume_run_t *p = i > 0 ? &g->runs[i - 1] : NULL;
        if (p != NULL && (rank < p->rank || (rank == p->rank && b < p->end))) {
            return sl_err(err, errlen, -EINVAL,
                          "%s.runs[%zu]: runs must be sorted by rank, then position, and "
                          "must not overlap",
                          at, i);
        }
        g->runs[i] = (sl_resume_run_t){.rank = (uint32_t)rank, .begin = b, .end = e};
    }
    g->nruns = (uint32_t)n;
    return 0;
}

/* "carry" (resume.h): the draws as runs [source, begin, end]; gens[0]
 * must be the generation that removes their positions. */
static int parse_carry(const json_t *o, uint32_t max_world, sl_resume_epoch_t *ep, uint64_t *budget,
                       const char *at, char *err, size_t errlen)
{
    uint64_t world;
    if (!json_is_object(o) || json_object_size(o) != 2 ||
        get_uint(json_object_get(o, "world"), max_world, &world) < 0 || world == 0) {
        return sl_err(err, errlen, -EINVAL,
                      "%s.carry: must be {\"world\": 1..%u, \"drawn\": [[source, begin, "
                      "end], ...]}",
                      at, max_world);
    }
    sl_resume_gen_t g = {.world = SL_RESUME_CARRY_SOURCES};
    char cat[80];
    snprintf(cat, sizeof(cat), "%s.carry.drawn", at);
    int rc = parse_runs(json_object_get(o, "drawn"), &g, budget, cat, err, errlen);
    ep->carry = calloc(1, sizeof(*ep->carry));
    if (rc < 0 || ep->carry == NULL) {
        free(g.runs);
        return rc < 0 ? rc : sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    *ep->carry = (sl_resume_carry_t){.world = (uint32_t)world, .nruns = g.nruns, .runs = g.runs};
    for (uint32_t i = 0; i < g.nruns; i++) {
        ep->carry->consumed += g.runs[i].end - g.runs[i].begin;
    }
    const sl_resume_gen_t *g0 = &ep->gens[0];
    if (g.nruns == 0 || g0->world != 1 || g0->nruns != 1 || g0->runs[0].begin != 0 ||
        g0->runs[0].end > ep->carry->consumed) {
        return sl_err(err, errlen, -EINVAL,
                      "%s.carry: needs draws, and gens[0] must be {\"world\": 1, \"runs\": "
                      "[[0, 0, at most the %" PRIu64 " draws]]}",
                      at, ep->carry->consumed);
    }
    return 0;
}

static int parse_epoch(const json_t *o, uint32_t max_world, sl_resume_epoch_t *ep,
                       uint64_t *budget, const char *at, char *err, size_t errlen)
{
    const json_t *gens = json_object_get(o, "gens");
    const json_t *carry = json_object_get(o, "carry");
    uint64_t epoch;
    if (!json_is_object(o) || json_object_size(o) != 2 + (carry != NULL) ||
        get_uint(json_object_get(o, "epoch"), UINT32_MAX, &epoch) < 0 || !json_is_array(gens) ||
        json_array_size(gens) == 0 || json_array_size(gens) > SL_RESUME_MAX_GENS) {
        return sl_err(err, errlen, -EINVAL,
                      "%s: must be {\"epoch\": E, \"gens\": [1..%d generations]}", at,
                      SL_RESUME_MAX_GENS);
    }
    ep->epoch = epoch;
    size_t n = json_array_size(gens);
    ep->gens = calloc(n, sizeof(*ep->gens));
    if (ep->gens == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    ep->ngens = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *g = json_array_get(gens, i);
        char gat[96];
        snprintf(gat, sizeof(gat), "%s.gens[%zu]", at, i);
        uint64_t world;
        if (!json_is_object(g) || json_object_size(g) != 2 ||
            get_uint(json_object_get(g, "world"), max_world, &world) < 0 || world == 0) {
            return sl_err(err, errlen, -EINVAL,
                          "%s: must be {\"world\": 1..%u, \"runs\": [...]}", gat, max_world);
        }
        ep->gens[i].world = (uint32_t)world;
        int rc = parse_runs(json_object_get(g, "runs"), &ep->gens[i], budget, gat, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    return carry != NULL ? parse_carry(carry, max_world, ep, budget, at, err, errlen) : 0;
}

int sl_resume_from_json(const json_t *v, uint32_t max_world, sl_resume_t **ret, char *err,
                        size_t errlen)
{
    const json_t *eps = json_object_get(v, "epochs");
    if (!json_is_object(v) || json_object_size(v) != 1 || !json_is_array(eps) ||
        json_array_size(eps) == 0 || json_array_size(eps) > SL_RESUME_MAX_EPOCHS) {
        return sl_err(err, errlen, -EINVAL,
                      "resume: must be {\"epochs\": [1..%d epochs]} (written by sluice from a "
                      "saved state)",
                      SL_RESUME_MAX_EPOCHS);
    }
    sl_resume_t *r = calloc(1, sizeof(*r));
    size_t n = json_array_size(eps);
    if (r == NULL || (r->ep = calloc(n, sizeof(*r->ep))) == NULL) {
        free(r);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    r->nepochs = (uint32_t)n;
    uint64_t budget = SL_RESUME_MAX_RUNS;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char at[48];
        snprintf(at, sizeof(at), "resume.epochs[%zu]", i);
        rc = parse_epoch(json_array_get(eps, i), max_world, &r->ep[i], &budget, at, err,
                         errlen);
        if (rc == 0 && i > 0 && r->ep[i].epoch <= r->ep[i - 1].epoch) {
            rc = sl_err(err, errlen, -EINVAL, "%s.epoch: epochs must be ascending", at);
        }
    }
    if (rc < 0) {
        sl_resume_free(r);
        return rc;
    }
    *ret = r;
    return 0;
}

static json_t *gen_json(const sl_resume_gen_t *g)
{
    json_t *o = json_object(), *runs = json_array();
    int bad = o == NULL || runs == NULL;
    for (uint32_t i = 0; !bad && i < g->nruns; i++) {
        const sl_resume_run_t *u = &g->runs[i];
        bad = json_array_append_new(runs, json_pack("[I,I,I]", (json_int_t)u->rank,
                                                    (json_int_t)u->begin,
                                                    (json_int_t)u->end)) < 0;
    }
    if (bad || json_object_set_new(o, "world", json_integer(g->world)) < 0 ||
        json_object_set(o, "runs", runs) < 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(runs);
    return o;
}

static json_t *carry_json(const sl_resume_carry_t *c)
{
    sl_resume_gen_t g = {.world = c->world, .nruns = c->nruns, .runs = c->runs};
    json_t *o = gen_json(&g); /* {"world", "runs"}: renamed */
    json_t *runs = o != NULL ? json_incref(json_object_get(o, "runs")) : NULL;
    if (runs == NULL || json_object_del(o, "runs") < 0 ||
        json_object_set_new(o, "drawn", runs) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *sl_resume_to_json(const sl_resume_t *r)
{
    json_t *root = json_object(), *eps = json_array();
    int bad = root == NULL || eps == NULL;
    for (uint32_t e = 0; !bad && e < r->nepochs; e++) {
        json_t *o = json_object(), *gens = json_array();
        bad = o == NULL || gens == NULL;
        for (uint32_t g = 0; !bad && g < r->ep[e].ngens; g++) {
            bad = json_array_append_new(gens, gen_json(&r->ep[e].gens[g])) < 0;
        }
        bad = bad || (r->ep[e].carry != NULL &&
                      json_object_set_new(o, "carry", carry_json(r->ep[e].carry)) < 0);
        bad = bad || json_object_set_new(o, "epoch", json_integer((json_int_t)r->ep[e].epoch)) < 0 ||
              json_object_set(o, "gens", gens) < 0 || json_array_append(eps, o) < 0;
        json_decref(gens);
        json_decref(o);
    }
    if (bad || json_object_set(root, "epochs", eps) < 0) {
        json_decref(root);
        root = NULL;
    }
    json_decref(eps);
    return root;
}

sl_resume_carry_t *sl_resume_carry_dup(const sl_resume_carry_t *c)
{
    sl_resume_carry_t *d = malloc(sizeof(*d));
    sl_resume_run_t *runs = malloc((c->nruns > 0 ? c->nruns : 1) * sizeof(*runs));
    if (d == NULL || runs == NULL) {
        free(d);
        free(runs);
        return NULL;
    }
    *d = *c;
    d->runs = runs;
    memcpy(runs, c->runs, c->nruns * sizeof(*runs));
    return d;
}

sl_resume_t *sl_resume_dup(const sl_resume_t *r)
{
    if (r == NULL) {
        return NULL;
    }
    sl_resume_t *d = calloc(1, sizeof(*d));
    if (d == NULL || (d->ep = calloc(r->nepochs, sizeof(*d->ep))) == NULL) {
        free(d);
        return NULL;
    }
    d->nepochs = r->nepochs;
    for (uint32_t e = 0; e < r->nepochs; e++) {
        const sl_resume_epoch_t *s = &r->ep[e];
        d->ep[e].epoch = s->epoch;
        d->ep[e].gens = calloc(s->ngens, sizeof(*d->ep[e].gens));
        if (d->ep[e].gens == NULL) {
            sl_resume_free(d);
            return NULL;
        }
        d->ep[e].ngens = s->ngens;
        if (s->carry != NULL && (d->ep[e].carry = sl_resume_carry_dup(s->carry)) == NULL) {
            sl_resume_free(d);
            return NULL;
        }
        for (uint32_t g = 0; g < s->ngens; g++) {
            sl_resume_gen_t *dg = &d->ep[e].gens[g];
            dg->world = s->gens[g].world;
            dg->runs = malloc((s->gens[g].nruns > 0 ? s->gens[g].nruns : 1) * sizeof(*dg->runs));
            if (dg->runs == NULL) {
                sl_resume_free(d);
                return NULL;
            }
            dg->nruns = s->gens[g].nruns;
            memcpy(dg->runs, s->gens[g].runs, dg->nruns * sizeof(*dg->runs));
        }
    }
    return d;
}
