/* spec_ctx: the parse context's path and error messages ("NAME:LINE:
 * PATH: why"), and the typed getters every section of the spec uses
 * (common/spec/spec_impl.h). Called on the parsing thread only. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/spec/spec_impl.h"

void sl_spec_push_key(sl_spec_pctx_t *c, const char *key, size_t keylen)
{
    if (c->depth < SPEC_PATH_DEPTH) {
        c->path[c->depth] = (sl_spec_pathc_t){.key = key, .keylen = keylen, .index = 0};
    }
    c->depth++;
}

void sl_spec_push(sl_spec_pctx_t *c, const char *key) { sl_spec_push_key(c, key, strlen(key)); }

void sl_spec_push_index(sl_spec_pctx_t *c, size_t index)
{
    if (c->depth < SPEC_PATH_DEPTH) {
        c->path[c->depth] = (sl_spec_pathc_t){.key = NULL, .keylen = 0, .index = index};
    }
    c->depth++;
}

void sl_spec_pop(sl_spec_pctx_t *c)
{
    if (c->depth > 0) {
        c->depth--;
    }
}

/* Room kept after each listed error for the closing "N more errors". */
#define SPEC_MORE_ROOM 64

/* The first error fills err as a lone error always did (sl_err); it is
 * counted here. */
static int first_error(sl_spec_pctx_t *c, int code)
{
    c->nerrors = 1;
    c->nshown = 1;
    c->used = strlen(c->err);
    return code;
}

/* A later error: on a line of its own while it fits (with room for the
 * closing count), else only counted. */
static int add_error(sl_spec_pctx_t *c, int code, const char *msg)
{
    c->nerrors++;
    if (c->err == NULL || c->errlen == 0) {
        return code;
    }
    size_t len = strlen(msg);
    if (c->nshown >= SPEC_ERRORS_SHOWN || c->used + 1 + len + SPEC_MORE_ROOM >= c->errlen) {
        return code;
    }
    char *p = c->err + c->used;
    p[0] = '\n';
    memcpy(p + 1, msg, len + 1);
    sl_err_scrub(p + 1);
    c->used += 1 + len;
    c->nshown++;
    return code;
}

/* "NAME:LINE: PATH: message" for the value at the current path. The
 * section parser returns without popping (sl_spec_resume_at restores). */
static int vperr(sl_spec_pctx_t *c, const char *fmt, va_list ap)
{
    char msg[SPEC_MSG_MAX];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = c->depth < SPEC_PATH_DEPTH ? c->depth : SPEC_PATH_DEPTH;
    unsigned line = sl_spec_line(c->buf, c->len, c->path, n);
    char path[512]; /* a cut key shows 64 bytes, 4 characters each at worst */
    sl_spec_path_format(c->path, n, path, sizeof(path));
    if (c->nerrors == 0 && c->err != NULL && c->errlen > 0) {
        sl_err(c->err, c->errlen, -EINVAL, "%s:%u: %s: %s", c->name, line, path, msg);
        return first_error(c, -EINVAL);
    }
    char full[SPEC_MSG_MAX + 1024];
    snprintf(full, sizeof(full), "%s:%u: %s: %s", c->name, line, path, msg);
    return add_error(c, -EINVAL, full);
}

int sl_spec_err_msg(sl_spec_pctx_t *c, int code, const char *fmt, ...)
{
    char msg[SPEC_MSG_MAX + 1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->nerrors == 0 && c->err != NULL && c->errlen > 0) {
        sl_err(c->err, c->errlen, code, "%s", msg);
        return first_error(c, code);
    }
    return add_error(c, code, msg);
}

bool sl_spec_resume_at(sl_spec_pctx_t *c, size_t depth, int rc, int *first)
{
    if (rc < 0 && *first == 0) {
        *first = rc;
    }
    c->depth = depth;
    return rc == 0 || rc == -EINVAL;
}

void sl_spec_errors_finish(sl_spec_pctx_t *c)
{
    unsigned more = c->nerrors - c->nshown;
    if (more == 0 || c->err == NULL || c->nshown == 0) {
        return;
    }
    snprintf(c->err + c->used, c->errlen - c->used, "\n%s: %u more error%s", c->name, more,
             more > 1 ? "s" : "");
    c->used += strlen(c->err + c->used);
}

int sl_spec_perr(sl_spec_pctx_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vperr(c, fmt, ap);
    va_end(ap);
    return rc;
}

/* The same for member key of the current object. */
int sl_spec_ferr(sl_spec_pctx_t *c, const char *key, const char *fmt, ...)
{
    sl_spec_push(c, key);
    va_list ap;
    va_start(ap, fmt);
    int rc = vperr(c, fmt, ap);
    va_end(ap);
    sl_spec_pop(c);
    return rc;
}

/* Shortest decimal that reads back as v, so "got 1.0000001" is not shown
 * as "got 1"; a real that is a whole number keeps its ".0" so "got 224.0"
 * explains why an integer field refused it. */
void sl_spec_fmt_real(double v, char *out, size_t outlen)
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
const char *sl_spec_describe(const json_t *v, char *out, size_t outlen)
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
        sl_spec_fmt_real(json_real_value(v), out, outlen);
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
const char *sl_spec_join(const char *const *names, size_t n, char *out, size_t outlen)
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
int sl_spec_check_keys(sl_spec_pctx_t *c, json_t *obj, const char *const *allowed, const char *what)
{
    const char *key;
    size_t keylen;
    json_t *v;
    int rc = 0;
    json_object_keylen_foreach(obj, key, keylen, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            if (strlen(allowed[i]) == keylen && memcmp(allowed[i], key, keylen) == 0) {
                ok = true;
                break;
            }
        }
        if (!ok) { /* each unknown key is an error of its own */
            char list[SPEC_MSG_MAX / 2];
            sl_spec_push_key(c, key, keylen);
            rc = sl_spec_perr(c, "unknown key%s%s (expected one of: %s)",
                              what[0] != '\0' ? " for " : "", what,
                              sl_spec_join(allowed, SIZE_MAX, list, sizeof(list)));
            sl_spec_pop(c);
        }
    }
    return rc;
}

int sl_spec_get_int(sl_spec_pctx_t *c, json_t *obj, const char *key, bool required, int64_t min,
                    int64_t max, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        if (required) {
            return sl_spec_ferr(c, key, "missing (required): an integer in %" PRId64 "..%" PRId64,
                                min, max);
        }
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, key, "must be an integer in %" PRId64 "..%" PRId64 ", got %s", min,
                            max, sl_spec_describe(v, got, sizeof(got)));
    }
    *out = json_integer_value(v);
    return 0;
}

int sl_spec_get_u32(sl_spec_pctx_t *c, json_t *obj, const char *key, bool required, int64_t min,
                    int64_t max, uint32_t *out)
{
    int64_t x = *out;
    int rc = sl_spec_get_int(c, obj, key, required, min, max, &x);
    if (rc == 0) {
        *out = (uint32_t)x;
    }
    return rc;
}

int sl_spec_get_bool(sl_spec_pctx_t *c, json_t *obj, const char *key, bool *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        return 0;
    }
    if (!json_is_boolean(v)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, key, "must be true or false, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    *out = json_is_true(v);
    return 0;
}

/* JSON integers are accepted where a real is expected ("p": 1). */
bool sl_spec_as_number(const json_t *v, double *out)
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
int sl_spec_get_enum(sl_spec_pctx_t *c, json_t *obj, const char *key, bool required,
                     const char *const *names, size_t n, int *out)
{
    json_t *v = json_object_get(obj, key);
    char list[SPEC_MSG_MAX / 2];
    sl_spec_join(names, n, list, sizeof(list));
    if (v == NULL) {
        if (required) {
            return sl_spec_ferr(c, key, "missing (required): one of %s", list);
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
    return sl_spec_ferr(c, key, "must be one of %s, got %s", list,
                        sl_spec_describe(v, got, sizeof(got)));
}
