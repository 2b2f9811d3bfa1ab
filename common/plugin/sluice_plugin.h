/* sluice_plugin.h: the ABI of a Sluice stage plugin (version 1).
 *
 * A plugin is a shared object in a host's plugin_dir (the worker's
 * `plugin_dir` / --plugin-dir, the client's --plugin-dir or
 * SLUICE_PLUGIN_DIR). It exports one function, sluice_plugin_stages(), that
 * lists the stages it provides. A pipeline spec uses one as
 *     {"op": "plugin", "name": "cutout", "sha256": "<the .so's SHA-256>",
 *      "params": {...}}
 * Hosts never load a path a peer sends: only the files of their own
 * plugin_dir, and a stage runs only when its file's SHA-256 is the spec's,
 * so every host runs the same build.
 *
 * A stage works on one decoded image: uint8, HWC, c = 1..4 channels (v1:
 * "reads" and "writes" are both "image"). It must be a pure function of its
 * parameters, the input and the random stream it is given -- no global
 * state, no clock, no thread-local caches that change results -- so a
 * sample gets the same bytes on every host (the stream is Sluice's
 * counter-based one, keyed by seed, epoch, sample index and the stage's
 * position). Called from many threads at once on one state (thread-safe by
 * contract: state is read-only after create).
 *
 * Sluice runs plugins in a separate process (sluice-plugin-host), so a
 * plugin that crashes, hangs or leaks takes only that process down: the
 * split is retried, and the job fails naming the plugin.
 *
 * Self-contained: a plugin builds against this header alone (no Sluice
 * library, no JSON library: sluice_plugin_param_* below read its params),
 *     cc -O2 -fPIC -shared -I common/plugin -o my_stage.so my_stage.c
 * from a source tree, or with $(pkg-config --cflags sluice) once installed. */
#ifndef SLUICE_PLUGIN_H
#define SLUICE_PLUGIN_H

#include <errno.h>
#include <locale.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_PLUGIN_ABI 1

typedef struct sluice_plugin_image {
    uint8_t *data; /* h * w * c bytes, HWC */
    uint32_t h, w, c;
} sluice_plugin_image_t;

/* The sample's random stream (xoshiro256** over a key Sluice derives):
 * draw with sluice_plugin_u64 / sluice_plugin_uniform below. */
typedef struct sluice_plugin_rng {
    uint64_t s[4];
} sluice_plugin_rng_t;

typedef struct sluice_plugin_stage {
    uint32_t abi;           /* SLUICE_PLUGIN_ABI */
    const char *name;       /* [a-z0-9_]{1,63}: what specs call it */
    const char *version;    /* free text, shown in /status */
    const char *reads;      /* "image" (v1) */
    const char *writes;     /* "image" (v1) */
    double cost_hint;       /* CPU seconds per megapixel on one core, 0 = unknown (profiled) */
    /* Parses params (a JSON object's text, "{}" when the spec has none) into
     * a state; 0 or a negative errno with err saying why (the spec is then
     * refused with it). May be NULL: no parameters. */
    int (*create)(const char *params, size_t len, void **ret_state, char *err, size_t errlen);
    void (*destroy)(void *state);
    /* The output's shape for an input of h x w x c; may be NULL: the same. */
    int (*out_shape)(const void *state, uint32_t h, uint32_t w, uint32_t c, uint32_t *ret_h,
                     uint32_t *ret_w, uint32_t *ret_c, char *err, size_t errlen);
    /* in -> out (out->data has out_shape's bytes, allocated by Sluice; it
     * does not alias in). 0, or a negative errno with err: the sample is
     * then skipped as corrupt, with err as its reason. */
    int (*process)(const void *state, const sluice_plugin_image_t *in, sluice_plugin_image_t *out,
                   sluice_plugin_rng_t *rng, char *err, size_t errlen);
} sluice_plugin_stage_t;

/* The one symbol a plugin exports. */
typedef const sluice_plugin_stage_t *const *(*sluice_plugin_stages_fn)(uint32_t *ret_n);
#define SLUICE_PLUGIN_ENTRY "sluice_plugin_stages"

static inline uint64_t sluice_plugin_u64(sluice_plugin_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t out = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double sluice_plugin_uniform(sluice_plugin_rng_t *r)
{
    return (double)(sluice_plugin_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- Reading params without a JSON library -------------------------------------------
 *
 * create() gets its spec's "params" as a JSON object's text (Sluice's
 * canonical form: compact, keys sorted, at most 1023 bytes). These read one
 * top-level key of it:
 *
 *     double p = 1.0;             (defaults first: an absent key leaves them)
 *     int64_t size = 16;
 *     if (sluice_plugin_param_number(params, len, "p", &p) == -EINVAL ||
 *         sluice_plugin_param_int(params, len, "size", &size) == -EINVAL) ...
 *
 * They are strict and bounded, as for text from a stranger: the whole of
 * params (len bytes; no NUL needed or allowed inside) must be one
 * well-formed JSON object, nested at most SLUICE_PLUGIN_PARAMS_DEPTH deep,
 * strings valid UTF-8; keys are compared after their escapes are decoded;
 * only top-level keys match (a nested object's keys and any string value
 * never do); the key asked for given twice is an error
 * (sluice_plugin_params_check: any key). Each returns
 *     0        found; *ret (or buf) set
 *     -ENOENT  not in params; *ret untouched
 *     -EINVAL  present with another type (null included), or params not
 *              such an object; *ret untouched
 *     -ERANGE  a number out of the type's range (int: int64_t; number: a
 *              finite double)
 *     -ENOSPC  (string) longer than buf can hold with its NUL
 * The sluice_plugin_pj_* functions are their insides, not an API. */

#define SLUICE_PLUGIN_PARAMS_DEPTH 32   /* nesting of values inside params */
#define SLUICE_PLUGIN_PARAMS_KEY_MAX 64 /* longest key looked for or checked, in bytes */

typedef struct sluice_plugin_pj {
    const char *s;
    size_t n, i; /* s[0..n), next byte s[i] */
} sluice_plugin_pj_t;

static inline void sluice_plugin_pj_ws(sluice_plugin_pj_t *j)
{
    while (j->i < j->n &&
           (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r')) {
        j->i++;
    }
}

/* Consumes byte ch after white space; 0, or -EINVAL when it is not there. */
static inline int sluice_plugin_pj_expect(sluice_plugin_pj_t *j, char ch)
{
    sluice_plugin_pj_ws(j);
    if (j->i >= j->n || j->s[j->i] != ch) {
        return -EINVAL;
    }
    j->i++;
    return 0;
}

static inline int sluice_plugin_pj_hex4(sluice_plugin_pj_t *j, uint32_t *ret)
{
    uint32_t v = 0;
    if (j->n - j->i < 4) {
        return -EINVAL;
    }
    for (int k = 0; k < 4; k++) {
        char ch = j->s[j->i++];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0) {
            return -EINVAL;
        }
        v = v << 4 | (uint32_t)d;
    }
    *ret = v;
    return 0;
}

/* Byte b at out[*len] when it fits in cap; *len counts on regardless. */
static inline void sluice_plugin_pj_put(char *out, size_t cap, size_t *len, uint32_t b)
{
    if (out != NULL && *len < cap) {
        out[*len] = (char)(uint8_t)b;
    }
    (*len)++;
}

/* A multi-byte UTF-8 sequence whose lead byte ch was just read: copied out
 * when valid (no overlong forms, surrogates or code points past U+10FFFF). */
static inline int sluice_plugin_pj_utf8(sluice_plugin_pj_t *j, uint8_t ch, char *out, size_t cap,
                                        size_t *len)
{
    int more = ch >= 0xf0 ? 3 : ch >= 0xe0 ? 2 : 1;
    if (ch < 0xc2 || ch > 0xf4 || j->n - j->i < (size_t)more) {
        return -EINVAL;
    }
    uint32_t cp = ch & (0x3fu >> more);
    sluice_plugin_pj_put(out, cap, len, ch);
    for (int k = 0; k < more; k++) {
        uint8_t cc = (uint8_t)j->s[j->i++];
        if ((cc & 0xc0) != 0x80) {
            return -EINVAL;
        }
        cp = cp << 6 | (cc & 0x3fu);
        sluice_plugin_pj_put(out, cap, len, cc);
    }
    if ((more == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
        (more == 3 && (cp < 0x10000 || cp > 0x10ffff))) {
        return -EINVAL;
    }
    return 0;
}

/* The escape after a backslash, decoded (\u0000 refused: a C string
 * cannot hold it; surrogates only as a pair). */
static inline int sluice_plugin_pj_escape(sluice_plugin_pj_t *j, char *out, size_t cap, size_t *len)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (j->i >= j->n) {
        return -EINVAL;
    }
    char e = j->s[j->i++];
    for (int k = 0; k < 8; k++) {
        if (e == from[k]) {
            sluice_plugin_pj_put(out, cap, len, (uint8_t)to[k]);
            return 0;
        }
    }
    uint32_t cp, lo;
    if (e != 'u' || sluice_plugin_pj_hex4(j, &cp) < 0 || cp == 0 || (cp >= 0xdc00 && cp < 0xe000)) {
        return -EINVAL;
    }
    if (cp >= 0xd800 && cp < 0xdc00) {
        if (j->n - j->i < 2 || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u') {
            return -EINVAL;
        }
        j->i += 2;
        if (sluice_plugin_pj_hex4(j, &lo) < 0 || lo < 0xdc00 || lo >= 0xe000) {
            return -EINVAL;
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    if (cp < 0x80) {
        sluice_plugin_pj_put(out, cap, len, cp);
    } else if (cp < 0x800) {
        sluice_plugin_pj_put(out, cap, len, 0xc0 | cp >> 6);
        sluice_plugin_pj_put(out, cap, len, 0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        sluice_plugin_pj_put(out, cap, len, 0xe0 | cp >> 12);
        sluice_plugin_pj_put(out, cap, len, 0x80 | (cp >> 6 & 0x3f));
        sluice_plugin_pj_put(out, cap, len, 0x80 | (cp & 0x3f));
    } else {
        sluice_plugin_pj_put(out, cap, len, 0xf0 | cp >> 18);
        sluice_plugin_pj_put(out, cap, len, 0x80 | (cp >> 12 & 0x3f));
        sluice_plugin_pj_put(out, cap, len, 0x80 | (cp >> 6 & 0x3f));
        sluice_plugin_pj_put(out, cap, len, 0x80 | (cp & 0x3f));
    }
    return 0;
}

/* A string (white space, then its opening quote): decoded into out (the
 * first cap bytes; out may be NULL; no NUL added), its decoded length in
 * *ret_len, which may exceed cap. */
static inline int sluice_plugin_pj_string(sluice_plugin_pj_t *j, char *out, size_t cap,
                                          size_t *ret_len)
{
    size_t len = 0;
    if (sluice_plugin_pj_expect(j, '"') < 0) {
        return -EINVAL;
    }
    while (j->i < j->n) {
        uint8_t ch = (uint8_t)j->s[j->i++];
        int rc = 0;
        if (ch == '"') {
            *ret_len = len;
            return 0;
        } else if (ch < 0x20) { /* NUL and raw control characters */
            rc = -EINVAL;
        } else if (ch >= 0x80) {
            rc = sluice_plugin_pj_utf8(j, ch, out, cap, &len);
        } else if (ch == '\\') {
            rc = sluice_plugin_pj_escape(j, out, cap, &len);
        } else {
            sluice_plugin_pj_put(out, cap, &len, ch);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return -EINVAL; /* no closing quote */
}

static inline int sluice_plugin_pj_digits(sluice_plugin_pj_t *j)
{
    size_t from = j->i;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') {
        j->i++;
    }
    return j->i > from ? 0 : -EINVAL;
}

/* A number in JSON's grammar, its text into buf (at most 63 characters:
 * longer is refused, though JSON allows it); *ret_int is 1 when it has
 * neither fraction nor exponent. */
static inline int sluice_plugin_pj_number(sluice_plugin_pj_t *j, char buf[64], int *ret_int)
{
    sluice_plugin_pj_ws(j);
    size_t from = j->i;
    int is_int = 1;
    if (j->i < j->n && j->s[j->i] == '-') {
        j->i++;
    }
    if (j->i < j->n && j->s[j->i] == '0') {
        j->i++;
    } else if (j->i >= j->n || j->s[j->i] < '1' || j->s[j->i] > '9' ||
               sluice_plugin_pj_digits(j) < 0) {
        return -EINVAL;
    }
    if (j->i < j->n && j->s[j->i] == '.') {
        j->i++;
        is_int = 0;
        if (sluice_plugin_pj_digits(j) < 0) {
            return -EINVAL;
        }
    }
    if (j->i < j->n && (j->s[j->i] == 'e' || j->s[j->i] == 'E')) {
        j->i++;
        is_int = 0;
        if (j->i < j->n && (j->s[j->i] == '+' || j->s[j->i] == '-')) {
            j->i++;
        }
        if (sluice_plugin_pj_digits(j) < 0) {
            return -EINVAL;
        }
    }
    if (j->i - from > 63) {
        return -EINVAL;
    }
    memcpy(buf, j->s + from, j->i - from);
    buf[j->i - from] = '\0';
    *ret_int = is_int;
    return 0;
}

/* true, false or null (what a value starting with a letter can be);
 * *ret: 1 true, 0 false, -1 null. */
static inline int sluice_plugin_pj_word(sluice_plugin_pj_t *j, int *ret)
{
    static const char *const words[3] = {"null", "false", "true"};
    sluice_plugin_pj_ws(j);
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k]);
        if (j->n - j->i >= n && memcmp(j->s + j->i, words[k], n) == 0) {
            j->i += n;
            *ret = k - 1;
            return 0;
        }
    }
    return -EINVAL;
}

/* A scalar value, or the opening of an object (then its first key and
 * colon are read too) or an array; *ret_open: '{', '[' or 0. An empty
 * object or array is read whole (*ret_open 0). */
static inline int sluice_plugin_pj_scalar(sluice_plugin_pj_t *j, char *ret_open)
{
    char buf[64];
    size_t len;
    int k;
    *ret_open = 0;
    sluice_plugin_pj_ws(j);
    if (j->i >= j->n) {
        return -EINVAL;
    }
    char ch = j->s[j->i];
    if (ch == '"') {
        return sluice_plugin_pj_string(j, NULL, 0, &len);
    } else if (ch == '{' || ch == '[') {
        j->i++;
        sluice_plugin_pj_ws(j);
        if (j->i < j->n && j->s[j->i] == (ch == '{' ? '}' : ']')) {
            j->i++;
            return 0;
        }
        *ret_open = ch;
        if (ch == '{' && (sluice_plugin_pj_string(j, NULL, 0, &len) < 0 ||
                          sluice_plugin_pj_expect(j, ':') < 0)) {
            return -EINVAL;
        }
        return 0;
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
        return sluice_plugin_pj_number(j, buf, &k);
    }
    return sluice_plugin_pj_word(j, &k);
}

/* Reads one value whole, nested ones included (at most depth levels
 * more), without recursion: a bit per level says array or object. */
static inline int sluice_plugin_pj_skip(sluice_plugin_pj_t *j, int depth_left)
{
    uint64_t arrays = 0;
    int depth = 0;
    size_t len;
    for (;;) {
        char open;
        if (sluice_plugin_pj_scalar(j, &open) < 0) {
            return -EINVAL;
        }
        if (open != 0) {
            if (depth == depth_left || depth == 63) {
                return -EINVAL;
            }
            arrays = open == '[' ? arrays | 1ull << depth : arrays & ~(1ull << depth);
            depth++;
            continue; /* its first value */
        }
        for (;;) { /* after a value: the next in its container, or the container's end */
            if (depth == 0) {
                return 0;
            }
            int array = (int)(arrays >> (depth - 1) & 1);
            sluice_plugin_pj_ws(j);
            char ch = j->i < j->n ? j->s[j->i++] : '\0';
            if (ch == ',') {
                if (!array && (sluice_plugin_pj_string(j, NULL, 0, &len) < 0 ||
                               sluice_plugin_pj_expect(j, ':') < 0)) {
                    return -EINVAL;
                }
                break;
            }
            if (ch != (array ? ']' : '}')) {
                return -EINVAL;
            }
            depth--;
        }
    }
}

/* Calls member(ctx, key, key_len, j) for each top-level key of params,
 * j at its value (key: the first SLUICE_PLUGIN_PARAMS_KEY_MAX bytes,
 * NUL-terminated; key_len its whole length); member returns 0 to go on
 * (the value is skipped) or a negative code to stop with. Then params
 * must end. */
static inline int sluice_plugin_pj_members(const char *params, size_t len,
                                           int (*member)(void *ctx, const char *key, size_t key_len,
                                                         const sluice_plugin_pj_t *j),
                                           void *ctx)
{
    sluice_plugin_pj_t j = {params, len, 0};
    char key[SLUICE_PLUGIN_PARAMS_KEY_MAX + 1];
    size_t klen;
    if (params == NULL || sluice_plugin_pj_expect(&j, '{') < 0) {
        return -EINVAL;
    }
    sluice_plugin_pj_ws(&j);
    int more = !(j.i < j.n && j.s[j.i] == '}');
    j.i += !more;
    while (more) {
        if (sluice_plugin_pj_string(&j, key, SLUICE_PLUGIN_PARAMS_KEY_MAX, &klen) < 0 ||
            sluice_plugin_pj_expect(&j, ':') < 0) {
            return -EINVAL;
        }
        key[klen < SLUICE_PLUGIN_PARAMS_KEY_MAX ? klen : SLUICE_PLUGIN_PARAMS_KEY_MAX] = '\0';
        int rc = member(ctx, key, klen, &j);
        if (rc < 0) {
            return rc;
        }
        if (sluice_plugin_pj_skip(&j, SLUICE_PLUGIN_PARAMS_DEPTH - 1) < 0) {
            return -EINVAL;
        }
        sluice_plugin_pj_ws(&j);
        char ch = j.i < j.n ? j.s[j.i++] : '\0';
        if (ch != ',' && ch != '}') {
            return -EINVAL;
        }
        more = ch == ',';
    }
    sluice_plugin_pj_ws(&j);
    return j.i == j.n ? 0 : -EINVAL;
}

typedef struct sluice_plugin_pj_lookup {
    const char *key;
    size_t pos;
    int found;
} sluice_plugin_pj_find_t;

static inline int sluice_plugin_pj_find_member(void *ctx, const char *key, size_t key_len,
                                               const sluice_plugin_pj_t *j)
{
    sluice_plugin_pj_find_t *f = (sluice_plugin_pj_find_t *)ctx;
    if (key_len == strlen(f->key) && memcmp(key, f->key, key_len) == 0) {
        if (f->found) {
            return -EINVAL; /* twice */
        }
        f->found = 1;
        f->pos = j->i;
    }
    return 0;
}

/* Where key's value starts: 0 with *ret at it, -ENOENT or -EINVAL. */
static inline int sluice_plugin_pj_find(const char *params, size_t len, const char *key,
                                        sluice_plugin_pj_t *ret)
{
    sluice_plugin_pj_find_t f = {key, 0, 0};
    if (key == NULL || strlen(key) > SLUICE_PLUGIN_PARAMS_KEY_MAX) {
        return -EINVAL;
    }
    int rc = sluice_plugin_pj_members(params, len, sluice_plugin_pj_find_member, &f);
    if (rc < 0) {
        return rc;
    }
    if (!f.found) {
        return -ENOENT;
    }
    ret->s = params;
    ret->n = len;
    ret->i = f.pos;
    return 0;
}

/* A number (integer or not) as a double. */
static inline int sluice_plugin_param_number(const char *params, size_t len, const char *key,
                                             double *ret)
{
    sluice_plugin_pj_t j;
    char buf[64];
    int is_int, rc = sluice_plugin_pj_find(params, len, key, &j);
    if (rc < 0) {
        return rc;
    }
    if (sluice_plugin_pj_number(&j, buf, &is_int) < 0) {
        return -EINVAL;
    }
    /* strtod reads the locale's decimal point: give it that one. */
    const char *dp = localeconv()->decimal_point;
    char *dot = strchr(buf, '.');
    if (dot != NULL && dp != NULL && dp[0] != '\0' && dp[1] == '\0') {
        *dot = dp[0];
    }
    errno = 0;
    double v = strtod(buf, NULL);
    if (errno == ERANGE && (v > 1.0 || v < -1.0)) {
        return -ERANGE; /* past DBL_MAX; an underflow is its rounding to 0 */
    }
    *ret = v;
    return 0;
}

/* An integer: no fraction or exponent (12.0 is refused, as a real). */
static inline int sluice_plugin_param_int(const char *params, size_t len, const char *key,
                                          int64_t *ret)
{
    sluice_plugin_pj_t j;
    char buf[64];
    int is_int, rc = sluice_plugin_pj_find(params, len, key, &j);
    if (rc < 0) {
        return rc;
    }
    if (sluice_plugin_pj_number(&j, buf, &is_int) < 0 || !is_int) {
        return -EINVAL;
    }
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE) {
        return -ERANGE;
    }
    *ret = (int64_t)v;
    return 0;
}

/* true or false: *ret 1 or 0. */
static inline int sluice_plugin_param_bool(const char *params, size_t len, const char *key,
                                           int *ret)
{
    sluice_plugin_pj_t j;
    int v, rc = sluice_plugin_pj_find(params, len, key, &j);
    if (rc < 0) {
        return rc;
    }
    if (sluice_plugin_pj_word(&j, &v) < 0 || v < 0) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

/* A string, its escapes decoded, into buf (size bytes with its NUL; buf is
 * untouched on failure). */
static inline int sluice_plugin_param_string(const char *params, size_t len, const char *key,
                                             char *buf, size_t size)
{
    sluice_plugin_pj_t j;
    size_t n;
    int rc = sluice_plugin_pj_find(params, len, key, &j);
    if (rc < 0) {
        return rc;
    }
    sluice_plugin_pj_t again = j;
    if (sluice_plugin_pj_string(&j, NULL, 0, &n) < 0) {
        return -EINVAL;
    }
    if (buf == NULL || n >= size) {
        return buf == NULL ? -EINVAL : -ENOSPC;
    }
    sluice_plugin_pj_string(&again, buf, size, &n);
    buf[n] = '\0';
    return 0;
}

typedef struct sluice_plugin_pj_check {
    const char *const *keys;
    uint64_t seen;
    char *err; /* NULL: not wanted */
    size_t errlen;
    int said;
} sluice_plugin_pj_check_t;

static inline void sluice_plugin_pj_say(sluice_plugin_pj_check_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void sluice_plugin_pj_say(sluice_plugin_pj_check_t *c, const char *fmt, ...)
{
    c->said = 1;
    if (c->err != NULL && c->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
}

static inline int sluice_plugin_pj_check_member(void *ctx, const char *key, size_t key_len,
                                                const sluice_plugin_pj_t *j)
{
    sluice_plugin_pj_check_t *c = (sluice_plugin_pj_check_t *)ctx;
    (void)j;
    for (int k = 0; c->keys[k] != NULL; k++) {
        if (key_len == strlen(c->keys[k]) && memcmp(key, c->keys[k], key_len) == 0) {
            if (c->seen >> k & 1) {
                sluice_plugin_pj_say(c, "params: \"%s\" given twice", c->keys[k]);
                return -EINVAL;
            }
            c->seen |= 1ull << k;
            return 0;
        }
    }
    char shown[SLUICE_PLUGIN_PARAMS_KEY_MAX + 1], list[256] = "";
    size_t n = 0;
    for (size_t i = 0; key[i] != '\0'; i++) { /* the key as text on one line */
        shown[n++] = (uint8_t)key[i] < 0x20 || key[i] == 0x7f ? '?' : key[i];
    }
    shown[n] = '\0';
    for (int k = 0; c->keys[k] != NULL; k++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof(list) - l, "%s%.64s", k > 0 ? ", " : "", c->keys[k]);
    }
    sluice_plugin_pj_say(c, "params: unknown key \"%s%s\" (keys: %s)", shown,
                         key_len > SLUICE_PLUGIN_PARAMS_KEY_MAX ? "..." : "", list);
    return -EINVAL;
}

/* params is such an object whose keys are all among keys (a NULL-ended
 * list of at most 64), none twice: 0, else -EINVAL with err (may be NULL)
 * naming the key at fault or saying that params is malformed. */
static inline int sluice_plugin_params_check(const char *params, size_t len,
                                             const char *const *keys, char *err, size_t errlen)
{
    sluice_plugin_pj_check_t c = {keys, 0, err, errlen, 0};
    size_t n = 0;
    while (keys != NULL && keys[n] != NULL) {
        n++;
    }
    if (keys == NULL || n > 64) {
        sluice_plugin_pj_say(&c, "params: at most 64 keys can be checked");
        return -EINVAL;
    }
    int rc = sluice_plugin_pj_members(params, len, sluice_plugin_pj_check_member, &c);
    if (rc < 0 && !c.said) {
        sluice_plugin_pj_say(&c,
                             "params: not a well-formed JSON object (nested at most %d deep, UTF-8 "
                             "strings)",
                             SLUICE_PLUGIN_PARAMS_DEPTH);
    }
    return rc;
}

#ifdef __cplusplus
}
#endif

#endif
