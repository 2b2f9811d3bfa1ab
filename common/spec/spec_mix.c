/* spec_mix: the "mix" section of a spec (common/spec/mix.h,
 * docs/mixing.md): parse, canonical JSON, copy, and the resolution of
 * samples_per_epoch from the sources' sizes. Called on the parsing thread
 * (parse) or by whoever owns the spec. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/spec/mix.h"
#include "common/spec/spec_impl.h"

static const char *const mix_keys[] = {"sources", "samples_per_epoch", "stop", "schedule",
                                       "seed",    "shuffle",           NULL};
static const char *const entry_keys[] = {"name", "weight", "source", "stages", "count", NULL};
static const char *const msrc_keys[] = {"type", "path", NULL};
static const char *const step_keys[] = {"from_step", "weights", NULL};
/* A source's "count" (written by the host that opened it): source.h's bound. */
#define MIX_COUNT_MAX (INT64_C(50) * 1000 * 1000)

static const char *const k_stop_names[SL_MIX_NSTOP] = {"all_exhausted", "first_exhausted"};

const char *sl_mix_stop_name(sl_mix_stop_e s)
{
    return (unsigned)s < SL_MIX_NSTOP ? k_stop_names[s] : "?";
}

void sl_mix_free(sl_mix_t *mix) { free(mix); }

sl_mix_t *sl_mix_dup(const sl_mix_t *mix)
{
    sl_mix_t *d = malloc(sizeof(*d));
    if (d != NULL) {
        memcpy(d, mix, sizeof(*d));
    }
    return d;
}

/* A weight: a finite number; > 0 (positive) or >= 0 (a schedule's). */
static int get_weight(sl_spec_pctx_t *c, json_t *obj, const char *key, bool positive, double *out)
{
    json_t *v = json_object_get(obj, key);
    char got[SPEC_SHOWN_MAX + 8];
    double w = 0.0;
    if (v == NULL) {
        return sl_spec_ferr(c, key, "missing (required): a number > 0");
    }
    if (!sl_spec_as_number(v, &w) || !isfinite(w) || w < 0.0 || (positive && w == 0.0)) {
        return sl_spec_ferr(c, key, "must be a finite number %s, got %s", positive ? "> 0" : ">= 0",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    *out = w;
    return 0;
}

static int parse_name(sl_spec_pctx_t *c, json_t *e, const sl_mix_t *mix, char *out)
{
    json_t *v = json_object_get(e, "name");
    char got[SPEC_SHOWN_MAX + 8];
    if (v == NULL) {
        return sl_spec_ferr(c, "name", "missing (required): what the source is called");
    }
    size_t len = json_is_string(v) ? json_string_length(v) : 0;
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (len == 0 || len >= SL_MIX_NAME_MAX || strlen(s) != len) {
        return sl_spec_ferr(c, "name", "must be a string of 1..%d bytes, got %s",
                            SL_MIX_NAME_MAX - 1, sl_spec_describe(v, got, sizeof(got)));
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f || s[i] == '"' || s[i] == '\\') {
            return sl_spec_ferr(c, "name",
                                "must not contain spaces, quotes or control characters (it "
                                "is a metrics label), got %s",
                                sl_spec_describe(v, got, sizeof(got)));
        }
    }
    for (uint32_t i = 0; i < mix->nsources; i++) {
        if (strcmp(mix->src[i].name, s) == 0) {
            return sl_spec_ferr(c, "name", "duplicate: sources[%u] is also called \"%s\"", i, s);
        }
    }
    memcpy(out, s, len + 1);
    return 0;
}

static int parse_entry_source(sl_spec_pctx_t *c, json_t *e, sl_mix_source_t *ms)
{
    json_t *src = json_object_get(e, "source");
    char got[SPEC_SHOWN_MAX + 8];
    if (src == NULL || !json_is_object(src)) {
        return sl_spec_ferr(c, "source",
                            "must be an object like {\"type\": \"jsonl\", \"path\": "
                            "\"docs.jsonl\"}, got %s",
                            src == NULL ? "nothing" : sl_spec_describe(src, got, sizeof(got)));
    }
    sl_spec_push(c, "source");
    int rc = sl_spec_check_keys(c, src, msrc_keys, "");
    int type = 0;
    if (rc == 0) {
        rc = sl_spec_get_enum(c, src, "type", true, sl_spec_source_type_names,
                              SL_SPEC_NSOURCE_TYPES, &type);
    }
    if (rc == 0) {
        ms->type = (sl_source_type_e)type;
        rc = sl_spec_get_relpath(c, src, "path", ms->path, sizeof(ms->path));
    }
    if (rc == 0) {
        sl_spec_pop(c);
    }
    return rc;
}

static int parse_entry(sl_spec_pctx_t *c, json_t *e, sl_mix_t *mix)
{
    char got[SPEC_SHOWN_MAX + 8];
    if (!json_is_object(e)) {
        return sl_spec_perr(c,
                            "must be an object with \"name\", \"weight\" and \"source\", "
                            "got %s",
                            sl_spec_describe(e, got, sizeof(got)));
    }
    sl_mix_source_t *ms = &mix->src[mix->nsources];
    memset(ms, 0, sizeof(*ms));
    int rc = sl_spec_check_keys(c, e, entry_keys, "");
    if (rc == 0) {
        rc = parse_name(c, e, mix, ms->name);
    }
    if (rc == 0) {
        rc = get_weight(c, e, "weight", true, &ms->weight);
    }
    if (rc == 0) {
        rc = parse_entry_source(c, e, ms);
    }
    int64_t count = 0;
    if (rc == 0) {
        rc = sl_spec_get_int(c, e, "count", false, 1, MIX_COUNT_MAX, &count);
    }
    if (rc == 0) {
        ms->count = (uint64_t)count;
        mix->nsources++;
    }
    return rc;
}

static int parse_sources(sl_spec_pctx_t *c, json_t *m, sl_mix_t *mix)
{
    json_t *a = json_object_get(m, "sources");
    char got[SPEC_SHOWN_MAX + 8];
    if (a == NULL || !json_is_array(a) || json_array_size(a) == 0 ||
        json_array_size(a) > SL_MIX_MAX_SOURCES) {
        return sl_spec_ferr(c, "sources", "must be an array of 1..%d sources, got %s",
                            SL_MIX_MAX_SOURCES,
                            a == NULL ? "nothing" : sl_spec_describe(a, got, sizeof(got)));
    }
    sl_spec_push(c, "sources");
    for (size_t i = 0; i < json_array_size(a); i++) {
        sl_spec_push_index(c, i);
        int rc = parse_entry(c, json_array_get(a, i), mix);
        if (rc < 0) {
            return rc;
        }
        sl_spec_pop(c);
    }
    sl_spec_pop(c);
    /* Every source must make the same sample kind for the one stage list. */
    for (uint32_t i = 1; i < mix->nsources; i++) {
        bool r0 = mix->src[0].type == SL_SRC_WEBDATASET || mix->src[0].type == SL_SRC_JSONL;
        bool ri = mix->src[i].type == SL_SRC_WEBDATASET || mix->src[i].type == SL_SRC_JSONL;
        if (r0 != ri) {
            return sl_spec_ferr(c, "sources",
                                "sources[%u] (%s) and sources[0] (%s) make different sample "
                                "kinds (records vs images): mix records with records",
                                i, sl_source_type_name(mix->src[i].type),
                                sl_source_type_name(mix->src[0].type));
        }
    }
    return 0;
}

static int parse_step(sl_spec_pctx_t *c, json_t *st, sl_mix_t *mix, sl_mix_step_t *out)
{
    char got[SPEC_SHOWN_MAX + 8];
    if (!json_is_object(st)) {
        return sl_spec_perr(c, "must be an object {\"from_step\": S, \"weights\": {...}}, got %s",
                            sl_spec_describe(st, got, sizeof(got)));
    }
    int64_t from = 0;
    int rc = sl_spec_check_keys(c, st, step_keys, "");
    if (rc == 0) {
        rc = sl_spec_get_int(c, st, "from_step", true, 1, INT64_MAX, &from);
    }
    if (rc < 0) {
        return rc;
    }
    uint64_t prev = mix->nsteps > 0 ? mix->steps[mix->nsteps - 1].from_step : 0;
    if ((uint64_t)from <= prev) {
        return sl_spec_ferr(c, "from_step",
                            "must be larger than the previous entry's (%llu): steps go forward",
                            (unsigned long long)prev);
    }
    out->from_step = (uint64_t)from;
    json_t *w = json_object_get(st, "weights");
    if (w == NULL || !json_is_object(w)) {
        return sl_spec_ferr(c, "weights", "must be an object {\"NAME\": weight, ...}, got %s",
                            w == NULL ? "nothing" : sl_spec_describe(w, got, sizeof(got)));
    }
    sl_spec_push(c, "weights");
    const char *key;
    json_t *v;
    double sum = 0.0;
    json_object_foreach(w, key, v)
    {
        uint32_t i = 0;
        while (i < mix->nsources && strcmp(mix->src[i].name, key) != 0) {
            i++;
        }
        if (i == mix->nsources) {
            return sl_spec_ferr(c, key, "names no source of \"mix\".\"sources\"");
        }
        rc = get_weight(c, w, key, false, &out->weights[i]);
        if (rc < 0) {
            return rc;
        }
        sum += out->weights[i];
    }
    if (!(sum > 0.0)) {
        return sl_spec_perr(c, "must give some source a weight > 0 (all are 0)");
    }
    sl_spec_pop(c);
    return 0;
}

static int parse_schedule(sl_spec_pctx_t *c, json_t *m, sl_mix_t *mix)
{
    json_t *a = json_object_get(m, "schedule");
    char got[SPEC_SHOWN_MAX + 8];
    if (a == NULL) {
        return 0;
    }
    if (!json_is_array(a) || json_array_size(a) > SL_MIX_MAX_SCHEDULE) {
        return sl_spec_ferr(c, "schedule", "must be an array of at most %d entries, got %s",
                            SL_MIX_MAX_SCHEDULE, sl_spec_describe(a, got, sizeof(got)));
    }
    sl_spec_push(c, "schedule");
    for (size_t i = 0; i < json_array_size(a); i++) {
        sl_spec_push_index(c, i);
        sl_mix_step_t *st = &mix->steps[mix->nsteps];
        memset(st, 0, sizeof(*st));
        int rc = parse_step(c, json_array_get(a, i), mix, st);
        if (rc < 0) {
            return rc;
        }
        mix->nsteps++;
        sl_spec_pop(c);
    }
    sl_spec_pop(c);
    return 0;
}

static int parse_mix_body(sl_spec_pctx_t *c, json_t *m, sl_mix_t *mix, sl_spec_t *spec)
{
    int rc = sl_spec_check_keys(c, m, mix_keys, "");
    if (rc == 0) {
        rc = parse_sources(c, m, mix);
    }
    int stop = (int)mix->stop;
    if (rc == 0) {
        rc = sl_spec_get_enum(c, m, "stop", false, k_stop_names, SL_MIX_NSTOP, &stop);
        mix->stop = (sl_mix_stop_e)stop;
    }
    int64_t spe = 0;
    if (rc == 0) {
        rc = sl_spec_get_int(c, m, "samples_per_epoch", false, 1, (int64_t)SL_MIX_SPE_MAX, &spe);
        mix->samples_per_epoch = (uint64_t)spe;
    }
    if (rc == 0) {
        rc = parse_schedule(c, m, mix);
    }
    if (rc == 0) {
        rc = sl_spec_get_bool(c, m, "shuffle", &spec->shuffle);
    }
    int64_t seed = (int64_t)spec->seed;
    if (rc == 0) {
        rc = sl_spec_get_int(c, m, "seed", false, 0, INT64_MAX, &seed);
        spec->seed = (uint64_t)seed;
    }
    return rc;
}

int sl_spec_parse_mix(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *m = json_object_get(root, "mix");
    char got[SPEC_SHOWN_MAX + 8];
    if (json_object_get(root, "source") != NULL) {
        return sl_spec_ferr(c, "mix",
                            "and \"source\" both given: a job reads one \"source\" "
                            "or a \"mix\" of sources, not both");
    }
    if (!json_is_object(m)) {
        return sl_spec_ferr(c, "mix", "must be an object with \"sources\", got %s",
                            sl_spec_describe(m, got, sizeof(got)));
    }
    sl_mix_t *mix = calloc(1, sizeof(*mix));
    if (mix == NULL) {
        return sl_spec_err_msg(c, -ENOMEM, "%s: out of memory parsing \"mix\"", c->name);
    }
    sl_spec_push(c, "mix");
    int rc = parse_mix_body(c, m, mix, spec);
    if (rc < 0) {
        free(mix);
        return rc;
    }
    sl_spec_pop(c);
    rc = sl_spec_parse_mix_stages(c, root, mix); /* needs the sources' kinds */
    if (rc < 0) {
        free(mix);
        return rc;
    }
    spec->mix = mix;
    spec->source_type = mix->src[0].type; /* the sample kind, for the stage rules */
    /* What messages and /status call the source: "mix:NAME+NAME..." (never
     * opened as a path: sl_source_open_spec opens the mix). */
    size_t len = (size_t)snprintf(spec->source_path, sizeof(spec->source_path), "mix:");
    for (uint32_t i = 0; i < mix->nsources && len < sizeof(spec->source_path); i++) {
        len += (size_t)snprintf(spec->source_path + len, sizeof(spec->source_path) - len, "%s%s",
                                i > 0 ? "+" : "", mix->src[i].name);
    }
    spec->shuffle_block = 0; /* the blend shuffles each source on its own */
    return 0;
}

/* ---- canonical JSON --------------------------------------------------- */

static json_t *source_json(const sl_mix_source_t *s)
{
    json_t *o = json_pack("{s:s, s:f, s:{s:s, s:s}}", "name", s->name, "weight", s->weight,
                          "source", "type", sl_source_type_name(s->type), "path", s->path);
    if (o != NULL && s->count > 0 &&
        json_object_set_new(o, "count", json_integer((json_int_t)s->count)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *step_json(const sl_mix_t *mix, const sl_mix_step_t *st)
{
    json_t *w = json_object();
    for (uint32_t i = 0; w != NULL && i < mix->nsources; i++) {
        if (st->weights[i] > 0.0 &&
            json_object_set_new(w, mix->src[i].name, json_real(st->weights[i])) < 0) {
            json_decref(w);
            return NULL;
        }
    }
    return w == NULL
               ? NULL
               : json_pack("{s:I, s:o}", "from_step", (json_int_t)st->from_step, "weights", w);
}

json_t *sl_mix_to_json(const sl_mix_t *mix, uint64_t seed, bool shuffle)
{
    json_t *srcs = json_array(), *steps = json_array();
    for (uint32_t i = 0; srcs != NULL && i < mix->nsources; i++) {
        if (json_array_append_new(srcs, source_json(&mix->src[i])) < 0) {
            json_decref(srcs);
            srcs = NULL;
        }
    }
    for (uint32_t i = 0; steps != NULL && i < mix->nsteps; i++) {
        if (json_array_append_new(steps, step_json(mix, &mix->steps[i])) < 0) {
            json_decref(steps);
            steps = NULL;
        }
    }
    json_t *o = json_pack("{s:o, s:s, s:I, s:b}", "sources", srcs, "stop",
                          sl_mix_stop_name(mix->stop), "seed", (json_int_t)seed, "shuffle",
                          (int)shuffle);
    if (o == NULL) {
        json_decref(steps);
        return NULL;
    }
    if ((mix->nsteps > 0 && json_object_set(o, "schedule", steps) < 0) ||
        (mix->samples_per_epoch > 0 &&
         json_object_set_new(o, "samples_per_epoch",
                             json_integer((json_int_t)mix->samples_per_epoch)) < 0)) {
        json_decref(o);
        o = NULL;
    }
    json_decref(steps);
    return o;
}

/* ---- weights and resolution ------------------------------------------- */

void sl_mix_weights_at(const sl_mix_t *mix, uint64_t step, double out[SL_MIX_MAX_SOURCES])
{
    const sl_mix_step_t *in_force = NULL;
    for (uint32_t i = 0; i < mix->nsteps && mix->steps[i].from_step <= step; i++) {
        in_force = &mix->steps[i];
    }
    for (uint32_t i = 0; i < SL_MIX_MAX_SOURCES; i++) {
        out[i] = i >= mix->nsources ? 0.0
                 : in_force != NULL ? in_force->weights[i]
                                    : mix->src[i].weight;
    }
}

uint64_t sl_mix_default_spe(const sl_mix_t *mix, const uint64_t *counts)
{
    double sum = 0.0;
    for (uint32_t i = 0; i < mix->nsources; i++) {
        sum += mix->src[i].weight;
    }
    double best = mix->stop == SL_MIX_STOP_ALL ? 0.0 : INFINITY;
    for (uint32_t i = 0; i < mix->nsources; i++) {
        double need = (double)counts[i] * sum / mix->src[i].weight;
        best = mix->stop == SL_MIX_STOP_ALL ? fmax(best, ceil(need - 1e-9))
                                            : fmin(best, floor(need + 1e-9));
    }
    if (!(best >= 1.0)) {
        return 1;
    }
    return best > (double)SL_MIX_SPE_MAX ? SL_MIX_SPE_MAX : (uint64_t)best;
}

int sl_mix_resolve(sl_mix_t *mix, const uint64_t *counts, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < mix->nsources; i++) {
        if (counts[i] == 0) {
            return sl_err(err, errlen, -EINVAL, "mix.sources[%u] (\"%s\"): %s '%s' has no samples",
                          i, mix->src[i].name, sl_source_type_name(mix->src[i].type),
                          mix->src[i].path);
        }
        if (mix->src[i].count != 0 && mix->src[i].count != counts[i]) {
            return sl_err(err, errlen, -ESTALE,
                          "mix.sources[%u] (\"%s\"): %llu samples here, %llu in the spec (the "
                          "data differs between hosts)",
                          i, mix->src[i].name, (unsigned long long)counts[i],
                          (unsigned long long)mix->src[i].count);
        }
    }
    for (uint32_t i = 0; i < mix->nsources; i++) {
        mix->src[i].count = counts[i];
    }
    if (mix->samples_per_epoch == 0) {
        mix->samples_per_epoch = sl_mix_default_spe(mix, counts);
    }
    return 0;
}

bool sl_mix_resolved(const sl_mix_t *mix)
{
    for (uint32_t i = 0; i < mix->nsources; i++) {
        if (mix->src[i].count == 0) {
            return false;
        }
    }
    return mix->nsources > 0 && mix->samples_per_epoch > 0;
}

int sl_spec_mix_check(const sl_spec_t *spec, uint64_t n, char *err, size_t errlen)
{
    const sl_mix_t *m = spec->mix;
    if (m == NULL) {
        return 0;
    }
    if (!sl_mix_resolved(m)) {
        return sl_err(err, errlen, -EINVAL,
                      "mix: the sources' \"count\"s and \"samples_per_epoch\" are missing "
                      "(the client that opened the data writes them)");
    }
    uint64_t sum = 0;
    for (uint32_t i = 0; i < m->nsources; i++) {
        sum += m->src[i].count;
    }
    if (sum != n) {
        return sl_err(err, errlen, -EINVAL,
                      "mix: the sources' counts sum to %llu, num_samples is %llu",
                      (unsigned long long)sum, (unsigned long long)n);
    }
    return 0;
}
