/* spec_json: the canonical JSON of a parsed spec (sl_spec_to_json): every
 * field, defaults filled in, keys sorted. Any thread; it only reads spec. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/spec/mix.h"
#include "common/spec/resume.h"
#include "common/spec/spec_impl.h"

static json_t *stage_to_json(const sl_stage_spec_t *st)
{
    const sl_op_def_t *d = sl_spec_op_def(st->op);
    if (d == NULL) {
        return NULL;
    }
    return d->to_json != NULL ? d->to_json(st) : json_pack("{s:s}", "op", d->name);
}

/* "compress" and "cache" when not their defaults: uncompressed specs and
 * specs that leave the cache alone keep their canonical form (and hash).
 * 0, or -1 (a value out of range, ENOMEM). */
static int set_modes(const sl_spec_t *spec, json_t *root)
{
    if (spec->compress != SL_COMPRESS_OFF &&
        ((size_t)spec->compress >= SL_SPEC_NCOMPRESS ||
         json_object_set_new(root, "compress",
                             json_string(sl_spec_compress_names[spec->compress])) < 0)) {
        return -1;
    }
    if (spec->cache != SL_CACHE_AUTO &&
        ((size_t)spec->cache >= SL_SPEC_NCACHE ||
         json_object_set_new(root, "cache", json_string(sl_spec_cache_names[spec->cache])) < 0)) {
        return -1;
    }
    return 0;
}

char *sl_spec_to_json(const sl_spec_t *spec)
{
    /* The seed travels as a JSON integer, which jansson holds as int64. */
    if (spec->seed > (uint64_t)INT64_MAX || (size_t)spec->source_type >= SL_SPEC_NSOURCE_TYPES ||
        spec->nstages > SL_SPEC_MAX_STAGES || (size_t)spec->on_error >= SL_SPEC_NON_ERROR ||
        (size_t)spec->offload >= SL_SPEC_NOFFLOAD) {
        return NULL;
    }
    json_t *stages = json_array();
    if (stages == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < spec->nstages; i++) {
        if (json_array_append_new(stages, stage_to_json(&spec->stages[i])) < 0) {
            json_decref(stages);
            return NULL;
        }
    }
    json_t *offload;
    if (spec->offload == SL_OFFLOAD_FIXED) {
        offload = json_pack("{s:I, s:f}", "split", (json_int_t)spec->split, "local_share",
                            spec->local_share);
    } else {
        offload = json_string(sl_spec_offload_names[spec->offload]);
    }
    /* "o" steals the references, also when json_pack fails. */
    json_t *root = json_pack("{s:{s:s, s:s#, s:b, s:I}, s:o, s:I, s:I, s:b, s:b, s:o, s:s, s:I}",
                             "source", "type", sl_spec_source_type_names[spec->source_type], "path",
                             spec->source_path, (int)strnlen(spec->source_path, SL_SPEC_PATH_MAX),
                             "shuffle", (int)spec->shuffle, "seed", (json_int_t)spec->seed,
                             "stages", stages, "batch_size", (json_int_t)spec->batch_size, "epochs",
                             (json_int_t)spec->epochs, "drop_last", (int)spec->drop_last,
                             "deterministic", (int)spec->deterministic, "offload", offload,
                             "on_error", sl_spec_on_error_names[spec->on_error], "max_pixels",
                             (json_int_t)spec->max_pixels);
    if (root == NULL) {
        return NULL;
    }
    /* Specs without block shuffle keep their canonical form (and hash). */
    if (spec->shuffle_block > 0 &&
        json_object_set_new(json_object_get(root, "source"), "shuffle_block",
                            json_integer(spec->shuffle_block)) < 0) {
        json_decref(root);
        return NULL;
    }
    /* Unnamed specs keep their canonical form (and spec hash). */
    size_t nlen = strnlen(spec->name, SL_SPEC_NAME_MAX);
    if (nlen > 0 && json_object_set_new(root, "name", json_stringn(spec->name, nlen)) < 0) {
        json_decref(root);
        return NULL;
    }
    /* Single-consumer specs keep their canonical form (and spec hash). */
    if (spec->world_size > 1 &&
        (spec->rank >= spec->world_size || (size_t)spec->rank_padding >= SL_SPEC_NRANK_PADDING ||
         json_object_set_new(root, "world_size", json_integer(spec->world_size)) < 0 ||
         json_object_set_new(root, "rank", json_integer(spec->rank)) < 0 ||
         json_object_set_new(root, "rank_padding",
                             json_string(sl_spec_rank_padding_names[spec->rank_padding])) < 0)) {
        json_decref(root);
        return NULL;
    }
    if (set_modes(spec, root) < 0) {
        json_decref(root);
        return NULL;
    }
    /* Count-based specs keep their canonical form too. */
    if (spec->batching.mode != SL_BATCHING_COUNT &&
        json_object_set_new(root, "batching", sl_spec_batching_json(spec)) < 0) {
        json_decref(root);
        return NULL;
    }
    /* Fresh jobs keep their canonical form too. */
    if (spec->resume != NULL &&
        json_object_set_new(root, "resume", sl_resume_to_json(spec->resume)) < 0) {
        json_decref(root);
        return NULL;
    }
    /* A mixed spec: "mix" in place of "source" (which holds the first's). */
    if (spec->mix != NULL &&
        (json_object_del(root, "source") < 0 ||
         json_object_set_new(root, "mix", sl_mix_to_json(spec->mix, spec->seed, spec->shuffle)) <
             0 ||
         sl_mix_stages_to_json(spec->mix, root) < 0)) {
        json_decref(root);
        return NULL;
    }
    if (sl_spec_batch_tfs_json(spec, root) < 0) {
        json_decref(root);
        return NULL;
    }
    char *out = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(root);
    return out;
}
