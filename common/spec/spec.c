/* spec: a whole spec document: the top-level keys (batching, epochs,
 * error policy, max_pixels, ranks), the defaults, and the public parse entry
 * points; the sections are parsed by spec_source.c, spec_stages.c and
 * spec_offload.c (common/spec/spec_impl.h). Any thread; a parse keeps its
 * state on the caller's stack. */
#include "common/spec/spec.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/file.h"
#include "common/spec/mix.h"
#include "common/spec/resume.h"
#include "common/spec/spec_impl.h"

#define SPEC_BATCH_MAX 65536
#define SPEC_EPOCHS_MAX 1000000
#define SPEC_MAX_PIXELS_MAX (INT64_C(1) << 40)
#define SPEC_MAX_PIXELS_DEFAULT UINT64_C(100000000)

static const char *const top_keys[] = {
    "source",
    "stages",
    "batch_size",
    "epochs",
    "drop_last",
    "deterministic",
    "offload",
    "on_error",
    "max_pixels",
    "world_size",
    "rank",
    "rank_padding",
    "name",
    "compress",
    "batching",
    "resume",
    "batch_transforms",
    "num_classes",
    "mix",
    "cache",
    NULL,
};
/* Multi-rank jobs (common/order/ranks.h): indexed by sl_rank_padding_e. */
const char *const sl_spec_rank_padding_names[SL_SPEC_NRANK_PADDING] = {"drop", "pad"};
const char *const sl_spec_compress_names[SL_SPEC_NCOMPRESS] = {"off", "zstd"};
/* "cache" (docs/cache.md): indexed by sl_cache_mode_e. */
const char *const sl_spec_cache_names[SL_SPEC_NCACHE] = {"auto", "off"};

const char *const sl_spec_on_error_names[SL_SPEC_NON_ERROR] = {
    [SL_ON_ERROR_SKIP] = "skip",
    [SL_ON_ERROR_FAIL] = "fail",
};

/* "resume": written by the client from saved states (docs/protocol.md
 * "Resume"), checked against the source at job open (ranks.h). */
static int parse_resume(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *v = json_object_get(root, "resume");
    if (v == NULL) {
        return 0;
    }
    char msg[SPEC_MSG_MAX];
    int rc = sl_resume_from_json(v, SL_SPEC_WORLD_MAX, &spec->resume, msg, sizeof(msg));
    if (rc < 0) {
        return sl_spec_err_msg(c, rc, "%s: %s", c->name, msg);
    }
    return 0;
}

/* world_size / rank / rank_padding (docs/protocol.md "Multi-rank jobs"). */
static int parse_ranks(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    int rc = sl_spec_get_u32(c, root, "world_size", false, 1, SL_SPEC_WORLD_MAX, &spec->world_size);
    if (rc == 0) {
        rc = sl_spec_get_u32(c, root, "rank", false, 0, (int64_t)spec->world_size - 1, &spec->rank);
    }
    if (rc == 0) {
        int pad = (int)spec->rank_padding;
        rc = sl_spec_get_enum(c, root, "rank_padding", false, sl_spec_rank_padding_names,
                              SL_SPEC_NRANK_PADDING, &pad);
        spec->rank_padding = (sl_rank_padding_e)pad;
    }
    return rc;
}

/* "name": a spec built in code or written to a temporary file has no
 * telling file name, so status pages show this one. Printable, one line. */
static int parse_name(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *v = json_object_get(root, "name");
    if (v == NULL) {
        return 0;
    }
    char got[SPEC_SHOWN_MAX + 8];
    if (!json_is_string(v)) {
        return sl_spec_ferr(c, "name", "must be a string, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len == 0 || len >= SL_SPEC_NAME_MAX) {
        return sl_spec_ferr(c, "name", "must be 1..%d bytes, got %zu", SL_SPEC_NAME_MAX - 1,
                            len);
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            return sl_spec_ferr(c, "name", "must not contain control characters, got %s",
                                sl_spec_describe(v, got, sizeof(got)));
        }
    }
    memcpy(spec->name, s, len + 1);
    return 0;
}

static int parse_on_error(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    int on_error = (int)spec->on_error;
    int rc = sl_spec_get_enum(c, root, "on_error", false, sl_spec_on_error_names, SL_SPEC_NON_ERROR,
                              &on_error);
    spec->on_error = (sl_on_error_e)on_error;
    return rc;
}

static int parse_max_pixels(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    int64_t mp = (int64_t)spec->max_pixels;
    int rc = sl_spec_get_int(c, root, "max_pixels", false, 1, SPEC_MAX_PIXELS_MAX, &mp);
    spec->max_pixels = (uint64_t)mp;
    return rc;
}

static int parse_compress(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    int compress = (int)spec->compress;
    int rc = sl_spec_get_enum(c, root, "compress", false, sl_spec_compress_names, SL_SPEC_NCOMPRESS,
                              &compress);
    spec->compress = (sl_compress_e)compress;
    return rc;
}

static int parse_cache(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    int mode = (int)spec->cache;
    int rc = sl_spec_get_enum(c, root, "cache", false, sl_spec_cache_names, SL_SPEC_NCACHE, &mode);
    spec->cache = (sl_cache_mode_e)mode;
    return rc;
}

static int parse_sizes(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    return sl_spec_get_u32(c, root, "batch_size", false, 1, SPEC_BATCH_MAX, &spec->batch_size);
}

static int parse_epochs(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    return sl_spec_get_u32(c, root, "epochs", false, 1, SPEC_EPOCHS_MAX, &spec->epochs);
}

static int parse_flags(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    int rc = sl_spec_get_bool(c, root, "drop_last", &spec->drop_last);
    int rc2 = sl_spec_get_bool(c, root, "deterministic", &spec->deterministic);
    return rc < 0 ? rc : rc2;
}

static int check_top_keys(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    (void)spec;
    return sl_spec_check_keys(c, root, top_keys, "");
}

/* The top level's parts, in the order their errors are reported. Each is
 * independent of the others' errors, so the parse goes on past a failed one
 * (a part checks its own keys in order and stops at its first error: the
 * ranks' rank is bounded by their world_size). */
typedef int (*part_fn)(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec);
static const part_fn k_parts[] = {
    check_top_keys,       parse_name,
    sl_spec_parse_source, sl_spec_parse_stages,
    parse_sizes,          parse_epochs,
    parse_flags,          sl_spec_parse_offload,
    parse_on_error,       parse_max_pixels,
    parse_ranks,          parse_compress,
    parse_cache,          sl_spec_parse_batching,
    parse_resume,         sl_spec_parse_batch_transforms,
};

static int parse_root(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    if (!json_is_object(root)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_perr(c, "must be an object with \"source\" and \"stages\", got %s",
                            sl_spec_describe(root, got, sizeof(got)));
    }
    int first = 0;
    size_t depth = c->depth;
    for (size_t i = 0; i < sizeof(k_parts) / sizeof(k_parts[0]); i++) {
        int rc = k_parts[i](c, root, spec);
        if (!sl_spec_resume_at(c, depth, rc, &first)) {
            return rc; /* not a spec error (out of memory): nothing more to say */
        }
    }
    return first;
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
    spec->batching = (sl_batching_t){.microbatches = 1, .lookahead = 4, .a = 1.0, .d = 16.0};
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
    sl_spec_pctx_t c =
        {.name = name, .buf = buf, .len = len, .err = err, .errlen = errlen, .depth = 0};
    int rc = parse_root(&c, root, spec);
    sl_spec_errors_finish(&c);
    if (rc == 0) { /* a move: ret_spec takes over what spec owns */
        memcpy(ret_spec, spec, sizeof(*spec));
    } else {
        sl_spec_clear(spec);
    }
    free(spec);
    json_decref(root);
    return rc;
}

void sl_spec_clear(sl_spec_t *spec)
{
    if (spec == NULL) {
        return;
    }
    for (uint32_t i = 0; i < spec->nstages && i < SL_SPEC_MAX_STAGES; i++) {
        const sl_op_def_t *d = sl_spec_op_def(spec->stages[i].op);
        if (d != NULL && d->clear != NULL) {
            d->clear(&spec->stages[i]);
        }
    }
    sl_resume_free(spec->resume);
    spec->resume = NULL;
    sl_mix_free(spec->mix);
    spec->mix = NULL;
}

int sl_spec_copy(sl_spec_t *dst, const sl_spec_t *src)
{
    memcpy(dst, src, sizeof(*dst));
    dst->resume = NULL;
    dst->mix = NULL;
    int rc = 0;
    uint32_t n = src->nstages < SL_SPEC_MAX_STAGES ? src->nstages : SL_SPEC_MAX_STAGES;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const sl_op_def_t *d = sl_spec_op_def(src->stages[i].op);
        if (d != NULL && d->copy != NULL) {
            rc = d->copy(&dst->stages[i], &src->stages[i]);
        }
        if (rc < 0) {
            dst->nstages = i + 1; /* the later stages still borrow src's: not dst's to free */
        }
    }
    if (rc == 0 && src->resume != NULL) {
        dst->resume = sl_resume_dup(src->resume);
        rc = dst->resume != NULL ? 0 : -ENOMEM;
    }
    if (rc == 0 && src->mix != NULL) {
        dst->mix = sl_mix_dup(src->mix);
        rc = dst->mix != NULL ? 0 : -ENOMEM;
    }
    if (rc < 0) {
        sl_spec_clear(dst);
        sl_spec_init(dst);
    }
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
