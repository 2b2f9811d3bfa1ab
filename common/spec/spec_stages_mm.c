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

static json_t *template_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I}", "op", "template", "image_token",
                     (json_int_t)st->image_token, "tokens_per_tile",
                     (json_int_t)st->tokens_per_tile, "bos", (json_int_t)st->bos, "eos",
                     (json_int_t)st->eos);
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
     .keys = (const char *const[]){"op", "image_token", "tokens_per_tile", "bos", "eos", NULL},
     .parse = parse_template,
     .to_json = template_json,
     .flags = SL_OPF_RECORD,
     .slot = SL_ORD_TEMPLATE,
     .needs = SL_ORD_TOKENIZE,
     .needs_msg = "template needs the text's token ids: put tokenize before it"};
