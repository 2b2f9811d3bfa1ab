#include "common/base/file.h"
#include "common/spec/spec.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/spec/spec_lines.h"

#define SPEC_SIZE_MAX 16384
#define SPEC_BATCH_MAX 65536
#define SPEC_EPOCHS_MAX 1000000
#define SPEC_MAX_PIXELS_MAX (INT64_C(1) << 40)
#define SPEC_MAX_PIXELS_DEFAULT UINT64_C(100000000)
/* The deepest path the parser names is stages[i].mean[j]; room to spare. */
#define SPEC_PATH_DEPTH 8
/* Room for one message part (the list of valid ops is the longest). */
#define SPEC_MSG_MAX 512
#define SPEC_SHOWN_MAX 96

static const char *const op_names[SL_OP__COUNT] = {
    [SL_OP_DECODE_JPEG] = "decode_jpeg",
    [SL_OP_RANDOM_RESIZED_CROP] = "random_resized_crop",
    [SL_OP_RESIZE] = "resize",
    [SL_OP_CENTER_CROP] = "center_crop",
    [SL_OP_FLIP] = "flip",
    [SL_OP_NORMALIZE] = "normalize",
    [SL_OP_TO_CHW] = "to_chw",
};

/* The keys each op accepts; anything else is a typo worth an error. */
static const char *const op_keys[SL_OP__COUNT][5] = {
    [SL_OP_DECODE_JPEG] = {"op", NULL},
    [SL_OP_RANDOM_RESIZED_CROP] = {"op", "size", "scale", "ratio", NULL},
    [SL_OP_RESIZE] = {"op", "size", NULL},
    [SL_OP_CENTER_CROP] = {"op", "size", NULL},
    [SL_OP_FLIP] = {"op", "p", NULL},
    [SL_OP_NORMALIZE] = {"op", "mean", "std", NULL},
    [SL_OP_TO_CHW] = {"op", NULL},
};

static const char *const top_keys[] = {
    "source", "stages", "batch_size", "epochs", "drop_last", "deterministic",
    "offload", "on_error", "max_pixels", "world_size", "rank", "rank_padding", "name", NULL,
};
/* Multi-rank jobs (common/engine/ranks.h): indexed by sl_rank_padding_e. */
static const char *const rank_padding_names[] = {"drop", "pad"};
#define SPEC_NRANK_PADDING (sizeof(rank_padding_names) / sizeof(rank_padding_names[0]))
static const char *const source_keys[] = {"type", "path", "shuffle", "seed", NULL};
static const char *const offload_keys[] = {"split", "local_share", NULL};

static const char *const source_type_names[] = {
    [SL_SRC_IMAGEFOLDER] = "imagefolder",
    [SL_SRC_TAR] = "tar",
    [SL_SRC_FILELIST] = "filelist",
};
#define SPEC_NSOURCE_TYPES (sizeof(source_type_names) / sizeof(source_type_names[0]))

static const char *const on_error_names[] = {
    [SL_ON_ERROR_SKIP] = "skip",
    [SL_ON_ERROR_FAIL] = "fail",
};
#define SPEC_NON_ERROR (sizeof(on_error_names) / sizeof(on_error_names[0]))

static const char *const offload_names[] = {
    [SL_OFFLOAD_AUTO] = "auto",
    [SL_OFFLOAD_OFF] = "off",
    [SL_OFFLOAD_ALL] = "all",
    [SL_OFFLOAD_FASTFLOW] = "fastflow",
    [SL_OFFLOAD_FIXED] = "fixed",
};
#define SPEC_NOFFLOAD (sizeof(offload_names) / sizeof(offload_names[0]))

static const double default_scale[2] = {0.08, 1.0};
static const double default_ratio[2] = {3.0 / 4.0, 4.0 / 3.0};
static const float default_mean[3] = {0.485f, 0.456f, 0.406f};
static const float default_std[3] = {0.229f, 0.224f, 0.225f};

/* ---- parse context: where we are, for messages ---------------------------------- */

/* One parse: the raw text (to find lines), the error buffer and the path of
 * the value being checked. Lives on the parser's stack. */
typedef struct {
    const char *name;
    const char *buf;
    size_t len;
    char *err;
    size_t errlen;
    sl_spec_pathc_t path[SPEC_PATH_DEPTH];
    size_t depth; /* may exceed SPEC_PATH_DEPTH only through a bug; then cut */
} pctx_t;

static void push_key(pctx_t *c, const char *key, size_t keylen)
{
    if (c->depth < SPEC_PATH_DEPTH) {
        c->path[c->depth] = (sl_spec_pathc_t){.key = key, .keylen = keylen, .index = 0};
    }
    c->depth++;
}

static void push(pctx_t *c, const char *key)
{
    push_key(c, key, strlen(key));
}

static void push_index(pctx_t *c, size_t index)
{
    if (c->depth < SPEC_PATH_DEPTH) {
        c->path[c->depth] = (sl_spec_pathc_t){.key = NULL, .keylen = 0, .index = index};
    }
    c->depth++;
}

static void pop(pctx_t *c)
{
    if (c->depth > 0) {
        c->depth--;
    }
}

/* "NAME:LINE: PATH: message" for the value at the current path. After an
 * error the parse is abandoned, so callers return without popping. */
static int vperr(pctx_t *c, const char *fmt, va_list ap)
{
    if (c->err == NULL || c->errlen == 0) {
        return -EINVAL;
    }
    char msg[SPEC_MSG_MAX];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = c->depth < SPEC_PATH_DEPTH ? c->depth : SPEC_PATH_DEPTH;
    unsigned line = sl_spec_line(c->buf, c->len, c->path, n);
    char path[512]; /* a cut key shows 64 bytes, 4 characters each at worst */
    sl_spec_path_format(c->path, n, path, sizeof(path));
    return sl_err(c->err, c->errlen, -EINVAL, "%s:%u: %s: %s", c->name, line, path, msg);
}

__attribute__((format(printf, 2, 3))) static int perr(pctx_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vperr(c, fmt, ap);
    va_end(ap);
    return rc;
}

/* The same for member key of the current object. */
__attribute__((format(printf, 3, 4))) static int ferr(pctx_t *c, const char *key,
                                                      const char *fmt, ...)
{
    push(c, key);
    va_list ap;
    va_start(ap, fmt);
    int rc = vperr(c, fmt, ap);
    va_end(ap);
    pop(c);
    return rc;
}

/* Shortest decimal that reads back as v, so "got 1.0000001" is not shown
 * as "got 1"; a real that is a whole number keeps its ".0" so "got 224.0"
 * explains why an integer field refused it. */
static void fmt_real(double v, char *out, size_t outlen)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, outlen, "%.*g", prec, v);
        if (strtod(out, NULL) == v) {
            break;
        }
    }
    if (strpbrk(out, ".eni") == NULL) { /* no fraction, exponent, inf or nan */
        size_t n = strlen(out);
        if (n + 2 < outlen) {
            memcpy(out + n, ".0", 3);
        }
    }
}

/* What a value is, for "got ..." in messages. Returns out. */
static const char *describe(const json_t *v, char *out, size_t outlen)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        snprintf(out, outlen, "an object");
        break;
    case JSON_ARRAY:
        snprintf(out, outlen, "an array of %zu", json_array_size(v));
        break;
    case JSON_STRING: {
        char q[SPEC_SHOWN_MAX];
        sl_spec_quote(json_string_value(v), json_string_length(v), q, sizeof(q));
        snprintf(out, outlen, "\"%s\"", q);
        break;
    }
    case JSON_INTEGER:
        snprintf(out, outlen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        fmt_real(json_real_value(v), out, outlen);
        break;
    case JSON_TRUE:
        snprintf(out, outlen, "true");
        break;
    case JSON_FALSE:
        snprintf(out, outlen, "false");
        break;
    default:
        snprintf(out, outlen, "null");
        break;
    }
    return out;
}

/* "a, b, c" from a NULL-terminated list (or the first n of an array). */
static const char *join(const char *const *names, size_t n, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && names[i] != NULL; i++) {
        int w = snprintf(out + used, outlen - used, "%s%s", i > 0 ? ", " : "", names[i]);
        if (w < 0 || (size_t)w >= outlen - used) {
            break; /* cut; the lists here are short */
        }
        used += (size_t)w;
    }
    return out;
}

/* Every key of obj must be in allowed; what says whose keys they are. */
static int check_keys(pctx_t *c, json_t *obj, const char *const *allowed, const char *what)
{
    const char *key;
    size_t keylen;
    json_t *v;
    json_object_keylen_foreach(obj, key, keylen, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            if (strlen(allowed[i]) == keylen && memcmp(allowed[i], key, keylen) == 0) {
                ok = true;
                break;
            }
        }
        if (!ok) {
            char list[SPEC_MSG_MAX / 2];
            push_key(c, key, keylen);
            return perr(c, "unknown key%s%s (expected one of: %s)", what[0] != '\0' ? " for " : "",
                        what, join(allowed, SIZE_MAX, list, sizeof(list)));
        }
    }
    return 0;
}

/* ---- typed getters: absent keys keep the default unless required ------------------- */

static int get_int(pctx_t *c, json_t *obj, const char *key, bool required, int64_t min,
                   int64_t max, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        if (required) {
            return ferr(c, key, "missing (required): an integer in %" PRId64 "..%" PRId64, min,
                        max);
        }
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        char got[SPEC_SHOWN_MAX + 8];
        return ferr(c, key, "must be an integer in %" PRId64 "..%" PRId64 ", got %s", min, max,
                    describe(v, got, sizeof(got)));
    }
    *out = json_integer_value(v);
    return 0;
}

static int get_u32(pctx_t *c, json_t *obj, const char *key, bool required, int64_t min,
                   int64_t max, uint32_t *out)
{
    int64_t x = *out;
    int rc = get_int(c, obj, key, required, min, max, &x);
    if (rc == 0) {
        *out = (uint32_t)x;
    }
    return rc;
}

static int get_bool(pctx_t *c, json_t *obj, const char *key, bool *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        return 0;
    }
    if (!json_is_boolean(v)) {
        char got[SPEC_SHOWN_MAX + 8];
        return ferr(c, key, "must be true or false, got %s", describe(v, got, sizeof(got)));
    }
    *out = json_is_true(v);
    return 0;
}

/* JSON integers are accepted where a real is expected ("p": 1). */
static bool as_number(const json_t *v, double *out)
{
    if (json_is_real(v)) {
        *out = json_real_value(v);
        return true;
    }
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return true;
    }
    return false;
}

/* One of names[0..n) as a string; the index goes to *out. */
static int get_enum(pctx_t *c, json_t *obj, const char *key, bool required,
                    const char *const *names, size_t n, int *out)
{
    json_t *v = json_object_get(obj, key);
    char list[SPEC_MSG_MAX / 2];
    join(names, n, list, sizeof(list));
    if (v == NULL) {
        if (required) {
            return ferr(c, key, "missing (required): one of %s", list);
        }
        return 0;
    }
    if (json_is_string(v)) {
        for (size_t i = 0; i < n; i++) {
            if (strlen(names[i]) == json_string_length(v) &&
                strcmp(names[i], json_string_value(v)) == 0) {
                *out = (int)i;
                return 0;
            }
        }
    }
    char got[SPEC_SHOWN_MAX + 8];
    return ferr(c, key, "must be one of %s, got %s", list, describe(v, got, sizeof(got)));
}

/* ---- source ------------------------------------------------------------------------- */

/* Paths are relative to each host's data root; one that escapes it is refused
 * here so the user hears about it before any worker is involved. */
static bool path_has_dotdot(const char *p)
{
    while (*p != '\0') {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            return true;
        }
        p += n;
        while (*p == '/') {
            p++;
        }
    }
    return false;
}

static int parse_source(pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *src = json_object_get(root, "source");
    if (src == NULL) {
        return ferr(c, "source", "missing (required): an object like "
                                 "{\"type\": \"imagefolder\", \"path\": \"train\"}");
    }
    push(c, "source");
    if (!json_is_object(src)) {
        char got[SPEC_SHOWN_MAX + 8];
        return perr(c, "must be an object like {\"type\": \"imagefolder\", \"path\": \"train\"}, "
                       "got %s",
                    describe(src, got, sizeof(got)));
    }
    int rc = check_keys(c, src, source_keys, "");
    if (rc < 0) {
        return rc;
    }
    int type = 0;
    rc = get_enum(c, src, "type", true, source_type_names, SPEC_NSOURCE_TYPES, &type);
    if (rc < 0) {
        return rc;
    }
    spec->source_type = (sl_source_type_e)type;

    json_t *path = json_object_get(src, "path");
    if (path == NULL) {
        return ferr(c, "path", "missing (required): a path relative to the data root");
    }
    if (!json_is_string(path)) {
        char got[SPEC_SHOWN_MAX + 8];
        return ferr(c, "path", "must be a string (relative to the data root), got %s",
                    describe(path, got, sizeof(got)));
    }
    const char *p = json_string_value(path);
    size_t plen = json_string_length(path);
    if (plen == 0) {
        return ferr(c, "path", "must not be empty");
    }
    if (plen >= SL_SPEC_PATH_MAX) {
        return ferr(c, "path", "is %zu bytes, the limit is %d", plen, SL_SPEC_PATH_MAX - 1);
    }
    if (strlen(p) != plen) { /* jansson refuses \u0000 already; keep it true here */
        return ferr(c, "path", "must not contain NUL bytes");
    }
    if (p[0] == '/') {
        return ferr(c, "path", "must be relative to the data root, not absolute");
    }
    if (path_has_dotdot(p)) {
        return ferr(c, "path", "must not contain a \"..\" component (it would escape the data "
                               "root)");
    }
    memcpy(spec->source_path, p, plen + 1);

    rc = get_bool(c, src, "shuffle", &spec->shuffle);
    if (rc < 0) {
        return rc;
    }
    int64_t seed = (int64_t)spec->seed;
    rc = get_int(c, src, "seed", false, 0, INT64_MAX, &seed);
    if (rc < 0) {
        return rc;
    }
    spec->seed = (uint64_t)seed;
    pop(c);
    return 0;
}

/* ---- stages ------------------------------------------------------------------------- */

/* "size": N or [H, W], each 1..SPEC_SIZE_MAX. */
static int get_size(pctx_t *c, json_t *st, sl_stage_spec_t *out, bool *ret_scalar)
{
    char got[SPEC_SHOWN_MAX + 8];
    json_t *v = json_object_get(st, "size");
    if (v == NULL) {
        return ferr(c, "size", "missing (required): an integer in 1..%d or [H, W]", SPEC_SIZE_MAX);
    }
    push(c, "size");
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 1 || n > SPEC_SIZE_MAX) {
            return perr(c, "must be an integer in 1..%d, got %s", SPEC_SIZE_MAX,
                        describe(v, got, sizeof(got)));
        }
        out->size_h = out->size_w = (uint32_t)n;
        *ret_scalar = true;
        pop(c);
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) != 2) {
        return perr(c, "must be an integer in 1..%d or [H, W], got %s", SPEC_SIZE_MAX,
                    describe(v, got, sizeof(got)));
    }
    uint32_t hw[2];
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(v, i);
        push_index(c, i);
        if (!json_is_integer(e) || json_integer_value(e) < 1 ||
            json_integer_value(e) > SPEC_SIZE_MAX) {
            return perr(c, "must be an integer in 1..%d, got %s", SPEC_SIZE_MAX,
                        describe(e, got, sizeof(got)));
        }
        hw[i] = (uint32_t)json_integer_value(e);
        pop(c);
    }
    out->size_h = hw[0];
    out->size_w = hw[1];
    *ret_scalar = false;
    pop(c);
    return 0;
}

/* An array of exactly n numbers; absent keeps out as it is. */
static int get_numbers(pctx_t *c, json_t *st, const char *key, size_t n, const char *shape,
                       double *out)
{
    char got[SPEC_SHOWN_MAX + 8];
    json_t *v = json_object_get(st, key);
    if (v == NULL) {
        return 0;
    }
    push(c, key);
    if (!json_is_array(v) || json_array_size(v) != n) {
        return perr(c, "must be %s, an array of %zu numbers, got %s", shape, n,
                    describe(v, got, sizeof(got)));
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!as_number(e, &out[i])) {
            push_index(c, i);
            return perr(c, "must be a number, got %s", describe(e, got, sizeof(got)));
        }
    }
    pop(c);
    return 0;
}

static int parse_rrc(pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    bool scalar;
    int rc = get_size(c, st, out, &scalar);
    if (rc < 0) {
        return rc;
    }
    memcpy(out->scale, default_scale, sizeof(out->scale));
    memcpy(out->ratio, default_ratio, sizeof(out->ratio));
    rc = get_numbers(c, st, "scale", 2, "[min, max]", out->scale);
    if (rc < 0) {
        return rc;
    }
    if (!(out->scale[0] > 0 && out->scale[0] <= out->scale[1] && out->scale[1] <= 1)) {
        char a[32], b[32];
        fmt_real(out->scale[0], a, sizeof(a));
        fmt_real(out->scale[1], b, sizeof(b));
        return ferr(c, "scale", "must be [min, max] with 0 < min <= max <= 1, got [%s, %s]", a, b);
    }
    rc = get_numbers(c, st, "ratio", 2, "[min, max]", out->ratio);
    if (rc < 0) {
        return rc;
    }
    if (!(out->ratio[0] > 0 && out->ratio[0] <= out->ratio[1])) {
        char a[32], b[32];
        fmt_real(out->ratio[0], a, sizeof(a));
        fmt_real(out->ratio[1], b, sizeof(b));
        return ferr(c, "ratio", "must be [min, max] with 0 < min <= max, got [%s, %s]", a, b);
    }
    return 0;
}

static int parse_flip(pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    out->p = 0.5;
    json_t *v = json_object_get(st, "p");
    if (v == NULL) {
        return 0;
    }
    if (!as_number(v, &out->p) || out->p < 0 || out->p > 1) {
        char got[SPEC_SHOWN_MAX + 8];
        return ferr(c, "p", "must be a probability in 0..1, got %s", describe(v, got, sizeof(got)));
    }
    return 0;
}

/* mean and std are stored as float: refuse what a float cannot hold, and a
 * std that would round to 0 (a division by zero later). */
static int parse_normalize(pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    double mean[3], sd[3];
    for (size_t i = 0; i < 3; i++) {
        mean[i] = default_mean[i];
        sd[i] = default_std[i];
    }
    int rc = get_numbers(c, st, "mean", 3, "[R, G, B]", mean);
    if (rc < 0) {
        return rc;
    }
    rc = get_numbers(c, st, "std", 3, "[R, G, B]", sd);
    if (rc < 0) {
        return rc;
    }
    for (size_t i = 0; i < 3; i++) {
        char a[32];
        if (fabs(mean[i]) > FLT_MAX) {
            push(c, "mean");
            push_index(c, i);
            fmt_real(mean[i], a, sizeof(a));
            return perr(c, "must fit a float, got %s", a);
        }
        if (!(sd[i] > 0) || sd[i] > FLT_MAX || (float)sd[i] == 0.0f) {
            push(c, "std");
            push_index(c, i);
            fmt_real(sd[i], a, sizeof(a));
            return perr(c, "must be a number > 0 (that fits a float), got %s", a);
        }
        out->mean[i] = (float)mean[i];
        out->std[i] = (float)sd[i];
    }
    return 0;
}

/* Where the order-sensitive ops were seen so far; -1 if not yet. */
typedef struct {
    long normalize_at;
    long to_chw_at;
} order_t;

/* decode_jpeg first and once; geometry ops on uint8 HWC, so before
 * normalize (which makes floats) and to_chw; normalize/to_chw once each. */
static int check_order(pctx_t *c, size_t i, sl_op_e op, order_t *ord)
{
    push(c, "op");
    if (op == SL_OP_DECODE_JPEG && i != 0) {
        return perr(c, "decode_jpeg must be the first stage, and appear only once");
    }
    if (op != SL_OP_DECODE_JPEG && i == 0) {
        return perr(c, "the first stage must be decode_jpeg, got %s", op_names[op]);
    }
    if (op == SL_OP_RANDOM_RESIZED_CROP || op == SL_OP_RESIZE || op == SL_OP_CENTER_CROP) {
        if (ord->normalize_at >= 0) {
            return perr(c, "%s must come before normalize (stages[%ld]): it works on uint8 "
                           "HWC images",
                        op_names[op], ord->normalize_at);
        }
        if (ord->to_chw_at >= 0) {
            return perr(c, "%s must come before to_chw (stages[%ld]): it works on uint8 HWC "
                           "images",
                        op_names[op], ord->to_chw_at);
        }
    }
    if (op == SL_OP_NORMALIZE) {
        if (ord->normalize_at >= 0) {
            return perr(c, "normalize appears twice (also stages[%ld])", ord->normalize_at);
        }
        ord->normalize_at = (long)i;
    }
    if (op == SL_OP_TO_CHW) {
        if (ord->to_chw_at >= 0) {
            return perr(c, "to_chw appears twice (also stages[%ld])", ord->to_chw_at);
        }
        ord->to_chw_at = (long)i;
    }
    pop(c);
    return 0;
}

/* Fields an op does not use stay zero, so a parsed spec is canonical and
 * parse(to_json(s)) compares equal field by field. */
static int parse_stage(pctx_t *c, json_t *st, size_t i, sl_stage_spec_t *out, order_t *ord)
{
    char got[SPEC_SHOWN_MAX + 8];
    char list[SPEC_MSG_MAX / 2];
    push_index(c, i);
    if (!json_is_object(st)) {
        return perr(c, "must be an object like {\"op\": \"decode_jpeg\"}, got %s",
                    describe(st, got, sizeof(got)));
    }
    join(op_names, SL_OP__COUNT, list, sizeof(list));
    json_t *opv = json_object_get(st, "op");
    if (opv == NULL) {
        return ferr(c, "op", "missing (required): one of %s", list);
    }
    int op = -1;
    if (json_is_string(opv)) {
        for (int k = 0; k < SL_OP__COUNT; k++) {
            if (strlen(op_names[k]) == json_string_length(opv) &&
                strcmp(op_names[k], json_string_value(opv)) == 0) {
                op = k;
                break;
            }
        }
    }
    if (op < 0) {
        return ferr(c, "op", "unknown op %s (valid: %s)", describe(opv, got, sizeof(got)), list);
    }
    int rc = check_keys(c, st, op_keys[op], op_names[op]);
    if (rc < 0) {
        return rc;
    }
    memset(out, 0, sizeof(*out));
    out->op = (sl_op_e)op;
    switch (out->op) {
    case SL_OP_RANDOM_RESIZED_CROP:
        rc = parse_rrc(c, st, out);
        break;
    case SL_OP_RESIZE:
        rc = get_size(c, st, out, &out->resize_shorter);
        break;
    case SL_OP_CENTER_CROP: {
        bool scalar;
        rc = get_size(c, st, out, &scalar);
        break;
    }
    case SL_OP_FLIP:
        rc = parse_flip(c, st, out);
        break;
    case SL_OP_NORMALIZE:
        rc = parse_normalize(c, st, out);
        break;
    default: /* decode_jpeg, to_chw: nothing to set */
        break;
    }
    if (rc < 0) {
        return rc;
    }
    rc = check_order(c, i, out->op, ord);
    if (rc < 0) {
        return rc;
    }
    pop(c);
    return 0;
}

static int parse_stages(pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *v = json_object_get(root, "stages");
    if (v == NULL) {
        return 0; /* no stages: raw bytes are delivered */
    }
    push(c, "stages");
    if (!json_is_array(v)) {
        char got[SPEC_SHOWN_MAX + 8];
        return perr(c, "must be an array of stage objects, got %s", describe(v, got, sizeof(got)));
    }
    size_t n = json_array_size(v);
    if (n > SL_SPEC_MAX_STAGES) {
        return perr(c, "has %zu stages, the limit is %d", n, SL_SPEC_MAX_STAGES);
    }
    order_t ord = {.normalize_at = -1, .to_chw_at = -1};
    for (size_t i = 0; i < n; i++) {
        int rc = parse_stage(c, json_array_get(v, i), i, &spec->stages[i], &ord);
        if (rc < 0) {
            return rc;
        }
    }
    spec->nstages = (uint32_t)n;
    pop(c);
    return 0;
}

/* ---- offload and the rest ----------------------------------------------------------- */

static int parse_offload(pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *v = json_object_get(root, "offload");
    if (v == NULL) {
        return 0;
    }
    push(c, "offload");
    if (json_is_object(v)) {
        int rc = check_keys(c, v, offload_keys, "");
        if (rc < 0) {
            return rc;
        }
        rc = get_u32(c, v, "split", true, 0, spec->nstages, &spec->split);
        if (rc < 0) {
            return rc;
        }
        json_t *share = json_object_get(v, "local_share");
        if (share == NULL) {
            return ferr(c, "local_share", "missing (required): the fraction of samples done "
                                          "locally, 0..1");
        }
        if (!as_number(share, &spec->local_share) || spec->local_share < 0 ||
            spec->local_share > 1) {
            char got[SPEC_SHOWN_MAX + 8];
            return ferr(c, "local_share", "must be a number in 0..1, got %s",
                        describe(share, got, sizeof(got)));
        }
        spec->offload = SL_OFFLOAD_FIXED;
        pop(c);
        return 0;
    }
    /* "fixed" is not a string value: it needs split and local_share. */
    if (json_is_string(v)) {
        for (size_t i = 0; i < SPEC_NOFFLOAD; i++) {
            if (i != SL_OFFLOAD_FIXED && strlen(offload_names[i]) == json_string_length(v) &&
                strcmp(offload_names[i], json_string_value(v)) == 0) {
                spec->offload = (sl_offload_e)i;
                pop(c);
                return 0;
            }
        }
    }
    char got[SPEC_SHOWN_MAX + 8];
    return perr(c, "must be \"auto\", \"off\", \"all\", \"fastflow\" or "
                   "{\"split\": K, \"local_share\": F}, got %s",
                describe(v, got, sizeof(got)));
}


/* world_size / rank / rank_padding (docs/protocol.md "Multi-rank jobs"). */
static int parse_ranks(pctx_t *c, json_t *root, sl_spec_t *spec)
{
    int rc = get_u32(c, root, "world_size", false, 1, SL_SPEC_WORLD_MAX, &spec->world_size);
    if (rc == 0) {
        rc = get_u32(c, root, "rank", false, 0, (int64_t)spec->world_size - 1, &spec->rank);
    }
    if (rc == 0) {
        int pad = (int)spec->rank_padding;
        rc = get_enum(c, root, "rank_padding", false, rank_padding_names, SPEC_NRANK_PADDING,
                      &pad);
        spec->rank_padding = (sl_rank_padding_e)pad;
    }
    return rc;
}

/* "name": a spec built in code or written to a temporary file has no
 * telling file name, so status pages show this one. Printable, one line. */
static int parse_name(pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *v = json_object_get(root, "name");
    if (v == NULL) {
        return 0;
    }
    char got[SPEC_SHOWN_MAX + 8];
    if (!json_is_string(v)) {
        return ferr(c, "name", "must be a string, got %s", describe(v, got, sizeof(got)));
    }
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len == 0 || len >= SL_SPEC_NAME_MAX) {
        return ferr(c, "name", "must be 1..%d bytes, got %zu", SL_SPEC_NAME_MAX - 1, len);
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            return ferr(c, "name", "must not contain control characters, got %s",
                        describe(v, got, sizeof(got)));
        }
    }
    memcpy(spec->name, s, len + 1);
    return 0;
}

static int parse_root(pctx_t *c, json_t *root, sl_spec_t *spec)
{
    if (!json_is_object(root)) {
        char got[SPEC_SHOWN_MAX + 8];
        return perr(c, "must be an object with \"source\" and \"stages\", got %s",
                    describe(root, got, sizeof(got)));
    }
    int rc = check_keys(c, root, top_keys, "");
    if (rc == 0) {
        rc = parse_name(c, root, spec);
    }
    if (rc == 0) {
        rc = parse_source(c, root, spec);
    }
    if (rc == 0) {
        rc = parse_stages(c, root, spec);
    }
    if (rc == 0) {
        rc = get_u32(c, root, "batch_size", false, 1, SPEC_BATCH_MAX, &spec->batch_size);
    }
    if (rc == 0) {
        rc = get_u32(c, root, "epochs", false, 1, SPEC_EPOCHS_MAX, &spec->epochs);
    }
    if (rc == 0) {
        rc = get_bool(c, root, "drop_last", &spec->drop_last);
    }
    if (rc == 0) {
        rc = get_bool(c, root, "deterministic", &spec->deterministic);
    }
    if (rc == 0) {
        rc = parse_offload(c, root, spec);
    }
    if (rc == 0) {
        int on_error = (int)spec->on_error;
        rc = get_enum(c, root, "on_error", false, on_error_names, SPEC_NON_ERROR, &on_error);
        spec->on_error = (sl_on_error_e)on_error;
    }
    if (rc == 0) {
        int64_t mp = (int64_t)spec->max_pixels;
        rc = get_int(c, root, "max_pixels", false, 1, SPEC_MAX_PIXELS_MAX, &mp);
        spec->max_pixels = (uint64_t)mp;
    }
    if (rc == 0) {
        rc = parse_ranks(c, root, spec);
    }
    return rc;
}

/* jansson quotes the input near an error ("near '...'"): keep control bytes
 * and broken UTF-8 off the caller's terminal. */
static void sanitize_ascii(char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch >= 0x7F) {
            *s = '?';
        }
    }
}

/* ---- public ------------------------------------------------------------------------- */

void sl_spec_init(sl_spec_t *spec)
{
    memset(spec, 0, sizeof(*spec));
    spec->source_type = SL_SRC_IMAGEFOLDER;
    spec->shuffle = true;
    spec->seed = 0;
    spec->nstages = 0;
    spec->batch_size = 32;
    spec->epochs = 1;
    spec->drop_last = false;
    spec->deterministic = false;
    spec->offload = SL_OFFLOAD_AUTO;
    spec->split = 0;
    spec->local_share = 0.0;
    spec->on_error = SL_ON_ERROR_SKIP;
    spec->max_pixels = SPEC_MAX_PIXELS_DEFAULT;
    spec->world_size = 1;
    spec->rank = 0;
    spec->rank_padding = SL_RANK_DROP;
}

int sl_spec_parse(const char *name, const char *buf, size_t len, sl_spec_t *ret_spec,
                  char *err, size_t errlen)
{
    if (name == NULL) {
        name = "<spec>";
    }
    if (len > SL_SPEC_MAX_BYTES) {
        return sl_err(err, errlen, -E2BIG, "%s: the spec is %zu bytes, the limit is %u", name,
                      len, SL_SPEC_MAX_BYTES);
    }
    if (buf == NULL) {
        if (len > 0) {
            return sl_err(err, errlen, -EINVAL, "%s: no spec text", name);
        }
        buf = "";
    }
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        if (json_error_code(&jerr) == json_error_out_of_memory) {
            return sl_err(err, errlen, -ENOMEM, "%s: out of memory parsing the spec", name);
        }
        sanitize_ascii(jerr.text);
        return sl_err(err, errlen, -EINVAL, "%s:%d: column %d: %s", name,
                      jerr.line > 0 ? jerr.line : 1, jerr.column > 0 ? jerr.column : 1,
                      jerr.text);
    }
    /* Built on the side: ret_spec is only written on success. */
    sl_spec_t *spec = malloc(sizeof(*spec));
    if (spec == NULL) {
        json_decref(root);
        return sl_err(err, errlen, -ENOMEM, "%s: out of memory parsing the spec", name);
    }
    sl_spec_init(spec);
    pctx_t c = {.name = name, .buf = buf, .len = len, .err = err, .errlen = errlen, .depth = 0};
    int rc = parse_root(&c, root, spec);
    if (rc == 0) {
        memcpy(ret_spec, spec, sizeof(*spec));
    }
    free(spec);
    json_decref(root);
    return rc;
}

int sl_spec_parse_file(const char *path, sl_spec_t *ret_spec, char *err, size_t errlen)
{
    if (path == NULL) {
        return sl_err(err, errlen, -EINVAL, "spec: no file given");
    }
    char *buf = NULL;
    size_t len = 0;
    int rc = sl_file_read(path, SL_SPEC_MAX_BYTES, &buf, &len, err, errlen);
    if (rc < 0) {
        return rc;
    }
    rc = sl_spec_parse(path, buf, len, ret_spec, err, errlen);
    free(buf);
    return rc;
}

const char *sl_op_name(sl_op_e op)
{
    if ((int)op < 0 || op >= SL_OP__COUNT) {
        return "unknown";
    }
    return op_names[op];
}

const char *sl_offload_name(sl_offload_e o)
{
    if ((int)o < 0 || (size_t)o >= SPEC_NOFFLOAD) {
        return "unknown";
    }
    return offload_names[o];
}

int sl_offload_parse(const char *s, sl_offload_e *ret_mode, uint32_t *ret_split,
                     double *ret_share, char *err, size_t errlen)
{
    if (s == NULL) {
        return sl_err(err, errlen, -EINVAL, "offload: no value given");
    }
    char shown[SPEC_SHOWN_MAX];
    sl_spec_quote(s, strlen(s), shown, sizeof(shown));
    for (size_t i = 0; i < SPEC_NOFFLOAD; i++) {
        if (i != SL_OFFLOAD_FIXED && strcmp(s, offload_names[i]) == 0) {
            *ret_mode = (sl_offload_e)i;
            if (ret_split != NULL) {
                *ret_split = 0;
            }
            if (ret_share != NULL) {
                *ret_share = 0.0;
            }
            return 0;
        }
    }
    /* K:F. strtoul/strtod accept signs and spaces; insist on plain digits. */
    const char *colon = strchr(s, ':');
    if (s[0] < '0' || s[0] > '9' || colon == NULL ||
        ((colon[1] < '0' || colon[1] > '9') && colon[1] != '.')) {
        return sl_err(err, errlen, -EINVAL,
                      "offload \"%s\": expected off, all, auto, fastflow or K:F (e.g. 2:0.5)",
                      shown);
    }
    errno = 0;
    char *end;
    unsigned long k = strtoul(s, &end, 10);
    if (end != colon) {
        return sl_err(err, errlen, -EINVAL,
                      "offload \"%s\": K in K:F must be a whole number of stages", shown);
    }
    if (errno == ERANGE || k > SL_SPEC_MAX_STAGES) {
        return sl_err(err, errlen, -EINVAL, "offload \"%s\": split K must be in 0..%d", shown,
                      SL_SPEC_MAX_STAGES);
    }
    errno = 0;
    double f = strtod(colon + 1, &end);
    if (*end != '\0' || end == colon + 1) {
        return sl_err(err, errlen, -EINVAL,
                      "offload \"%s\": F in K:F must be a number (the local share, 0..1)", shown);
    }
    if (!isfinite(f) || f < 0 || f > 1) {
        return sl_err(err, errlen, -EINVAL, "offload \"%s\": local share F must be in 0..1",
                      shown);
    }
    *ret_mode = SL_OFFLOAD_FIXED;
    if (ret_split != NULL) {
        *ret_split = (uint32_t)k;
    }
    if (ret_share != NULL) {
        *ret_share = f;
    }
    return 0;
}

/* ---- canonical JSON ----------------------------------------------------------------- */

static json_t *stage_to_json(const sl_stage_spec_t *st)
{
    if ((int)st->op < 0 || st->op >= SL_OP__COUNT) {
        return NULL;
    }
    const char *op = op_names[st->op];
    switch (st->op) {
    case SL_OP_RANDOM_RESIZED_CROP:
        return json_pack("{s:s, s:[I,I], s:[f,f], s:[f,f]}", "op", op, "size",
                         (json_int_t)st->size_h, (json_int_t)st->size_w, "scale", st->scale[0],
                         st->scale[1], "ratio", st->ratio[0], st->ratio[1]);
    case SL_OP_RESIZE:
        if (st->resize_shorter) {
            return json_pack("{s:s, s:I}", "op", op, "size", (json_int_t)st->size_h);
        }
        return json_pack("{s:s, s:[I,I]}", "op", op, "size", (json_int_t)st->size_h,
                         (json_int_t)st->size_w);
    case SL_OP_CENTER_CROP:
        return json_pack("{s:s, s:[I,I]}", "op", op, "size", (json_int_t)st->size_h,
                         (json_int_t)st->size_w);
    case SL_OP_FLIP:
        return json_pack("{s:s, s:f}", "op", op, "p", st->p);
    case SL_OP_NORMALIZE:
        return json_pack("{s:s, s:[f,f,f], s:[f,f,f]}", "op", op, "mean", (double)st->mean[0],
                         (double)st->mean[1], (double)st->mean[2], "std", (double)st->std[0],
                         (double)st->std[1], (double)st->std[2]);
    default:
        return json_pack("{s:s}", "op", op);
    }
}

char *sl_spec_to_json(const sl_spec_t *spec)
{
    /* The seed travels as a JSON integer, which jansson holds as int64. */
    if (spec->seed > (uint64_t)INT64_MAX || (size_t)spec->source_type >= SPEC_NSOURCE_TYPES ||
        spec->nstages > SL_SPEC_MAX_STAGES || (size_t)spec->on_error >= SPEC_NON_ERROR ||
        (size_t)spec->offload >= SPEC_NOFFLOAD) {
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
        offload = json_string(offload_names[spec->offload]);
    }
    /* "o" steals the references, also when json_pack fails. */
    json_t *root = json_pack(
        "{s:{s:s, s:s#, s:b, s:I}, s:o, s:I, s:I, s:b, s:b, s:o, s:s, s:I}", "source", "type",
        source_type_names[spec->source_type], "path", spec->source_path,
        (int)strnlen(spec->source_path, SL_SPEC_PATH_MAX), "shuffle", (int)spec->shuffle, "seed",
        (json_int_t)spec->seed, "stages", stages, "batch_size", (json_int_t)spec->batch_size,
        "epochs", (json_int_t)spec->epochs, "drop_last", (int)spec->drop_last, "deterministic",
        (int)spec->deterministic, "offload", offload, "on_error", on_error_names[spec->on_error],
        "max_pixels", (json_int_t)spec->max_pixels);
    if (root == NULL) {
        return NULL;
    }
    /* Unnamed specs keep their canonical form (and spec hash). */
    size_t nlen = strnlen(spec->name, SL_SPEC_NAME_MAX);
    if (nlen > 0 && json_object_set_new(root, "name", json_stringn(spec->name, nlen)) < 0) {
        json_decref(root);
        return NULL;
    }
    /* Single-consumer specs keep their canonical form (and spec hash). */
    if (spec->world_size > 1 && (spec->rank >= spec->world_size ||
                                 (size_t)spec->rank_padding >= SPEC_NRANK_PADDING ||
                                 json_object_set_new(root, "world_size",
                                                     json_integer(spec->world_size)) < 0 ||
                                 json_object_set_new(root, "rank", json_integer(spec->rank)) < 0 ||
                                 json_object_set_new(root, "rank_padding",
                                                     json_string(rank_padding_names
                                                                     [spec->rank_padding])) < 0)) {
        json_decref(root);
        return NULL;
    }
    char *out = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(root);
    return out;
}
