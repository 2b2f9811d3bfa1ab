/* spec_stages_mm: the keys of the multimodal ops (image_tiles, tokenize,
 * template) and their canonical JSON. Order rules live with the others in
 * spec_stages.c. Parsing thread only; sl_tokenizer_enc_name any thread. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"

#include "common/spec/spec_impl.h"

#define TILE_MAX 4096
#define TILES_MAX 64
#define TOKENS_MAX (1u << 24)
#define TOKENS_PER_TILE_MAX 65536

static const char *const enc_names[] = {
    [SL_TOKENIZER_CL100K] = "cl100k_base",
    [SL_TOKENIZER_O200K] = "o200k_base",
    [SL_TOKENIZER_GPT2] = "gpt2",
};
#define NENC (sizeof(enc_names) / sizeof(enc_names[0]))
static const char *const special_names[2] = {"ordinary", "allow"};

const char *sl_tokenizer_enc_name(sl_tokenizer_enc_e e)
{
    return (size_t)e < NENC ? enc_names[e] : "?";
}

/* Defaults are InternVL's: 448 px tiles, 1..12 of them, a thumbnail. */
static int parse_tiles(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    out->tile = 448;
    out->min_tiles = 1;
    out->max_tiles = 12;
    out->thumbnail = true;
    int rc = sl_spec_get_u32(c, st, "tile", false, 1, TILE_MAX, &out->tile);
    if (rc == 0) {
        rc = sl_spec_get_u32(c, st, "min_tiles", false, 1, TILES_MAX, &out->min_tiles);
    }
    if (rc == 0) {
        rc = sl_spec_get_u32(c, st, "max_tiles", false, 1, TILES_MAX, &out->max_tiles);
    }
    if (rc == 0) {
        rc = sl_spec_get_bool(c, st, "thumbnail", &out->thumbnail);
    }
    if (rc == 0 && out->min_tiles > out->max_tiles) {
        rc = sl_spec_ferr(c, "min_tiles", "must be <= max_tiles (%u), got %u", out->max_tiles,
                          out->min_tiles);
    }
    return rc;
}

static int parse_tokenize(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    char vocab[SL_SPEC_VOCAB_MAX];
    int rc = sl_spec_get_relpath(c, st, "vocab", vocab, sizeof(vocab));
    if (rc == 0) {
        out->vocab = strdup(vocab);
        if (out->vocab == NULL) {
            return sl_err(c->err, c->errlen, -ENOMEM, "%s: out of memory", c->name);
        }
    }
    int enc = SL_TOKENIZER_CL100K, special = 0;
    if (rc == 0) {
        rc = sl_spec_get_enum(c, st, "encoding", false, enc_names, NENC, &enc);
    }
    if (rc == 0) {
        rc = sl_spec_get_u32(c, st, "max_tokens", false, 0, TOKENS_MAX, &out->max_tokens);
    }
    if (rc == 0) {
        rc = sl_spec_get_enum(c, st, "special", false, special_names, 2, &special);
    }
    out->encoding = (sl_tokenizer_enc_e)enc;
    out->allow_special = special == 1;
    return rc;
}

static const char *const marker_names[SL_TMPL_MARKERS + 1] = {"system", "user", "assistant", "end",
                                                              NULL};
static const char *const train_names[2] = {"assistant", "all"};
static const char *const overflow_names[2] = {"truncate", "skip"};

/* One marker: an array of at most SL_TMPL_MARKER_MAX token ids. Ids rather
 * than text: a marker is what the model was trained with, exactly, and a
 * string's ids depend on the tokenizer and the text around it; ids also
 * make the template's fixed length known here, before any data is read. */
static int parse_marker(sl_spec_pctx_t *c, json_t *chat, int m, sl_stage_spec_t *out)
{
    json_t *v = json_object_get(chat, marker_names[m]);
    if (v == NULL) {
        return 0;
    }
    sl_spec_push(c, marker_names[m]);
    int rc = 0;
    if (!json_is_array(v) || json_array_size(v) > SL_TMPL_MARKER_MAX) {
        char got[96];
        rc = sl_spec_perr(c, "must be an array of at most %d token ids, got %s", SL_TMPL_MARKER_MAX,
                          sl_spec_describe(v, got, sizeof(got)));
    }
    for (size_t i = 0; rc == 0 && i < json_array_size(v); i++) {
        json_t *id = json_array_get(v, i);
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX) {
            char got[96];
            sl_spec_push_index(c, i);
            rc = sl_spec_perr(c, "must be a token id in 0..%d, got %s", INT32_MAX,
                              sl_spec_describe(id, got, sizeof(got)));
            sl_spec_pop(c);
            break;
        }
        out->tmpl_marker[m][i] = (uint32_t)json_integer_value(id);
    }
    out->tmpl_nmarker[m] = (uint32_t)json_array_size(v);
    sl_spec_pop(c);
    return rc;
}

/* "chat": true (roles without markers) or {"system": [ids], "user": ...,
 * "assistant": ..., "end": ...}. */
static int parse_chat(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    json_t *chat = json_object_get(st, "chat");
    if (chat == NULL || json_is_boolean(chat)) {
        out->chat = json_is_true(chat);
        return 0;
    }
    if (!json_is_object(chat)) {
        char got[96];
        return sl_spec_ferr(c, "chat",
                            "must be true, false or an object of marker id arrays "
                            "(system, user, assistant, end), got %s",
                            sl_spec_describe(chat, got, sizeof(got)));
    }
    out->chat = true;
    sl_spec_push(c, "chat");
    int rc = sl_spec_check_keys(c, chat, marker_names, "chat");
    for (int m = 0; rc == 0 && m < SL_TMPL_MARKERS; m++) {
        rc = parse_marker(c, chat, m, out);
    }
    sl_spec_pop(c);
    return rc;
}

uint32_t sl_tmpl_fixed_ids(const sl_stage_spec_t *st)
{
    uint32_t n = (st->bos >= 0) + (st->eos >= 0), role = 0;
    if (st->chat) {
        for (int m = 0; m < SL_TMPL_END; m++) {
            role = st->tmpl_nmarker[m] > role ? st->tmpl_nmarker[m] : role;
        }
        n += role + st->tmpl_nmarker[SL_TMPL_END];
    }
    return n;
}

static int parse_template_labels(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    int64_t ignore = -100;
    int train = 0, overflow = 0;
    out->labels = out->chat;
    int rc = sl_spec_get_bool(c, st, "labels", &out->labels);
    if (rc == 0) {
        rc = sl_spec_get_enum(c, st, "train_on", false, train_names, 2, &train);
    }
    if (rc == 0) {
        rc = sl_spec_get_int(c, st, "ignore_index", false, INT32_MIN, INT32_MAX, &ignore);
    }
    if (rc == 0) {
        rc = sl_spec_get_u32(c, st, "max_seq_len", false, 0, TOKENS_MAX, &out->max_seq_len);
    }
    if (rc == 0) {
        rc = sl_spec_get_enum(c, st, "overflow", false, overflow_names, 2, &overflow);
    }
    out->ignore_index = (int32_t)ignore;
    out->train_all = train == 1;
    out->skip_long = overflow == 1;
    uint32_t fixed = sl_tmpl_fixed_ids(out);
    if (rc == 0 && out->max_seq_len > 0 && out->max_seq_len <= fixed) {
        rc = sl_spec_ferr(c, "max_seq_len",
                          "must be more than the template's %u fixed ids (bos, eos and the "
                          "longest turn's markers), got %u",
                          fixed, out->max_seq_len);
    }
    return rc;
}

static int parse_template(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    out->tokens_per_tile = 256;
    out->bos = out->eos = -1;
    int rc = sl_spec_get_int(c, st, "image_token", true, 0, INT32_MAX, &out->image_token);
    if (rc == 0) {
        rc = sl_spec_get_u32(c, st, "tokens_per_tile", false, 1, TOKENS_PER_TILE_MAX,
                             &out->tokens_per_tile);
    }
    if (rc == 0) {
        rc = sl_spec_get_int(c, st, "bos", false, -1, INT32_MAX, &out->bos);
    }
    if (rc == 0) {
        rc = sl_spec_get_int(c, st, "eos", false, -1, INT32_MAX, &out->eos);
    }
    if (rc == 0) {
        rc = parse_chat(c, st, out);
    }
    if (rc == 0) {
        rc = parse_template_labels(c, st, out);
    }
    return rc;
}

static json_t *tiles_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:b}", "op", "image_tiles", "tile", (json_int_t)st->tile,
                     "min_tiles", (json_int_t)st->min_tiles, "max_tiles", (json_int_t)st->max_tiles,
                     "thumbnail", (int)st->thumbnail);
}

static json_t *tokenize_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:s}", "op", "tokenize", "vocab", st->vocab, "encoding",
                     sl_tokenizer_enc_name(st->encoding), "max_tokens", (json_int_t)st->max_tokens,
                     "special", special_names[st->allow_special ? 1 : 0]);
}

static json_t *ids_json(const uint32_t *ids, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, json_integer(ids[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Sets o[key] = v (taking v); -ENOMEM when v is NULL or the set fails. */
static int set_new(json_t *o, const char *key, json_t *v)
{
    return json_object_set_new(o, key, v) < 0 ? -ENOMEM : 0;
}

/* The keys added for chat, labels and max_seq_len appear only when set, so
 * a spec without them keeps its canonical form (and fingerprint); each also
 * when set without effect (train_on without labels), so the canonical form
 * reads back as the same stage. */
static int template_json_chat(const sl_stage_spec_t *st, json_t *o)
{
    int rc = 0;
    if (st->chat) {
        json_t *chat = json_object();
        for (int m = 0; chat != NULL && m < SL_TMPL_MARKERS; m++) {
            if (st->tmpl_nmarker[m] > 0 && rc == 0) {
                rc = set_new(chat, marker_names[m],
                             ids_json(st->tmpl_marker[m], st->tmpl_nmarker[m]));
            }
        }
        rc = rc < 0 ? rc : set_new(o, "chat", chat);
    }
    if (rc == 0 && st->labels != st->chat) {
        rc = set_new(o, "labels", json_boolean(st->labels));
    }
    if (rc == 0 && (st->labels || st->train_all)) {
        rc = set_new(o, "train_on", json_string(train_names[st->train_all]));
    }
    if (rc == 0 && (st->labels || st->ignore_index != -100)) {
        rc = set_new(o, "ignore_index", json_integer(st->ignore_index));
    }
    if (rc == 0 && st->max_seq_len > 0) {
        rc = set_new(o, "max_seq_len", json_integer(st->max_seq_len));
    }
    if (rc == 0 && (st->max_seq_len > 0 || st->skip_long)) {
        rc = set_new(o, "overflow", json_string(overflow_names[st->skip_long]));
    }
    return rc;
}

static json_t *template_json(const sl_stage_spec_t *st)
{
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I}", "op", "template", "image_token",
                          (json_int_t)st->image_token, "tokens_per_tile",
                          (json_int_t)st->tokens_per_tile, "bos", (json_int_t)st->bos, "eos",
                          (json_int_t)st->eos);
    if (o != NULL && template_json_chat(st, o) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static void tokenize_clear(sl_stage_spec_t *st)
{
    free(st->vocab);
    st->vocab = NULL;
}

static int tokenize_copy(sl_stage_spec_t *dst, const sl_stage_spec_t *src)
{
    dst->vocab = src->vocab != NULL ? strdup(src->vocab) : NULL;
    return dst->vocab != NULL || src->vocab == NULL ? 0 : -ENOMEM;
}

/* Tiles are final: normalize and to_chw run on them, geometry does not. */
const sl_op_def_t sl_op_def_image_tiles =
    {.name = "image_tiles",
     .keys = (const char *const[]){"op", "tile", "min_tiles", "max_tiles", "thumbnail", NULL},
     .parse = parse_tiles,
     .to_json = tiles_json,
     .flags = SL_OPF_RECORD | SL_OPF_ON_PIXELS,
     .slot = SL_ORD_TILES,
     .before = SL_ORD_BIT(SL_ORD_NORMALIZE) | SL_ORD_BIT(SL_ORD_TO_CHW),
     .before_msg = "image_tiles must come before normalize and to_chw"};
const sl_op_def_t sl_op_def_tokenize = {.name = "tokenize",
                                        .keys = (const char *const[]){"op", "vocab", "encoding",
                                                                      "max_tokens", "special",
                                                                      NULL},
                                        .parse = parse_tokenize,
                                        .to_json = tokenize_json,
                                        .flags = SL_OPF_RECORD,
                                        .slot = SL_ORD_TOKENIZE,
                                        .clear = tokenize_clear,
                                        .copy = tokenize_copy};
const sl_op_def_t sl_op_def_template =
    {.name = "template",
     .keys = (const char *const[]){"op", "image_token", "tokens_per_tile", "bos", "eos", "chat",
                                   "labels", "train_on", "ignore_index", "max_seq_len", "overflow",
                                   NULL},
     .parse = parse_template,
     .to_json = template_json,
     .flags = SL_OPF_RECORD,
     .slot = SL_ORD_TEMPLATE,
     .needs = SL_ORD_TOKENIZE,
     .needs_msg = "template needs the text's token ids: put tokenize before it"};
