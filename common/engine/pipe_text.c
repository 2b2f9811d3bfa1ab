/* pipe_text: the record units on text -- tokenize (common/text's BPE, its
 * ranks loaded once per pipeline by sl_pipeline_load; a conversation turn by
 * turn) and template (the sequence the model sees: image placeholders, then
 * the text's ids or the chat turns, and the labels). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/base/sha256.h"
#include "common/data/source.h"
#include "common/engine/pipeline_impl.h"
#include "common/engine/tmpl_plan.h"
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

/* The SHA-256 of fd's bytes, read with pread (the offset stays for the
 * tokenizer's own read). 0 or -errno. */
static int hash_fd(int fd, uint8_t out[32])
{
    sl_sha256_t h;
    sl_sha256_init(&h);
    uint8_t buf[1 << 16];
    off_t off = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof(buf), off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            break;
        }
        sl_sha256_update(&h, buf, (size_t)n);
        off += n;
    }
    sl_sha256_final(&h, out);
    return 0;
}

int sl_pipeline_content_hash(const sl_pipeline_t *p, uint8_t out[32])
{
    if (p->tok == NULL) {
        return 0;
    }
    memcpy(out, p->tok_sha, sizeof(p->tok_sha));
    return 1;
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
        int rc = hash_fd(fd, p->tok_sha);
        if (rc < 0) {
            close(fd);
            return sl_err(err, errlen, rc, "tokenize: cannot read '%s'", un->st->vocab);
        }
        rc = sl_tokenizer_open_fd(fd, un->st->vocab, sl_tokenizer_enc_name(un->st->encoding),
                                  &p->tok, err, errlen);
        close(fd);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* A conversation's ids, turn by turn (no token spans two turns, so a turn's
 * role can label its ids): into sc->c as uint32, with a copy of the TURNS
 * rows in sc->a whose token ends are filled in. max_tokens caps the total. */
static int encode_turns(const sl_pipeline_t *p, const unit_t *u, const sl_rfield_t *text,
                        const sl_rfield_t *turns, sl_pipe_scratch_t *sc, size_t *ret_n, char *err,
                        size_t errlen)
{
    size_t total = 0, max = u->st->max_tokens;
    if (text == NULL) { /* a peer's record: turns are spans of the text */
        return sl_err(err, errlen, -EINVAL, "tokenize: turns without a text");
    }
    int rc = sl_tensor_reserve(&sc->a, turns->nbytes);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "tokenize: out of memory");
    }
    memcpy(sc->a.data, turns->data, turns->nbytes);
    uint32_t *rows = (uint32_t *)(void *)sc->a.data;
    for (uint32_t i = 0; i < turns->h; i++) {
        uint32_t *row = rows + (size_t)i * SL_RF_TURN_WORDS;
        uint32_t off = row[SL_RF_TURN_OFF], len = row[SL_RF_TURN_LEN];
        size_t ntext = text->nbytes;
        if (off > ntext || len > ntext - off) { /* a peer's record */
            return sl_err(err, errlen, -EINVAL,
                          "tokenize: turn %u (bytes %u+%u) is past the "
                          "text's %zu bytes",
                          i, off, len, ntext);
        }
        size_t n = 0;
        if (max == 0 || total < max) {
            rc = sl_tokenizer_encode(p->tok, sc->tok, (const char *)text->data + off, len,
                                     u->st->allow_special ? SL_TOK_ALLOW_SPECIAL : SL_TOK_ORDINARY,
                                     max > 0 ? max - total : 0, &sc->ids, &sc->ids_cap, &n, err,
                                     errlen);
            if (rc == -EILSEQ) {
                return sl_err_prefix(err, errlen, -EDOM, "text");
            }
            if (rc < 0) {
                return rc;
            }
        }
        rc = sl_tensor_reserve(&sc->c, (total + n) * 4);
        if (rc < 0) {
            return sl_err(err, errlen, rc, "tokenize: cannot hold %zu ids", total + n);
        }
        memcpy(sc->c.data + total * 4, sc->ids, n * 4);
        total += n;
        row[SL_RF_TURN_TOK_END] = (uint32_t)total;
    }
    *ret_n = total;
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
    const sl_rfield_t *turns = sl_rec_find(in, SL_RF_TURNS);
    size_t n = 0;
    const uint32_t *ids = NULL;
    if (turns != NULL) {
        int rc = encode_turns(p, u, text, turns, sc, &n, err, errlen);
        if (rc < 0) {
            return rc;
        }
        ids = (const uint32_t *)(const void *)sc->c.data;
    } else if (text != NULL) {
        int rc = sl_tokenizer_encode(p->tok, sc->tok, (const char *)text->data, text->nbytes,
                                     u->st->allow_special ? SL_TOK_ALLOW_SPECIAL : SL_TOK_ORDINARY,
                                     u->st->max_tokens, &sc->ids, &sc->ids_cap, &n, err, errlen);
        if (rc == -EILSEQ) {
            return sl_err_prefix(err, errlen, -EDOM, "text");
        }
        if (rc < 0) {
            return rc;
        }
        ids = sc->ids;
    }
    int rc = sl_pipe_copy_kinds(in, out, SL_RF_KEY, SL_RF_META);
    sl_rfield_t f = {.kind = SL_RF_TOKENS,
                     .dtype = SL_DT_U32,
                     .count = 1,
                     .h = (uint32_t)n,
                     .w = 1,
                     .c = 1,
                     .nbytes = n * 4,
                     .data = (const uint8_t *)ids};
    if (rc == 0) {
        rc = sl_rec_add_copy(out, &f);
    }
    if (rc == 0) {
        rc = sl_pipe_copy_kinds(in, out, SL_RF_INPUT_IDS, SL_RF_VIDEO_ENC);
    }
    if (rc == 0 && turns != NULL) {
        sl_rfield_t tf = *turns;
        tf.data = sc->a.data;
        rc = sl_rec_add_copy(out, &tf);
    }
    if (rc == 0) {
        rc = sl_pipe_copy_kinds(in, out, SL_RF_LABELS, SL_RF__MAX);
    }
    return rc < 0 ? sl_err(err, errlen, rc, "tokenize: cannot hold %zu ids", n) : 0;
}

static void put_id(uint8_t *dst, size_t i, uint32_t v)
{
    memcpy(dst + 4 * i, &v, 4); /* records are little-endian; so is every host we build for */
}

/* Writes the sequence's ids, or with labels its labels, one id at a time:
 * up to limit (the ids before eos; below the whole when truncated). */
typedef struct {
    uint8_t *dst;
    uint64_t k, limit;
    bool labels;
    int32_t ignore;
} emit_t;

static void emit(emit_t *e, uint32_t id, bool train)
{
    if (e->k < e->limit) {
        put_id(e->dst, e->k++, e->labels && !train ? (uint32_t)e->ignore : id);
    }
}

static void emit_ids(emit_t *e, const uint32_t *ids, uint32_t n, bool train)
{
    for (uint32_t i = 0; i < n; i++) {
        emit(e, ids[i], train);
    }
}

/* The layout (docs/records.md): [bos] image ids, then the text -- with chat
 * each turn as role marker, its ids, end marker -- then [eos]. Labels: the
 * ignore index on image ids always; with train_on "assistant" also on bos,
 * role markers and every id of a turn that is not the assistant's (its end
 * marker included), and on eos unless the last turn is the assistant's (a
 * text without turns is trained on whole). */
static void layout(const sl_stage_spec_t *st, const sl_tmpl_plan_t *pl, const sl_rfield_t *tok,
                   const sl_rfield_t *turns, emit_t *e)
{
    bool all = st->train_all, last = true;
    e->limit = pl->len - (st->eos >= 0);
    if (st->bos >= 0) {
        emit(e, (uint32_t)st->bos, all);
    }
    for (uint64_t i = 0; i < pl->image_ids; i++) {
        emit(e, (uint32_t)st->image_token, false);
    }
    uint32_t nturns = turns != NULL ? turns->h : 0, start = 0;
    for (uint32_t t = 0; t < nturns; t++) {
        uint32_t role = sl_rec_u32(turns, (size_t)t * SL_RF_TURN_WORDS + SL_RF_TURN_ROLE);
        uint32_t end = sl_rec_u32(turns, (size_t)t * SL_RF_TURN_WORDS + SL_RF_TURN_TOK_END);
        last = all || role == SL_ROLE_ASSISTANT;
        if (st->chat) {
            emit_ids(e, st->tmpl_marker[role], st->tmpl_nmarker[role], all);
        }
        for (uint32_t j = start; j < end; j++) {
            emit(e, sl_rec_u32(tok, j), last);
        }
        if (st->chat) {
            emit_ids(e, st->tmpl_marker[SL_TMPL_END], st->tmpl_nmarker[SL_TMPL_END], last);
        }
        start = end;
    }
    for (uint32_t j = start; j < tok->h; j++) { /* a text without turns */
        emit(e, sl_rec_u32(tok, j), true);
    }
    if (st->eos >= 0) {
        e->limit = pl->len;
        emit(e, (uint32_t)st->eos, last);
    }
}

/* A peer's TURNS must describe the tokens: known roles, token ends in order
 * ending at the last token. */
static int turns_check(const sl_rfield_t *turns, const sl_rfield_t *tok, char *err, size_t errlen)
{
    uint32_t prev = 0;
    for (uint32_t t = 0; turns != NULL && t < turns->h; t++) {
        uint32_t role = sl_rec_u32(turns, (size_t)t * SL_RF_TURN_WORDS + SL_RF_TURN_ROLE);
        uint32_t end = sl_rec_u32(turns, (size_t)t * SL_RF_TURN_WORDS + SL_RF_TURN_TOK_END);
        if (role >= SL_ROLE__COUNT || end < prev || end > tok->h ||
            (t + 1 == turns->h && end != tok->h)) {
            return sl_err(err, errlen, -EINVAL,
                          "template: turn %u (role %u, tokens to %u) does "
                          "not fit the %u token ids",
                          t, role, end, tok->h);
        }
        prev = end;
    }
    return 0;
}

/* The images' tiles in order (an image that was not tiled counts as one). */
static uint32_t image_tiles(const sl_rec_t *in, uint32_t *tiles)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        const sl_rfield_t *f = &in->f[i];
        if (f->kind == SL_RF_TILES || f->kind == SL_RF_IMAGE || f->kind == SL_RF_IMAGE_ENC) {
            tiles[n++] = f->kind == SL_RF_TILES ? f->count : 1;
        }
    }
    return n;
}

/* Copies the first keep images and the kinds after them but LABELS. */
static int copy_images(const sl_rec_t *in, uint32_t keep, sl_tensor_t *out)
{
    uint32_t img = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        const sl_rfield_t *f = &in->f[i];
        bool image = f->kind == SL_RF_TILES || f->kind == SL_RF_IMAGE || f->kind == SL_RF_IMAGE_ENC;
        if ((image && img++ >= keep) || f->kind < SL_RF_IMAGE_ENC || f->kind == SL_RF_LABELS) {
            continue;
        }
        int rc = sl_rec_add_copy(out, f);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static int add_ids(sl_tensor_t *out, sl_rf_kind_e kind, const sl_stage_spec_t *st,
                   const sl_tmpl_plan_t *pl, const sl_rfield_t *tok, const sl_rfield_t *turns)
{
    sl_rfield_t f = {.kind = kind,
                     .dtype = SL_DT_U32,
                     .count = 1,
                     .h = (uint32_t)pl->len,
                     .w = 1,
                     .c = 1,
                     .nbytes = (size_t)pl->len * 4};
    emit_t e = {.labels = kind == SL_RF_LABELS, .ignore = st->ignore_index};
    int rc = sl_rec_add(out, &f, &e.dst);
    if (rc == 0) {
        layout(st, pl, tok, turns, &e);
    }
    return rc;
}

/* [bos] image_token x (tiles x tokens_per_tile) text-ids [eos], the text's
 * turns between chat markers, capped by max_seq_len (tmpl_plan.h), and the
 * labels. A sample over max_seq_len with "overflow": "skip" is -EMSGSIZE
 * (skip too_long). */
int sl_pipe_template(const unit_t *u, const sl_rec_t *in, sl_tensor_t *out, char *err,
                     size_t errlen)
{
    const sl_stage_spec_t *st = u->st;
    const sl_rfield_t *tok = sl_rec_find(in, SL_RF_TOKENS);
    const sl_rfield_t *turns = sl_rec_find(in, SL_RF_TURNS);
    if (tok == NULL) {
        return sl_err(err, errlen, -EINVAL, "template: the record has no token ids");
    }
    int rc = turns_check(turns, tok, err, errlen);
    if (rc < 0) {
        return rc;
    }
    uint32_t tiles[SL_REC_MAX_FIELDS];
    uint32_t nimg = image_tiles(in, tiles);
    uint64_t text = sl_tmpl_text_ids(st,
                                     turns != NULL ? (const uint32_t *)(const void *)turns->data
                                                   : NULL,
                                     SL_RF_TURN_WORDS, turns != NULL ? turns->h : 0, tok->h);
    sl_tmpl_plan_t pl;
    sl_tmpl_plan(st, tiles, nimg, text, &pl);
    if (pl.skip) {
        return sl_err(err, errlen, -EMSGSIZE, "template: %llu ids, over max_seq_len %u",
                      (unsigned long long)pl.full, st->max_seq_len);
    }
    if (pl.len > TEMPLATE_MAX_IDS) {
        return sl_err(err, errlen, -EFBIG, "template: %llu ids, the limit is %u",
                      (unsigned long long)pl.len, TEMPLATE_MAX_IDS);
    }
    rc = sl_pipe_copy_kinds(in, out, SL_RF_KEY, SL_RF_TOKENS);
    if (rc == 0) {
        rc = add_ids(out, SL_RF_INPUT_IDS, st, &pl, tok, turns);
    }
    if (rc == 0) {
        rc = copy_images(in, pl.nimages, out);
    }
    if (rc == 0 && st->labels) {
        rc = add_ids(out, SL_RF_LABELS, st, &pl, tok, turns);
    }
    return rc < 0 ? sl_err(err, errlen, rc, "template: cannot hold %llu ids",
                           (unsigned long long)pl.len)
                  : 0;
}
