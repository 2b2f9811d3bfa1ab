/* spec_impl: what the spec module's files share (spec.c, spec_ctx.c,
 * spec_source.c, spec_stages*.c, spec_plugin.c, spec_offload.c,
 * spec_json.c, and the op table: spec_ops.c, used by spec_layout.c). Not a
 * public API. A parse runs on one thread with one sl_spec_pctx_t on its stack: the
 * raw text (to find lines), the caller's error buffer and the path of the
 * value being checked. After an error a section parser returns without
 * popping what it pushed; the parse goes on with the next independent part
 * (top-level key, stage) after restoring the depth it had there
 * (sl_spec_resume_at), so one run reports every error, as compilers do:
 * one message a line in the caller's buffer, the first exactly as when only
 * one was reported, at most SPEC_ERRORS_SHOWN, then a count of the rest. */
#ifndef SL_SPEC_IMPL_H
#define SL_SPEC_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spec/spec.h"
#include "common/spec/spec_lines.h"

/* The deepest path the parser names is stages[i].mean[j]; room to spare. */
#define SPEC_PATH_DEPTH 8
/* Room for one message part. The list of valid ops is the longest (29 ops,
 * 367 bytes, at SPEC_MSG_MAX * 3 / 4 of room): test_spec's test_unknown_op
 * lists them all, so an op that no longer fits fails it. */
#define SPEC_MSG_MAX 1024
#define SPEC_SHOWN_MAX 96
/* Errors one parse lists; the rest are counted ("N more errors"). */
#define SPEC_ERRORS_SHOWN 20

typedef struct sl_spec_pctx_s {
    const char *name;
    const char *buf;
    size_t len;
    char *err;
    size_t errlen;
    sl_spec_pathc_t path[SPEC_PATH_DEPTH];
    size_t depth; /* may exceed SPEC_PATH_DEPTH only through a bug; then cut */
    unsigned nerrors; /* reported so far */
    unsigned nshown;  /* of them written into err */
    size_t used;      /* bytes of err in use (without the NUL) */
} sl_spec_pctx_t;

/* Names as they appear in JSON, indexed by their enum. */
#define SL_SPEC_NSOURCE_TYPES ((size_t)SL_SRC_JSONL + 1)
#define SL_SPEC_NOFFLOAD ((size_t)SL_OFFLOAD_FIXED + 1)
#define SL_SPEC_NON_ERROR ((size_t)SL_ON_ERROR_FAIL + 1)
#define SL_SPEC_NRANK_PADDING ((size_t)SL_RANK_PAD + 1)
extern const char *const sl_spec_source_type_names[SL_SPEC_NSOURCE_TYPES];
extern const char *const sl_spec_offload_names[SL_SPEC_NOFFLOAD];
extern const char *const sl_spec_on_error_names[SL_SPEC_NON_ERROR];
extern const char *const sl_spec_rank_padding_names[SL_SPEC_NRANK_PADDING];
#define SL_SPEC_NCOMPRESS ((size_t)SL_COMPRESS_ZSTD + 1)
extern const char *const sl_spec_compress_names[SL_SPEC_NCOMPRESS];
#define SL_SPEC_NCACHE ((size_t)SL_CACHE_OFF + 1)
extern const char *const sl_spec_cache_names[SL_SPEC_NCACHE];

/* ---- spec_ctx.c: the path of the value being checked, and messages */

void sl_spec_push_key(sl_spec_pctx_t *c, const char *key, size_t keylen);
void sl_spec_push(sl_spec_pctx_t *c, const char *key);
void sl_spec_push_index(sl_spec_pctx_t *c, size_t index);
void sl_spec_pop(sl_spec_pctx_t *c);
/* "NAME:LINE: PATH: message" for the value at the current path; -EINVAL. */
int sl_spec_perr(sl_spec_pctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for member key of the current object. */
int sl_spec_ferr(sl_spec_pctx_t *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error whose message says where itself ("NAME: why"): added like the
 * others; returns code. */
int sl_spec_err_msg(sl_spec_pctx_t *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* After a part of the spec failed with rc: whether the parse goes on with
 * the next part (rc is a spec error, not e.g. -ENOMEM); if so the path is
 * cut back to depth, where that part began. *first keeps the first error. */
bool sl_spec_resume_at(sl_spec_pctx_t *c, size_t depth, int rc, int *first);
/* Ends the list: "NAME: N more errors" when more were found than shown. */
void sl_spec_errors_finish(sl_spec_pctx_t *c);
/* Shortest decimal that reads back as v; a whole number keeps its ".0". */
void sl_spec_fmt_real(double v, char *out, size_t outlen);
/* What a value is, for "got ..." in messages. Returns out. */
const char *sl_spec_describe(const json_t *v, char *out, size_t outlen);
/* "a, b, c" from a NULL-terminated list (or the first n of an array). */
const char *sl_spec_join(const char *const *names, size_t n, char *out, size_t outlen);
/* Every key of obj must be in allowed; what says whose keys they are. */
int sl_spec_check_keys(sl_spec_pctx_t *c, json_t *obj, const char *const *allowed,
                       const char *what);

/* Typed getters: an absent key keeps *out (the default) unless required. */
int sl_spec_get_int(sl_spec_pctx_t *c, json_t *obj, const char *key, bool required, int64_t min,
                    int64_t max, int64_t *out);
int sl_spec_get_u32(sl_spec_pctx_t *c, json_t *obj, const char *key, bool required, int64_t min,
                    int64_t max, uint32_t *out);
int sl_spec_get_bool(sl_spec_pctx_t *c, json_t *obj, const char *key, bool *out);
/* One of names[0..n) as a string; the index goes to *out. */
int sl_spec_get_enum(sl_spec_pctx_t *c, json_t *obj, const char *key, bool required,
                     const char *const *names, size_t n, int *out);
/* A path relative to the data root (required): not absolute, no "..",
 * shorter than outlen. */
int sl_spec_get_relpath(sl_spec_pctx_t *c, json_t *obj, const char *key, char *out,
                        size_t outlen);
/* JSON integers are accepted where a real is expected ("p": 1). */
bool sl_spec_as_number(const json_t *v, double *out);
/* random_erasing's value: pixel units (0..255) on uint8 pixels, any float
 * once a normalize (CPU or device) has made them tensor values. */
int sl_spec_check_erasing(sl_spec_pctx_t *c, const sl_aug_spec_t *a, bool normalized);

/* ---- the op table (spec_ops.c): one row per op, defined beside its
 * functions (spec_stages.c, spec_stages_mm.c, spec_stages_aug.c,
 * spec_plugin.c). Adding a stage = an sl_op_e value, its row and its
 * functions, and the row's line in spec_ops.c's index. */

/* Where the order rules remember an op was seen (at most once each). */
typedef enum {
    SL_ORD_NONE = 0,
    SL_ORD_DECODE,
    SL_ORD_NORMALIZE,
    SL_ORD_TO_CHW,
    SL_ORD_TILES,
    SL_ORD_TOKENIZE,
    SL_ORD_TEMPLATE,
    SL_ORD__COUNT
} sl_ord_slot_e;
#define SL_ORD_BIT(slot) (1u << (slot))

typedef struct sl_op_def_s {
    const char *name;        /* as the spec spells it */
    const char *const *keys; /* the keys it accepts, "op" first, NULL-terminated */
    /* Fills out's parameters from the stage object st (NULL: none); out is
     * zeroed with its op set. */
    int (*parse)(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out);
    /* The stage's canonical JSON (NULL: {"op": name}); NULL on ENOMEM. */
    json_t *(*to_json)(const sl_stage_spec_t *st);
    unsigned flags; /* SL_OPF_* (spec.h) */
    /* Order rules (spec_stages.c): the slot it takes once; the slots that
     * must not be seen before it (with before_msg, or the generic "works on
     * whole uint8 HWC images" message); the slot that must be (needs_msg). */
    sl_ord_slot_e slot;
    unsigned before;
    const char *before_msg;
    sl_ord_slot_e needs;
    const char *needs_msg;
    /* The unit layout (spec_layout.c): the stage's unit name (NULL: the
     * op's name); whether this stage makes no unit at all (NULL: never). */
    const char *(*unit_name)(const sl_stage_spec_t *st);
    bool (*no_unit)(const sl_stage_spec_t *st);
    /* The stage's owned strings (NULL: it has none): clear frees them and
     * leaves NULL; copy duplicates them into dst, a byte copy of src (on
     * -ENOMEM dst's are NULL). */
    void (*clear)(sl_stage_spec_t *st);
    int (*copy)(sl_stage_spec_t *dst, const sl_stage_spec_t *src);
} sl_op_def_t;

/* The row of op; NULL outside 0..SL_OP__COUNT-1. */
const sl_op_def_t *sl_spec_op_def(sl_op_e op);
/* The op named name[0..len), or -1. */
int sl_spec_op_find(const char *name, size_t len);

extern const sl_op_def_t sl_op_def_decode_jpeg, sl_op_def_decode_image,
    sl_op_def_random_resized_crop, sl_op_def_resize, sl_op_def_center_crop, sl_op_def_flip,
    sl_op_def_normalize, sl_op_def_to_chw, sl_op_def_vertical_flip;
extern const sl_op_def_t sl_op_def_image_tiles, sl_op_def_tokenize, sl_op_def_template;
extern const sl_op_def_t sl_op_def_plugin;
extern const sl_op_def_t sl_op_def_color_jitter, sl_op_def_random_grayscale,
    sl_op_def_gaussian_blur, sl_op_def_random_erasing, sl_op_def_random_rotation,
    sl_op_def_random_affine, sl_op_def_solarize, sl_op_def_posterize, sl_op_def_auto_contrast,
    sl_op_def_equalize, sl_op_def_trivial_augment_wide, sl_op_def_rand_augment,
    sl_op_def_random_crop, sl_op_def_random_apply, sl_op_def_random_choice;
extern const sl_op_def_t sl_op_def_decode_video;

/* ---- the sections of a spec, each from the root object into spec */

int sl_spec_parse_source(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec);
int sl_spec_parse_stages(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec);
int sl_spec_parse_batching(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec);
json_t *sl_spec_batching_json(const sl_spec_t *spec);
/* spec_batch.c: "batch_transforms" and "num_classes"; then their canonical
 * JSON set into root (nothing when absent; 0, or -1 on ENOMEM). */
int sl_spec_parse_batch_transforms(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec);
int sl_spec_batch_tfs_json(const sl_spec_t *spec, json_t *root);
int sl_spec_parse_offload(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec);

#endif
