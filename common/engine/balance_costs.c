/* balance_costs: the per-sample predictions a balanced epoch order is made
 * from (common/engine/balance_costs.h), read from the data. */
#include "common/engine/balance_costs.h"

#include <errno.h>
#include <string.h>

#include "common/engine/pipeline.h"
#include "common/engine/tmpl_plan.h"

#include "common/data/source.h"
#include "common/image/image_decode.h"
#include "common/image/tiles.h"
#include "common/order/balance.h"
#include "common/sample/record.h"
#include "common/spec/spec.h"
#include "common/video/video.h"

#define HEAD_BYTES 65536 /* as the cost model's header reads */

static const sl_stage_spec_t *find_op(const sl_spec_t *spec, sl_op_e op)
{
    for (uint32_t i = 0; i < spec->nstages; i++) {
        if (spec->stages[i].op == op) {
            return &spec->stages[i];
        }
    }
    return NULL;
}

/* Tiles of one image of w x h (0 x 0: unknown, one tile). */
static uint32_t tiles_of(const sl_stage_spec_t *t, uint32_t w, uint32_t h)
{
    uint32_t cols, rows;
    if (t == NULL || w == 0 || h == 0 ||
        sl_tiles_grid(w, h, t->tile, t->min_tiles, t->max_tiles, &cols, &rows) < 0) {
        return 1;
    }
    uint32_t n = cols * rows;
    return n + (t->thumbnail && n > 1);
}

/* The frames decode_video makes of a clip whose head is f (its size into
 * *w, *h; 0 when the head does not tell): uniform's count, or fps over the
 * header's duration; none without decode_video. */
static uint32_t clip_frames(const sl_stage_spec_t *dv, const sl_rfield_t *f, uint32_t *w,
                            uint32_t *h)
{
    sl_video_info_t info;
    bool known = sl_video_probe(f->data, f->nbytes, &info, NULL, 0) == 0;
    *w = known ? info.width : 0;
    *h = known ? info.height : 0;
    if (dv == NULL) {
        return 0;
    }
    if (dv->v_sampling == 0) {
        return dv->v_frames;
    }
    double n = known && info.duration_sec > 0 ? info.duration_sec * dv->v_fps + 1 : 1e9;
    return n < dv->v_max_frames ? (uint32_t)n : dv->v_max_frames;
}

/* The exact pass: with tokenize and template the sequence length is known
 * before decoding, so it is computed rather than guessed -- the sample read
 * once, its text through the pipeline's own tokenize unit (the same ids, turn
 * by turn), its images' headers through image_tiles' grid, and the template's
 * plan (tmpl_plan.h) on those counts, as template computes it. */
typedef struct {
    sl_pipeline_t *p;
    uint32_t tok_unit;
    sl_pipe_scratch_t sc;
    sl_tensor_t rec;
} exact_t;

static int exact_open(const sl_spec_t *spec, const sl_source_t *src, exact_t *x)
{
    char err[256];
    memset(x, 0, sizeof(*x));
    if (!sl_source_is_record(src) || sl_pipeline_new(spec, 0, &x->p, err, sizeof(err)) < 0) {
        return -EINVAL;
    }
    x->tok_unit = UINT32_MAX;
    for (uint32_t u = 0; u < sl_pipeline_nunits(x->p); u++) {
        if (strcmp(sl_pipeline_unit_name(x->p, u), "tokenize") == 0) {
            x->tok_unit = u;
        }
    }
    sl_pipe_scratch_init(&x->sc);
    sl_tensor_init(&x->rec);
    if (x->tok_unit == UINT32_MAX || sl_pipeline_load(x->p, src, err, sizeof(err)) < 0) {
        return -EINVAL; /* the job fails opening its pipeline, saying why */
    }
    return 0;
}

static void exact_close(exact_t *x)
{
    if (x->p != NULL) {
        sl_pipe_scratch_free(&x->sc);
        sl_tensor_free(&x->rec);
        sl_pipeline_free(x->p);
    }
}

/* Sample i's sequence length and tiles; -errno when it cannot be read (the
 * sample is a skip then, and the estimate stands). A too_long skip is 0. */
static int exact_sample(exact_t *x, const sl_source_t *src, const sl_stage_spec_t *tiles,
                        const sl_stage_spec_t *tmpl, const sl_stage_spec_t *dv, uint64_t i,
                        uint64_t *ret_tokens, uint64_t *ret_tiles)
{
    char err[256];
    int rc = sl_source_read(src, i, &x->rec, err, sizeof(err));
    if (rc == 0) {
        rc = sl_pipeline_run(x->p, x->tok_unit, x->tok_unit + 1, 0, i, &x->rec, &x->sc, NULL, err,
                             sizeof(err));
    }
    sl_rec_t r;
    if (rc < 0 || sl_rec_parse(x->rec.data, x->rec.nbytes, &r, NULL, 0) < 0) {
        return rc < 0 ? rc : -EBADMSG;
    }
    uint32_t nt[SL_REC_MAX_FIELDS], nimg = 0;
    for (uint32_t k = 0; k < r.n; k++) {
        uint32_t w = 0, h = 0;
        if (r.f[k].kind == SL_RF_IMAGE_ENC && nimg < SL_REC_MAX_FIELDS) {
            (void)sl_image_probe(r.f[k].data, r.f[k].nbytes, &w, &h, NULL, NULL, 0);
            nt[nimg++] = tiles_of(tiles, w, h);
        } else if (r.f[k].kind == SL_RF_VIDEO_ENC) { /* frames count as images */
            uint32_t nf = clip_frames(dv, &r.f[k], &w, &h);
            for (uint32_t j = 0; j < nf && nimg < SL_REC_MAX_FIELDS; j++) {
                nt[nimg++] = tiles_of(tiles, w, h);
            }
        }
    }
    const sl_rfield_t *tok = sl_rec_find(&r, SL_RF_TOKENS);
    const sl_rfield_t *turns = sl_rec_find(&r, SL_RF_TURNS);
    uint64_t text = sl_tmpl_text_ids(tmpl,
                                     turns ? (const uint32_t *)(const void *)turns->data : NULL,
                                     SL_RF_TURN_WORDS, turns ? turns->h : 0, tok ? tok->h : 0);
    sl_tmpl_plan_t pl;
    sl_tmpl_plan(tmpl, nt, nimg, text, &pl);
    uint64_t kept = 0;
    for (uint32_t k = 0; k < pl.nimages; k++) {
        kept += nt[k];
    }
    *ret_tokens = pl.skip ? 0 : pl.len;
    *ret_tiles = pl.skip ? 0 : kept;
    return 0;
}

/* The estimate without tokenize and template (or when the sample cannot be
 * read): text bytes / 4, tiles from the image headers (webdataset). */
static void estimate(const sl_source_t *src, const sl_stage_spec_t *tiles,
                     const sl_stage_spec_t *tok, const sl_stage_spec_t *tmpl,
                     const sl_stage_spec_t *dv, sl_tensor_t *head, uint64_t i,
                     uint64_t *ret_tokens, uint64_t *ret_tiles)
{
    sl_src_features_t f = {0};
    uint64_t text = sl_source_size(src, i);
    if (sl_source_record_features(src, i, &f) == 0) {
        text = f.text_bytes;
    }
    uint64_t ntiles = 0, nimg = 0;
    sl_rec_t r;
    char err[256];
    if (sl_source_is_record(src) &&
        sl_source_read_head(src, i, HEAD_BYTES, head, err, sizeof(err)) == 0 &&
        sl_rec_parse(head->data, head->nbytes, &r, NULL, 0) == 0) {
        for (uint32_t k = 0; k < r.n; k++) {
            uint32_t w = 0, h = 0;
            if (r.f[k].kind == SL_RF_VIDEO_ENC) { /* frames count as images */
                uint32_t nf = clip_frames(dv, &r.f[k], &w, &h);
                ntiles += (uint64_t)nf * tiles_of(tiles, w, h);
                nimg += nf;
                continue;
            }
            if (r.f[k].kind != SL_RF_IMAGE_ENC) {
                continue;
            }
            (void)sl_image_probe(r.f[k].data, r.f[k].nbytes, &w, &h, NULL, NULL, 0);
            ntiles += tiles_of(tiles, w, h);
            nimg++;
        }
    } else {
        nimg = f.nimages; /* jsonl: not read here; a tile per image it names */
        ntiles = nimg;
    }
    /* ~4 bytes of text per BPE token (English prose with cl100k_base). */
    uint64_t tokens = (text + 3) / 4;
    if (tok != NULL && tok->max_tokens > 0 && tokens > tok->max_tokens) {
        tokens = tok->max_tokens;
    }
    if (tmpl != NULL) {
        tokens += ntiles * tmpl->tokens_per_tile + (tmpl->bos >= 0) + (tmpl->eos >= 0);
    }
    *ret_tokens = tokens;
    *ret_tiles = ntiles;
}

int sl_balance_sample_costs(const sl_spec_t *spec, const sl_source_t *src, float *ret_cost,
                            uint32_t *ret_tokens, uint32_t *ret_tiles)
{
    const sl_stage_spec_t *tiles = find_op(spec, SL_OP_IMAGE_TILES);
    const sl_stage_spec_t *tok = find_op(spec, SL_OP_TOKENIZE);
    const sl_stage_spec_t *tmpl = find_op(spec, SL_OP_TEMPLATE);
    const sl_stage_spec_t *dv = find_op(spec, SL_OP_DECODE_VIDEO);
    const sl_batching_t *b = &spec->batching;
    sl_trainer_model_t m = {b->a, b->b, b->c, b->d};
    sl_tensor_t head;
    sl_tensor_init(&head);
    exact_t x = {0};
    bool exact = tok != NULL && tmpl != NULL && exact_open(spec, src, &x) == 0;
    uint64_t n = sl_source_count(src);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t tokens = 0, ntiles = 0;
        if (!exact || exact_sample(&x, src, tiles, tmpl, dv, i, &tokens, &ntiles) < 0) {
            estimate(src, tiles, tok, tmpl, dv, &head, i, &tokens, &ntiles);
        }
        ret_tokens[i] = tokens > UINT32_MAX ? UINT32_MAX : (uint32_t)tokens;
        if (ret_tiles != NULL) {
            ret_tiles[i] = ntiles > UINT32_MAX ? UINT32_MAX : (uint32_t)ntiles;
        }
        ret_cost[i] = (float)sl_trainer_cost(&m, (double)tokens, (double)ntiles);
    }
    exact_close(&x);
    sl_tensor_free(&head);
    return 0;
}
