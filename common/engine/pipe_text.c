/* pipe_text: the record units on text -- tokenize (common/text's BPE, its
 * ranks loaded once per pipeline by sl_pipeline_load) and template (the
 * sequence the model sees: image placeholders, then the text's ids). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source.h"
#include "common/engine/pipeline_impl.h"
#include "common/text/tokenizer.h"

/* Longest sequence template writes: 16 Mi ids (64 MiB). */
#define TEMPLATE_MAX_IDS (1u << 24)

void sl_pipe_tok_scratch_free(sl_pipe_scratch_t *sc)
{
    sl_tok_scratch_free(sc->tok);
    sc->tok = NULL;
    sc->tok_owner = NULL;
    free(sc->ids);
    sc->ids = NULL;
    sc->ids_cap = 0;
}

int sl_pipeline_load(sl_pipeline_t *p, const sl_source_t *src, char *err, size_t errlen)
{
    for (uint32_t u = 0; u < p->nunits; u++) {
        const unit_t *un = &p->units[u];
        if (un->kind != UNIT_TOKENIZE || p->tok != NULL) {
            continue;
        }
        if (src == NULL) {
            return sl_err(err, errlen, -EINVAL, "tokenize: no data root to find '%s' under",
                          un->st->vocab);
        }
        int fd = sl_source_open_file(src, un->st->vocab, err, errlen);
        if (fd < 0) {
            return fd;
        }
        int rc = sl_tokenizer_open_fd(fd, un->st->vocab, sl_tokenizer_enc_name(un->st->encoding),
                                      &p->tok, err, errlen);
        close(fd);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* The text's ids: a skip with bad_text for invalid UTF-8 (-EDOM). */
int sl_pipe_tokenize(const sl_pipeline_t *p, const unit_t *u, const sl_rec_t *in,
                     sl_tensor_t *out, sl_pipe_scratch_t *sc, char *err, size_t errlen)
{
    if (p->tok == NULL) {
        return sl_err(err, errlen, -EINVAL, "tokenize: the ranks file is not loaded");
    }
    if (sc->tok == NULL || sc->tok_owner != p->tok) {
        sl_pipe_tok_scratch_free(sc);
        sc->tok = sl_tok_scratch_new(p->tok);
        if (sc->tok == NULL) {
            return sl_err(err, errlen, -ENOMEM, "tokenize: out of memory");
        }
        sc->tok_owner = p->tok;
    }
    const sl_rfield_t *text = sl_rec_find(in, SL_RF_TEXT);
    size_t n = 0;
    if (text != NULL) {
        int rc = sl_tokenizer_encode(p->tok, sc->tok, (const char *)text->data, text->nbytes,
                                     u->st->allow_special ? SL_TOK_ALLOW_SPECIAL : SL_TOK_ORDINARY,
                                     u->st->max_tokens, &sc->ids, &sc->ids_cap, &n, err, errlen);
        if (rc == -EILSEQ) {
            return sl_err_prefix(err, errlen, -EDOM, "text");
        }
        if (rc < 0) {
            return rc;
        }
    }
    int rc = sl_pipe_copy_kinds(in, out, SL_RF_KEY, SL_RF_META);
    sl_rfield_t f = {.kind = SL_RF_TOKENS, .dtype = SL_DT_U32, .count = 1, .h = (uint32_t)n,
                     .w = 1, .c = 1, .nbytes = n * 4, .data = (const uint8_t *)sc->ids};
    if (rc == 0) {
        rc = sl_rec_add_copy(out, &f);
    }
    if (rc == 0) {
        rc = sl_pipe_copy_kinds(in, out, SL_RF_INPUT_IDS, SL_RF__MAX);
    }
    return rc < 0 ? sl_err(err, errlen, rc, "tokenize: cannot hold %zu ids", n) : 0;
}

static void put_id(uint8_t *dst, size_t i, uint32_t v)
{
    memcpy(dst + 4 * i, &v, 4); /* records are little-endian; so is every host we build for */
}

/* [bos] image_token x (tiles x tokens_per_tile) text-ids [eos]. An image
 * that was not tiled counts as one tile. */
int sl_pipe_template(const unit_t *u, const sl_rec_t *in, sl_tensor_t *out, char *err,
                     size_t errlen)
{
    const sl_stage_spec_t *st = u->st;
    const sl_rfield_t *tok = sl_rec_find(in, SL_RF_TOKENS);
    if (tok == NULL) {
        return sl_err(err, errlen, -EINVAL, "template: the record has no token ids");
    }
    uint64_t tiles = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        const sl_rfield_t *f = &in->f[i];
        tiles += f->kind == SL_RF_TILES ? f->count
                 : (f->kind == SL_RF_IMAGE || f->kind == SL_RF_IMAGE_ENC) ? 1
                                                                            : 0;
    }
    uint64_t img_ids = tiles * st->tokens_per_tile;
    uint64_t n = (st->bos >= 0) + img_ids + tok->h + (st->eos >= 0);
    if (n > TEMPLATE_MAX_IDS) {
        return sl_err(err, errlen, -EFBIG, "template: %llu ids, the limit is %u",
                      (unsigned long long)n, TEMPLATE_MAX_IDS);
    }
    int rc = sl_pipe_copy_kinds(in, out, SL_RF_KEY, SL_RF_TOKENS);
    sl_rfield_t f = {.kind = SL_RF_INPUT_IDS, .dtype = SL_DT_U32, .count = 1, .h = (uint32_t)n,
                     .w = 1, .c = 1, .nbytes = (size_t)n * 4};
    uint8_t *dst = NULL;
    if (rc == 0) {
        rc = sl_rec_add(out, &f, &dst);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "template: cannot hold %llu ids", (unsigned long long)n);
    }
    size_t k = 0;
    if (st->bos >= 0) {
        put_id(dst, k++, (uint32_t)st->bos);
    }
    for (uint64_t i = 0; i < img_ids; i++) {
        put_id(dst, k++, (uint32_t)st->image_token);
    }
    memcpy(dst + 4 * k, tok->data, tok->nbytes);
    k += tok->h;
    if (st->eos >= 0) {
        put_id(dst, k++, (uint32_t)st->eos);
    }
    return sl_pipe_copy_kinds(in, out, SL_RF_IMAGE_ENC, SL_RF__MAX);
}
