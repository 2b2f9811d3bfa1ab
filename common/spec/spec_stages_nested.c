/* spec_stages_nested: random_apply and random_choice, torchvision's
 * RandomApply / RandomChoice over a list of augmentation stages. The nested
 * stages are parsed by their own rows (spec_stages_aug.c) and held in heap
 * arrays the spec owns (spec_aug.h). Parsing thread only; the JSON, clear
 * and copy functions any thread. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/spec/spec_impl.h"

static int get_prob(sl_spec_pctx_t *c, json_t *st, double *out)
{
    json_t *v = json_object_get(st, "p");
    if (v != NULL && (!sl_spec_as_number(v, out) || !(*out >= 0 && *out <= 1))) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, "p", "must be a probability in 0..1, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    return 0;
}

static bool is_nested(sl_op_e op) { return op == SL_OP_RANDOM_APPLY || op == SL_OP_RANDOM_CHOICE; }

/* One element of "ops": an augmentation's stage object, parsed by its row. */
static int parse_nested_op(sl_spec_pctx_t *c, const char *outer, json_t *e, sl_stage_spec_t *out)
{
    char got[SPEC_SHOWN_MAX + 8];
    if (!json_is_object(e)) {
        return sl_spec_perr(c,
                            "must be an augmentation stage like {\"op\": \"color_jitter\"}, "
                            "got %s",
                            sl_spec_describe(e, got, sizeof(got)));
    }
    json_t *opv = json_object_get(e, "op");
    int op = json_is_string(opv) ? sl_spec_op_find(json_string_value(opv), json_string_length(opv))
                                 : -1;
    if (op < 0 || !(sl_op_flags((sl_op_e)op) & SL_OPF_AUGMENT) || is_nested((sl_op_e)op)) {
        return sl_spec_ferr(c, "op",
                            "%s takes augmentation ops only (color_jitter, gaussian_blur, "
                            "random_crop, ...; not decode, geometry, normalize, to_chw or "
                            "another random_apply/random_choice), got %s",
                            outer, opv == NULL ? "none" : sl_spec_describe(opv, got, sizeof(got)));
    }
    const sl_op_def_t *d = sl_spec_op_def((sl_op_e)op);
    int rc = sl_spec_check_keys(c, e, d->keys, d->name);
    if (rc < 0) {
        return rc;
    }
    memset(out, 0, sizeof(*out));
    out->op = (sl_op_e)op;
    rc = d->parse != NULL ? d->parse(c, e, out) : 0;
    if (rc == 0 && out->op == SL_OP_RANDOM_ERASING) {
        rc = sl_spec_check_erasing(c, &out->aug, false); /* nested ops precede normalize */
    }
    return rc;
}

/* "ops" (required): 1..SL_AUG_NESTED_MAX augmentation stages. */
static int parse_nested(sl_spec_pctx_t *c, json_t *st, const char *outer, sl_aug_spec_t *a)
{
    json_t *v = json_object_get(st, "ops");
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n == 0 || n > SL_AUG_NESTED_MAX) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, "ops",
                            "%s a non-empty array of at most %d augmentation stages, "
                            "got %s",
                            v == NULL ? "missing (required):" : "must be", SL_AUG_NESTED_MAX,
                            v == NULL ? "nothing" : sl_spec_describe(v, got, sizeof(got)));
    }
    a->ops = calloc(n, sizeof(*a->ops));
    if (a->ops == NULL) {
        return sl_spec_ferr(c, "ops", "out of memory");
    }
    a->nops = (uint32_t)n;
    sl_spec_push(c, "ops");
    for (size_t i = 0; i < n; i++) {
        sl_spec_push_index(c, i);
        int rc = parse_nested_op(c, outer, json_array_get(v, i), &a->ops[i]);
        if (rc < 0) {
            return rc;
        }
        sl_spec_pop(c);
    }
    sl_spec_pop(c);
    return 0;
}

static int parse_random_apply(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    out->aug.p = 0.5; /* torchvision's RandomApply default */
    int rc = get_prob(c, st, &out->aug.p);
    return rc < 0 ? rc : parse_nested(c, st, "random_apply", &out->aug);
}

/* "p": null (uniform) or one weight >= 0 per op, not all zero. */
static int parse_random_choice(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    sl_aug_spec_t *a = &out->aug;
    int rc = parse_nested(c, st, "random_choice", a);
    json_t *v = json_object_get(st, "p");
    if (rc < 0 || v == NULL || json_is_null(v)) {
        return rc;
    }
    bool ok = json_is_array(v) && json_array_size(v) == a->nops;
    double w[SL_AUG_NESTED_MAX], sum = 0;
    for (size_t i = 0; ok && i < a->nops; i++) {
        ok = sl_spec_as_number(json_array_get(v, i), &w[i]) && w[i] >= 0 && isfinite(w[i]);
        sum += ok ? w[i] : 0;
    }
    if (!ok || !(sum > 0) || !isfinite(sum)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, "p",
                            "must be null or %u weights >= 0 (one per op, not all 0), got %s",
                            a->nops, sl_spec_describe(v, got, sizeof(got)));
    }
    a->weights = malloc(a->nops * sizeof(double));
    if (a->weights == NULL) {
        return sl_spec_ferr(c, "p", "out of memory");
    }
    memcpy(a->weights, w, a->nops * sizeof(double));
    return 0;
}

static void nested_clear(sl_stage_spec_t *st)
{
    free(st->aug.ops);
    free(st->aug.weights);
    st->aug.ops = NULL;
    st->aug.weights = NULL;
}

/* dst is a byte copy of src: the nested ops own nothing, so a byte copy
 * of the array is deep. */
static int nested_copy(sl_stage_spec_t *dst, const sl_stage_spec_t *src)
{
    const sl_aug_spec_t *a = &src->aug;
    dst->aug.ops = NULL;
    dst->aug.weights = NULL;
    if (a->ops != NULL) {
        dst->aug.ops = malloc(a->nops * sizeof(*a->ops));
        if (dst->aug.ops == NULL) {
            return -ENOMEM;
        }
        memcpy(dst->aug.ops, a->ops, a->nops * sizeof(*a->ops));
    }
    if (a->weights != NULL) {
        dst->aug.weights = malloc(a->nops * sizeof(double));
        if (dst->aug.weights == NULL) {
            nested_clear(dst);
            return -ENOMEM;
        }
        memcpy(dst->aug.weights, a->weights, a->nops * sizeof(double));
    }
    return 0;
}

/* The nested ops' canonical JSON, by their rows. */
static json_t *ops_json(const sl_aug_spec_t *a)
{
    json_t *arr = json_array();
    for (uint32_t i = 0; arr != NULL && i < a->nops; i++) {
        const sl_op_def_t *d = sl_spec_op_def(a->ops[i].op);
        json_t *e = d == NULL ? NULL : d->to_json(&a->ops[i]);
        if (e == NULL || json_array_append_new(arr, e) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *random_apply_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:f, s:o}", "op", "random_apply", "p", st->aug.p, "ops",
                     ops_json(&st->aug));
}

static json_t *random_choice_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    json_t *w = a->weights != NULL ? json_array() : json_null();
    for (uint32_t i = 0; w != NULL && a->weights != NULL && i < a->nops; i++) {
        if (json_array_append_new(w, json_real(a->weights[i])) < 0) {
            json_decref(w);
            w = NULL;
        }
    }
    return json_pack("{s:s, s:o, s:o}", "op", "random_choice", "ops", ops_json(a), "p", w);
}

/* The nested ops draw from the same stream, after the outer draw. */
const sl_op_def_t sl_op_def_random_apply = {
    .name = "random_apply",
    .keys = (const char *const[]){"op", "p", "ops", NULL},
    .parse = parse_random_apply,
    .to_json = random_apply_json,
    .flags = SL_OPF_AUGMENT | SL_OPF_RANDOM | SL_OPF_ON_PIXELS | SL_OPF_WHOLE,
    .before = SL_ORD_BIT(SL_ORD_NORMALIZE) | SL_ORD_BIT(SL_ORD_TO_CHW) | SL_ORD_BIT(SL_ORD_TILES),
    .clear = nested_clear,
    .copy = nested_copy,
};
const sl_op_def_t sl_op_def_random_choice = {
    .name = "random_choice",
    .keys = (const char *const[]){"op", "ops", "p", NULL},
    .parse = parse_random_choice,
    .to_json = random_choice_json,
    .flags = SL_OPF_AUGMENT | SL_OPF_RANDOM | SL_OPF_ON_PIXELS | SL_OPF_WHOLE,
    .before = SL_ORD_BIT(SL_ORD_NORMALIZE) | SL_ORD_BIT(SL_ORD_TO_CHW) | SL_ORD_BIT(SL_ORD_TILES),
    .clear = nested_clear,
    .copy = nested_copy,
};
