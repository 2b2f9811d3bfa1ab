/* spec_stages_aug: the keys of the built-in augmentation ops, with
 * torchvision's names, forms and defaults, and their canonical JSON (every
 * parameter, defaults filled in, ranges as [min, max]). Order rules live
 * with the others in spec_stages.c. One op-table row per op (spec_impl.h).
 * Parsing thread only; the JSON functions any thread. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/spec/spec_impl.h"

#define KERNEL_MAX 255 /* gaussian_blur: a larger kernel is a mistake, not a blur */
#define BINS_MAX 256
#define NUM_OPS_MAX 16
#define PIXEL_MAX 255.0

#define PAD_MAX 4096      /* random_crop: padding per side */
#define SIZE_MAX_PX 16384 /* random_crop: as the other stages' sizes */

static const char *const pad_mode_names[4] = {[SL_PAD_CONSTANT] = "constant",
                                              [SL_PAD_EDGE] = "edge",
                                              [SL_PAD_REFLECT] = "reflect",
                                              [SL_PAD_SYMMETRIC] = "symmetric"};

static const char *const interp_names[2] =
    {[SL_INTERP_NEAREST] = "nearest", [SL_INTERP_BILINEAR] = "bilinear"};

/* How a range key reads: a number x is [center - x, center + x] (the low
 * end raised to lo when clip_lo, as torchvision's ColorJitter does), or,
 * with point, [x, x]; both ends within [lo, hi] (lo excluded if lo_open). */
typedef struct {
    const char *key;
    double center;
    bool point, clip_lo, lo_open;
    double lo, hi;
} range_rule_t;

/* Bounds print as %g: they are round constants of this file. */
static int range_err(sl_spec_pctx_t *c, const range_rule_t *r, const json_t *v)
{
    char got[SPEC_SHOWN_MAX + 8], hi[40] = "";
    if (isfinite(r->hi)) {
        snprintf(hi, sizeof(hi), " <= %g", r->hi);
    }
    return sl_spec_ferr(c, r->key,
                        "must be a number%s or [min, max] with %g %s min <= max%s, got %s",
                        r->point ? "" : " >= 0", r->lo, r->lo_open ? "<" : "<=", hi,
                        sl_spec_describe(v, got, sizeof(got)));
}

/* Absent keeps out (the default). */
static int get_range(sl_spec_pctx_t *c, json_t *st, const range_rule_t *r, double out[2])
{
    json_t *v = json_object_get(st, r->key);
    if (v == NULL) {
        return 0;
    }
    double a, b, x;
    if (sl_spec_as_number(v, &x)) {
        if (!r->point && !(x >= 0)) {
            return range_err(c, r, v);
        }
        a = r->point ? x : r->center - x;
        b = r->point ? x : r->center + x;
        if (r->clip_lo && a < r->lo) {
            a = r->lo;
        }
    } else if (json_is_array(v) && json_array_size(v) == 2 &&
               sl_spec_as_number(json_array_get(v, 0), &a) &&
               sl_spec_as_number(json_array_get(v, 1), &b)) {
        /* checked below */
    } else {
        return range_err(c, r, v);
    }
    bool lo_ok = r->lo_open ? a > r->lo : a >= r->lo;
    if (!(lo_ok && a <= b && b <= r->hi)) {
        return range_err(c, r, v);
    }
    out[0] = a;
    out[1] = b;
    return 0;
}

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

/* A pixel value for every channel: a number, or [R, G, B]; each 0..255.
 * null (when may_null) clears *ret_set. */
static int get_pixel(sl_spec_pctx_t *c, json_t *st, const char *key, bool may_null, bool *ret_set,
                     double out[3])
{
    json_t *v = json_object_get(st, key);
    if (v == NULL) {
        return 0;
    }
    if (may_null && json_is_null(v)) {
        *ret_set = false;
        return 0;
    }
    double x[3];
    bool ok = sl_spec_as_number(v, &x[0]);
    if (ok) {
        x[1] = x[2] = x[0];
    } else if (json_is_array(v) && json_array_size(v) == 3) {
        ok = true;
        for (size_t i = 0; i < 3; i++) {
            ok = ok && sl_spec_as_number(json_array_get(v, i), &x[i]);
        }
    }
    for (size_t i = 0; ok && i < 3; i++) {
        ok = x[i] >= 0 && x[i] <= PIXEL_MAX;
    }
    if (!ok) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, key, "must be a pixel value in 0..255 or [R, G, B]%s, got %s",
                            may_null ? " or null" : "", sl_spec_describe(v, got, sizeof(got)));
    }
    memcpy(out, x, sizeof(x));
    if (ret_set != NULL) {
        *ret_set = true;
    }
    return 0;
}

static int get_interp(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    int interp = (int)a->interpolation;
    int rc = sl_spec_get_enum(c, st, "interpolation", false, interp_names, 2, &interp);
    a->interpolation = (sl_interp_e)interp;
    return rc;
}

/* center: [x, y] in pixels, or null (the image centre). */
static int get_center(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    json_t *v = json_object_get(st, "center");
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) != 2 ||
        !sl_spec_as_number(json_array_get(v, 0), &a->center[0]) ||
        !sl_spec_as_number(json_array_get(v, 1), &a->center[1]) || !isfinite(a->center[0]) ||
        !isfinite(a->center[1])) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, "center", "must be [x, y] in pixels or null, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    a->has_center = true;
    return 0;
}

static int parse_jitter(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    const range_rule_t rules[4] = {
        {"brightness", 1, false, true, false, 0, INFINITY},
        {"contrast", 1, false, true, false, 0, INFINITY},
        {"saturation", 1, false, true, false, 0, INFINITY},
        {"hue", 0, false, false, false, -0.5, 0.5},
    };
    double *out[4] = {a->brightness, a->contrast, a->saturation, a->hue};
    for (int i = 0; i < 4; i++) {
        out[i][0] = out[i][1] = rules[i].center;
        int rc = get_range(c, st, &rules[i], out[i]);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* kernel_size (required): N or [kx, ky], odd, 1..KERNEL_MAX. */
static int parse_blur(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    json_t *v = json_object_get(st, "kernel_size");
    json_int_t k[2] = {0, 0};
    if (json_is_integer(v)) {
        k[0] = k[1] = json_integer_value(v);
    } else if (json_is_array(v) && json_array_size(v) == 2 &&
               json_is_integer(json_array_get(v, 0)) && json_is_integer(json_array_get(v, 1))) {
        k[0] = json_integer_value(json_array_get(v, 0));
        k[1] = json_integer_value(json_array_get(v, 1));
    }
    for (int i = 0; i < 2; i++) {
        if (k[i] < 1 || k[i] > KERNEL_MAX || k[i] % 2 == 0) {
            char got[SPEC_SHOWN_MAX + 8];
            if (v == NULL) {
                return sl_spec_ferr(c, "kernel_size",
                                    "missing (required): an odd integer in "
                                    "1..%d or [kx, ky]",
                                    KERNEL_MAX);
            }
            return sl_spec_ferr(c, "kernel_size",
                                "must be an odd integer in 1..%d or [kx, ky], "
                                "got %s",
                                KERNEL_MAX, sl_spec_describe(v, got, sizeof(got)));
        }
        a->kernel_size[i] = (uint32_t)k[i];
    }
    const range_rule_t sigma = {"sigma", 0, true, false, true, 0, INFINITY};
    a->sigma[0] = 0.1;
    a->sigma[1] = 2.0;
    return get_range(c, st, &sigma, a->sigma);
}

static int parse_erasing(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    const range_rule_t scale = {"scale", 0, true, false, false, 0, 1};
    const range_rule_t ratio = {"ratio", 0, true, false, true, 0, INFINITY};
    a->p = 0.5;
    a->scale[0] = 0.02;
    a->scale[1] = 0.33;
    a->ratio[0] = 0.3;
    a->ratio[1] = 3.3;
    int rc = get_prob(c, st, &a->p);
    if (rc == 0) {
        rc = get_range(c, st, &scale, a->scale);
    }
    if (rc == 0) {
        rc = get_range(c, st, &ratio, a->ratio);
    }
    json_t *v = json_object_get(st, "value");
    if (rc < 0 || v == NULL) {
        return rc;
    }
    if (json_is_string(v) && strcmp(json_string_value(v), "random") == 0) {
        a->value_random = true;
        return 0;
    }
    /* Its units depend on where the stage sits, which only the stages'
     * loop knows: any float here, sl_spec_check_erasing bounds it. */
    bool ok = sl_spec_as_number(v, &a->value[0]);
    if (ok) {
        a->value[1] = a->value[2] = a->value[0];
    } else if (json_is_array(v) && json_array_size(v) == 3) {
        ok = true;
        for (size_t i = 0; i < 3; i++) {
            ok = ok && sl_spec_as_number(json_array_get(v, i), &a->value[i]);
        }
    }
    for (size_t i = 0; ok && i < 3; i++) {
        ok = fabs(a->value[i]) <= FLT_MAX;
    }
    if (!ok) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, "value", "must be a number, [R, G, B] or \"random\", got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    return 0;
}

int sl_spec_check_erasing(sl_spec_pctx_t *c, const sl_aug_spec_t *a, bool normalized)
{
    if (normalized || a->value_random) {
        return 0; /* tensor units: any float, as torchvision's F.erase takes */
    }
    for (size_t i = 0; i < 3; i++) {
        if (!(a->value[i] >= 0 && a->value[i] <= PIXEL_MAX)) {
            return sl_spec_ferr(c, "value",
                                "must be a pixel value in 0..255 before a normalize (after "
                                "one it is in tensor units, any number), got %g",
                                a->value[i]);
        }
    }
    return 0;
}

/* degrees (required): d >= 0 for [-d, d], or [min, max]. */
static int get_degrees(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    const range_rule_t deg = {"degrees", 0, false, false, false, -360, 360};
    if (json_object_get(st, "degrees") == NULL) {
        return sl_spec_ferr(c, "degrees",
                            "missing (required): a number d for [-d, d] or "
                            "[min, max]");
    }
    return get_range(c, st, &deg, a->degrees);
}

/* What every geometric transform takes after its own keys. */
static int get_warp(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    a->has_fill = true;
    int rc = get_interp(c, st, a);
    if (rc == 0) {
        rc = get_center(c, st, a);
    }
    if (rc == 0) {
        rc = get_pixel(c, st, "fill", false, NULL, a->fill);
    }
    return rc;
}

static int parse_rotation(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    int rc = get_degrees(c, st, a);
    return rc == 0 ? get_warp(c, st, a) : rc;
}

/* shear: s >= 0 for x in [-s, s]; [x0, x1]; or [x0, x1, y0, y1]. */
static int get_shear(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    json_t *v = json_object_get(st, "shear");
    if (v == NULL) {
        return 0;
    }
    double s[4] = {0, 0, 0, 0};
    bool ok = false;
    if (sl_spec_as_number(v, &s[1])) {
        s[0] = -s[1];
        ok = s[1] >= 0;
    } else if (json_is_array(v) && (json_array_size(v) == 2 || json_array_size(v) == 4)) {
        ok = true;
        for (size_t i = 0; i < json_array_size(v); i++) {
            ok = ok && sl_spec_as_number(json_array_get(v, i), &s[i]);
        }
    }
    for (int i = 0; ok && i < 4; i += 2) {
        ok = s[i] <= s[i + 1] && s[i] > -90 && s[i + 1] < 90;
    }
    if (!ok) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, "shear",
                            "must be s >= 0, [min, max] or [xmin, xmax, ymin, ymax], "
                            "in degrees within (-90, 90), got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    memcpy(a->shear, s, sizeof(s));
    return 0;
}

static int parse_affine(sl_spec_pctx_t *c, json_t *st, sl_aug_spec_t *a)
{
    const range_rule_t scale = {"scale", 0, true, false, true, 0, INFINITY};
    a->affine_scale[0] = a->affine_scale[1] = 1;
    int rc = get_degrees(c, st, a);
    json_t *v = json_object_get(st, "translate");
    if (rc == 0 && v != NULL) {
        double t[2];
        if (!json_is_array(v) || json_array_size(v) != 2 ||
            !sl_spec_as_number(json_array_get(v, 0), &t[0]) ||
            !sl_spec_as_number(json_array_get(v, 1), &t[1]) || !(t[0] >= 0 && t[0] <= 1) ||
            !(t[1] >= 0 && t[1] <= 1)) {
            char got[SPEC_SHOWN_MAX + 8];
            return sl_spec_ferr(c, "translate",
                                "must be [tx, ty], fractions of the width and "
                                "height in 0..1, got %s",
                                sl_spec_describe(v, got, sizeof(got)));
        }
        memcpy(a->translate, t, sizeof(t));
    }
    if (rc == 0) {
        rc = get_range(c, st, &scale, a->affine_scale);
    }
    if (rc == 0) {
        rc = get_shear(c, st, a);
    }
    return rc == 0 ? get_warp(c, st, a) : rc;
}

static int parse_policy(sl_spec_pctx_t *c, json_t *st, sl_op_e op, sl_aug_spec_t *a)
{
    a->num_magnitude_bins = 31;
    a->num_ops = 2;
    a->magnitude = 9;
    /* At least 2 bins: the posterize table divides by bins - 1. */
    int rc = sl_spec_get_u32(c, st, "num_magnitude_bins", false, 2, BINS_MAX,
                             &a->num_magnitude_bins);
    if (rc == 0 && op == SL_OP_RAND_AUGMENT) {
        rc = sl_spec_get_u32(c, st, "num_ops", false, 0, NUM_OPS_MAX, &a->num_ops);
        if (rc == 0) {
            rc = sl_spec_get_u32(c, st, "magnitude", false, 0, a->num_magnitude_bins - 1,
                                 &a->magnitude);
        }
    } else {
        a->num_ops = 1;
        a->magnitude = 0;
    }
    if (rc == 0) {
        rc = get_interp(c, st, a);
    }
    if (rc == 0) {
        rc = get_pixel(c, st, "fill", true, &a->has_fill, a->fill);
    }
    return rc;
}

/* The rows' parse functions: each op's parameters into out->aug. */
static int parse_color_jitter(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    return parse_jitter(c, st, &out->aug);
}

static int parse_gaussian_blur(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    return parse_blur(c, st, &out->aug);
}

static int parse_random_erasing(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    return parse_erasing(c, st, &out->aug);
}

static int parse_random_rotation(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    return parse_rotation(c, st, &out->aug);
}

static int parse_random_affine(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    return parse_affine(c, st, &out->aug);
}

static int parse_grayscale(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    out->aug.p = 0.1;
    return get_prob(c, st, &out->aug.p);
}

/* auto_contrast, equalize: a probability only. */
static int parse_p_half(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    out->aug.p = 0.5;
    return get_prob(c, st, &out->aug.p);
}

static int parse_solarize(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    sl_aug_spec_t *a = &out->aug;
    json_t *v = json_object_get(st, "threshold");
    if (v == NULL || !sl_spec_as_number(v, &a->threshold) ||
        !(a->threshold >= 0 && a->threshold <= PIXEL_MAX)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, "threshold", "%s a pixel value in 0..255%s%s",
                            v == NULL ? "missing (required):" : "must be",
                            v == NULL ? "" : ", got ",
                            v == NULL ? "" : sl_spec_describe(v, got, sizeof(got)));
    }
    return parse_p_half(c, st, out);
}

static int parse_posterize(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    int rc = sl_spec_get_u32(c, st, "bits", true, 0, 8, &out->aug.bits);
    out->aug.p = 0.5;
    return rc < 0 ? rc : get_prob(c, st, &out->aug.p);
}

static int parse_trivial(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    return parse_policy(c, st, SL_OP_TRIVIAL_AUGMENT_WIDE, &out->aug);
}

static int parse_rand_augment(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    return parse_policy(c, st, SL_OP_RAND_AUGMENT, &out->aug);
}

/* random_crop's "padding": p for every side, [p], [left/right, top/bottom]
 * or [left, top, right, bottom], each 0..PAD_MAX; into out[l, t, r, b]. */
static int get_padding(sl_spec_pctx_t *c, json_t *st, uint32_t out[4])
{
    json_t *v = json_object_get(st, "padding");
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    json_int_t p[4] = {-1, -1, -1, -1};
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (json_is_integer(v)) {
        p[0] = p[1] = p[2] = p[3] = json_integer_value(v);
    } else if (n == 1 || n == 2 || n == 4) {
        json_int_t e[4] = {-1, -1, -1, -1};
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_array_get(v, i);
            e[i] = json_is_integer(x) ? json_integer_value(x) : -1;
        }
        const size_t pick[3][4] = {{0, 0, 0, 0}, {0, 1, 0, 1}, {0, 1, 2, 3}};
        const size_t *k = pick[n == 1 ? 0 : n == 2 ? 1 : 2];
        for (int i = 0; i < 4; i++) {
            p[i] = e[k[i]];
        }
    }
    for (int i = 0; i < 4; i++) {
        if (p[i] < 0 || p[i] > PAD_MAX) {
            char got[SPEC_SHOWN_MAX + 8];
            return sl_spec_ferr(c, "padding",
                                "must be an integer in 0..%d, or [p], [left/right, top/bottom] "
                                "or [left, top, right, bottom] of them, got %s",
                                PAD_MAX, sl_spec_describe(v, got, sizeof(got)));
        }
        out[i] = (uint32_t)p[i];
    }
    return 0;
}

/* "size": N or [H, W], each 1..SIZE_MAX (required). */
static int get_crop_size(sl_spec_pctx_t *c, json_t *st, uint32_t *ret_h, uint32_t *ret_w)
{
    json_t *v = json_object_get(st, "size");
    json_int_t hw[2] = {0, 0};
    if (json_is_integer(v)) {
        hw[0] = hw[1] = json_integer_value(v);
    } else if (json_is_array(v) && json_array_size(v) == 2 &&
               json_is_integer(json_array_get(v, 0)) && json_is_integer(json_array_get(v, 1))) {
        hw[0] = json_integer_value(json_array_get(v, 0));
        hw[1] = json_integer_value(json_array_get(v, 1));
    }
    if (hw[0] < 1 || hw[0] > SIZE_MAX_PX || hw[1] < 1 || hw[1] > SIZE_MAX_PX) {
        char got[SPEC_SHOWN_MAX + 8];
        if (v == NULL) {
            return sl_spec_ferr(c, "size", "missing (required): an integer in 1..%d or [H, W]",
                                SIZE_MAX_PX);
        }
        return sl_spec_ferr(c, "size", "must be an integer in 1..%d or [H, W], got %s", SIZE_MAX_PX,
                            sl_spec_describe(v, got, sizeof(got)));
    }
    *ret_h = (uint32_t)hw[0];
    *ret_w = (uint32_t)hw[1];
    return 0;
}

static int parse_random_crop(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    sl_aug_spec_t *a = &out->aug;
    int rc = get_crop_size(c, st, &a->crop_h, &a->crop_w);
    if (rc == 0) {
        rc = get_padding(c, st, a->padding);
    }
    if (rc == 0) {
        rc = get_pixel(c, st, "fill", false, NULL, a->pad_fill);
    }
    if (rc == 0) {
        int mode = SL_PAD_CONSTANT;
        rc = sl_spec_get_enum(c, st, "padding_mode", false, pad_mode_names, 4, &mode);
        a->padding_mode = (uint32_t)mode;
    }
    return rc == 0 ? sl_spec_get_bool(c, st, "pad_if_needed", &a->pad_if_needed) : rc;
}

static json_t *pixel_json(const double v[3]) { return json_pack("[f,f,f]", v[0], v[1], v[2]); }

static json_t *fill_json(const sl_aug_spec_t *a)
{
    return a->has_fill ? pixel_json(a->fill) : json_null();
}

static json_t *center_json(const sl_aug_spec_t *a)
{
    return a->has_center ? json_pack("[f,f]", a->center[0], a->center[1]) : json_null();
}

static const char *interp_of(const sl_aug_spec_t *a)
{
    return interp_names[a->interpolation == SL_INTERP_BILINEAR ? 1 : 0];
}

/* The rows' canonical JSON. "o" steals the references, also when
 * json_pack fails. */
static json_t *jitter_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    return json_pack("{s:s, s:[f,f], s:[f,f], s:[f,f], s:[f,f]}", "op", "color_jitter",
                     "brightness", a->brightness[0], a->brightness[1], "contrast", a->contrast[0],
                     a->contrast[1], "saturation", a->saturation[0], a->saturation[1], "hue",
                     a->hue[0], a->hue[1]);
}

static json_t *blur_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    return json_pack("{s:s, s:[I,I], s:[f,f]}", "op", "gaussian_blur", "kernel_size",
                     (json_int_t)a->kernel_size[0], (json_int_t)a->kernel_size[1], "sigma",
                     a->sigma[0], a->sigma[1]);
}

static json_t *erasing_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    return json_pack("{s:s, s:f, s:[f,f], s:[f,f], s:o}", "op", "random_erasing", "p", a->p,
                     "scale", a->scale[0], a->scale[1], "ratio", a->ratio[0], a->ratio[1], "value",
                     a->value_random ? json_string("random") : pixel_json(a->value));
}

static json_t *rotation_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    return json_pack("{s:s, s:[f,f], s:s, s:o, s:o}", "op", "random_rotation", "degrees",
                     a->degrees[0], a->degrees[1], "interpolation", interp_of(a), "center",
                     center_json(a), "fill", fill_json(a));
}

static json_t *affine_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    return json_pack("{s:s, s:[f,f], s:[f,f], s:[f,f], s:[f,f,f,f], s:s, s:o, s:o}", "op",
                     "random_affine", "degrees", a->degrees[0], a->degrees[1], "translate",
                     a->translate[0], a->translate[1], "scale", a->affine_scale[0],
                     a->affine_scale[1], "shear", a->shear[0], a->shear[1], a->shear[2],
                     a->shear[3], "interpolation", interp_of(a), "center", center_json(a), "fill",
                     fill_json(a));
}

static json_t *solarize_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:f, s:f}", "op", "solarize", "threshold", st->aug.threshold, "p",
                     st->aug.p);
}

static json_t *posterize_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:I, s:f}", "op", "posterize", "bits", (json_int_t)st->aug.bits, "p",
                     st->aug.p);
}

static json_t *trivial_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    return json_pack("{s:s, s:I, s:s, s:o}", "op", "trivial_augment_wide", "num_magnitude_bins",
                     (json_int_t)a->num_magnitude_bins, "interpolation", interp_of(a), "fill",
                     fill_json(a));
}

static json_t *rand_augment_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    return json_pack("{s:s, s:I, s:I, s:I, s:s, s:o}", "op", "rand_augment", "num_ops",
                     (json_int_t)a->num_ops, "magnitude", (json_int_t)a->magnitude,
                     "num_magnitude_bins", (json_int_t)a->num_magnitude_bins, "interpolation",
                     interp_of(a), "fill", fill_json(a));
}

static json_t *random_crop_json(const sl_stage_spec_t *st)
{
    const sl_aug_spec_t *a = &st->aug;
    return json_pack("{s:s, s:[I,I], s:[I,I,I,I], s:o, s:s, s:b}", "op", "random_crop", "size",
                     (json_int_t)a->crop_h, (json_int_t)a->crop_w, "padding",
                     (json_int_t)a->padding[0], (json_int_t)a->padding[1],
                     (json_int_t)a->padding[2], (json_int_t)a->padding[3], "fill",
                     pixel_json(a->pad_fill), "padding_mode",
                     pad_mode_names[a->padding_mode < 4 ? a->padding_mode : 0], "pad_if_needed",
                     (int)a->pad_if_needed);
}

/* random_grayscale, auto_contrast, equalize. */
static json_t *p_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:f}", "op", sl_op_name(st->op), "p", st->aug.p);
}

/* Every augmentation: on whole uint8 HWC images, drawing from the
 * sample's stream, before normalize, to_chw and image_tiles. */
#define AUG_ROW(nm, parse_fn, json_fn, ...)                                                        \
    {                                                                                              \
        .name = (nm), .keys = (const char *const[]){"op", __VA_ARGS__, NULL}, .parse = (parse_fn), \
        .to_json = (json_fn),                                                                      \
        .flags = SL_OPF_AUGMENT | SL_OPF_RANDOM | SL_OPF_ON_PIXELS | SL_OPF_WHOLE,                 \
        .before = SL_ORD_BIT(SL_ORD_NORMALIZE) | SL_ORD_BIT(SL_ORD_TO_CHW) |                       \
                  SL_ORD_BIT(SL_ORD_TILES),                                                        \
    }

const sl_op_def_t sl_op_def_color_jitter = AUG_ROW("color_jitter", parse_color_jitter, jitter_json,
                                                   "brightness", "contrast", "saturation", "hue");
const sl_op_def_t sl_op_def_random_grayscale = AUG_ROW("random_grayscale", parse_grayscale, p_json,
                                                       "p");
const sl_op_def_t sl_op_def_gaussian_blur = AUG_ROW("gaussian_blur", parse_gaussian_blur, blur_json,
                                                    "kernel_size", "sigma");
/* After a device normalize the consumer erases: nothing here to run or
 * split at. */
static bool erasing_on_device(const sl_stage_spec_t *st) { return st->aug.erase_on_device; }

/* random_erasing also after normalize and to_chw (torchvision's place for
 * it: on the normalized tensor); after a device normalize it is the
 * consumer's (spec_stages.c marks it). */
const sl_op_def_t sl_op_def_random_erasing = {
    .name = "random_erasing",
    .keys = (const char *const[]){"op", "p", "scale", "ratio", "value", NULL},
    .parse = parse_random_erasing,
    .to_json = erasing_json,
    .flags = SL_OPF_AUGMENT | SL_OPF_RANDOM | SL_OPF_ON_PIXELS | SL_OPF_WHOLE,
    .before = SL_ORD_BIT(SL_ORD_TILES),
    .no_unit = erasing_on_device,
};
const sl_op_def_t sl_op_def_random_rotation = AUG_ROW("random_rotation", parse_random_rotation,
                                                      rotation_json, "degrees", "interpolation",
                                                      "center", "fill");
const sl_op_def_t sl_op_def_random_affine = AUG_ROW("random_affine", parse_random_affine,
                                                    affine_json, "degrees", "translate", "scale",
                                                    "shear", "interpolation", "center", "fill");
const sl_op_def_t sl_op_def_solarize = AUG_ROW("solarize", parse_solarize, solarize_json,
                                               "threshold", "p");
const sl_op_def_t sl_op_def_posterize = AUG_ROW("posterize", parse_posterize, posterize_json,
                                                "bits", "p");
const sl_op_def_t sl_op_def_auto_contrast = AUG_ROW("auto_contrast", parse_p_half, p_json, "p");
const sl_op_def_t sl_op_def_equalize = AUG_ROW("equalize", parse_p_half, p_json, "p");
const sl_op_def_t sl_op_def_trivial_augment_wide = AUG_ROW("trivial_augment_wide", parse_trivial,
                                                           trivial_json, "num_magnitude_bins",
                                                           "interpolation", "fill");
const sl_op_def_t sl_op_def_rand_augment = AUG_ROW("rand_augment", parse_rand_augment,
                                                   rand_augment_json, "num_ops", "magnitude",
                                                   "num_magnitude_bins", "interpolation", "fill");
const sl_op_def_t sl_op_def_random_crop = AUG_ROW("random_crop", parse_random_crop,
                                                  random_crop_json, "size", "padding", "fill",
                                                  "padding_mode", "pad_if_needed");
