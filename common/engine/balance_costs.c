/* balance_costs: the per-sample predictions a balanced epoch order is made
 * from (common/engine/balance_costs.h), read from the data. */
#include "common/engine/balance_costs.h"

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

int sl_balance_sample_costs(const sl_spec_t *spec, const sl_source_t *src, float *ret_cost,
                            uint32_t *ret_tokens)
{
    const sl_stage_spec_t *tiles = find_op(spec, SL_OP_IMAGE_TILES);
    const sl_stage_spec_t *tok = find_op(spec, SL_OP_TOKENIZE);
    const sl_stage_spec_t *tmpl = find_op(spec, SL_OP_TEMPLATE);
    const sl_stage_spec_t *dv = find_op(spec, SL_OP_DECODE_VIDEO);
    const sl_batching_t *b = &spec->batching;
    sl_trainer_model_t m = {b->a, b->b, b->c, b->d};
    sl_tensor_t head;
    sl_tensor_init(&head);
    uint64_t n = sl_source_count(src);
    for (uint64_t i = 0; i < n; i++) {
        sl_src_features_t f = {0};
        uint64_t text = sl_source_size(src, i);
        if (sl_source_record_features(src, i, &f) == 0) {
            text = f.text_bytes;
        }
        uint64_t ntiles = 0, nimg = 0;
        sl_rec_t r;
        char err[256];
        if (sl_source_is_record(src) &&
            sl_source_read_head(src, i, HEAD_BYTES, &head, err, sizeof(err)) == 0 &&
            sl_rec_parse(head.data, head.nbytes, &r, NULL, 0) == 0) {
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
        ret_tokens[i] = tokens > UINT32_MAX ? UINT32_MAX : (uint32_t)tokens;
        ret_cost[i] = (float)sl_trainer_cost(&m, (double)tokens, (double)ntiles);
    }
    sl_tensor_free(&head);
    return 0;
}
