/* spec_batching: the "batching" section: count-based (default), balanced
 * batches (common/order/balance.h) or packed ones (common/order/pack.h),
 * with their trainer cost model. Parsing thread only. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/spec/spec_impl.h"

static const char *const batching_keys[] = {"mode",      "microbatches", "token_budget",
                                            "lookahead", "model",        "tile_budget",
                                            NULL};
static const char *const model_keys[] = {"a", "b", "c", "d", NULL};
static const char *const mode_names[] = {"count", "balanced", "packed"};

#define MICRO_MAX 4096
#define LOOKAHEAD_MAX 1024
#define BUDGET_MAX ((int64_t)1 << 40)

/* A coefficient: a finite number >= 0 (a cost never falls with size). */
static int get_coef(sl_spec_pctx_t *c, json_t *m, const char *key, double *out)
{
    json_t *v = json_object_get(m, key);
    if (v == NULL) {
        return 0;
    }
    if (!sl_spec_as_number(v, out) || !isfinite(*out) || *out < 0) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, key, "must be a number >= 0, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    return 0;
}

/* Tokens every sample has whatever its content: the template's fixed ids
 * (bos/eos, chat markers). A pack budget at or below it holds no sample. */
static uint64_t template_fixed_tokens(const sl_spec_t *spec)
{
    for (uint32_t i = 0; i < spec->nstages; i++) {
        if (spec->stages[i].op == SL_OP_TEMPLATE) {
            return sl_tmpl_fixed_ids(&spec->stages[i]);
        }
    }
    return 0;
}

int sl_spec_parse_batching(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    sl_batching_t *b = &spec->batching;
    /* Defaults: one microbatch, 4 steps of look-ahead, cost = tokens + a
     * sample's fixed part (override with the trainer's measured model). */
    *b = (sl_batching_t){.microbatches = 1, .lookahead = 4, .a = 1.0, .d = 16.0}; /* as init */
    json_t *v = json_object_get(root, "batching");
    if (v == NULL) {
        return 0;
    }
    sl_spec_push(c, "batching");
    if (!json_is_object(v)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_perr(c, "must be an object like {\"mode\": \"balanced\", "
                               "\"microbatches\": 2}, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    int rc = sl_spec_check_keys(c, v, batching_keys, "");
    int mode = 0;
    if (rc == 0) {
        rc = sl_spec_get_enum(c, v, "mode", true, mode_names, 3, &mode);
    }
    if (rc == 0) {
        rc = sl_spec_get_u32(c, v, "microbatches", false, 1, MICRO_MAX, &b->microbatches);
    }
    int64_t budget = 0, tiles = 0;
    if (rc == 0) {
        /* A pack is defined by its budget: packed needs one, > 0. */
        rc = sl_spec_get_int(c, v, "token_budget", mode == SL_BATCHING_PACKED,
                             mode == SL_BATCHING_PACKED ? 1 : 0, BUDGET_MAX, &budget);
    }
    if (rc == 0 && mode == SL_BATCHING_PACKED) {
        b->lookahead = 8; /* a pool of 8 steps: measured in tests/unit/test_pack.c */
        rc = sl_spec_get_int(c, v, "tile_budget", false, 0, BUDGET_MAX, &tiles);
    } else if (rc == 0 && json_object_get(v, "tile_budget") != NULL) {
        rc = sl_spec_ferr(c, "tile_budget", "only \"packed\" batching has a tile budget");
    }
    if (rc == 0) {
        rc = sl_spec_get_u32(c, v, "lookahead", false, 1, LOOKAHEAD_MAX, &b->lookahead);
    }
    json_t *m = json_object_get(v, "model");
    if (rc == 0 && m != NULL) {
        sl_spec_push(c, "model");
        if (!json_is_object(m)) {
            return sl_spec_perr(c, "must be an object {\"a\": .., \"b\": .., \"c\": .., "
                                   "\"d\": ..}");
        }
        rc = sl_spec_check_keys(c, m, model_keys, "");
        if (rc == 0) {
            rc = get_coef(c, m, "a", &b->a);
        }
        if (rc == 0) {
            rc = get_coef(c, m, "b", &b->b);
        }
        if (rc == 0) {
            rc = get_coef(c, m, "c", &b->c);
        }
        if (rc == 0) {
            rc = get_coef(c, m, "d", &b->d);
        }
        if (rc < 0) {
            return rc;
        }
        sl_spec_pop(c);
    }
    if (rc < 0) {
        return rc;
    }
    if (mode != SL_BATCHING_COUNT && !sl_spec_is_record(spec)) {
        /* Every image sample costs the trainer the same: nothing to balance. */
        return sl_spec_ferr(c, "mode",
                            "\"%s\" needs a multimodal source (webdataset or jsonl): "
                            "image samples all cost the trainer the same",
                            mode_names[mode]);
    }
    uint64_t fixed = template_fixed_tokens(spec);
    if (mode == SL_BATCHING_PACKED && (uint64_t)budget <= fixed) {
        return sl_spec_ferr(c, "token_budget",
                            "must be larger than the template's fixed tokens per sample (%llu), "
                            "got %lld",
                            (unsigned long long)fixed, (long long)budget);
    }
    b->mode = (sl_batching_e)mode;
    b->token_budget = (uint64_t)budget;
    b->tile_budget = (uint64_t)tiles;
    if (b->mode != SL_BATCHING_COUNT) {
        /* A schedule is an order of batches: arrival order would mix it. */
        spec->deterministic = true;
    }
    sl_spec_pop(c);
    return 0;
}

json_t *sl_spec_batching_json(const sl_spec_t *spec)
{
    const sl_batching_t *b = &spec->batching;
    int m = b->mode <= SL_BATCHING_PACKED ? (int)b->mode : 0;
    json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:{s:f, s:f, s:f, s:f}}", "mode", mode_names[m],
                          "microbatches", (json_int_t)b->microbatches, "token_budget",
                          (json_int_t)b->token_budget, "lookahead", (json_int_t)b->lookahead,
                          "model", "a", b->a, "b", b->b, "c", b->c, "d", b->d);
    /* Balanced specs keep their canonical form too. */
    if (j != NULL && b->mode == SL_BATCHING_PACKED &&
        json_object_set_new(j, "tile_budget", json_integer((json_int_t)b->tile_budget)) < 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}
