/* balance_order: the balanced epoch order and the per-sample predictions it
 * is made from (common/engine/balance.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/source.h"
#include "common/engine/balance.h"
#include "common/image/image_decode.h"
#include "common/image/record.h"
#include "common/image/tiles.h"
#include "common/spec/spec.h"

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

int sl_balance_sample_costs(const sl_spec_t *spec, const sl_source_t *src, float *ret_cost,
                            uint32_t *ret_tokens)
{
    const sl_stage_spec_t *tiles = find_op(spec, SL_OP_IMAGE_TILES);
    const sl_stage_spec_t *tok = find_op(spec, SL_OP_TOKENIZE);
    const sl_stage_spec_t *tmpl = find_op(spec, SL_OP_TEMPLATE);
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

/* One step (g items of the window, in order[]) into ranks and microbatches,
 * written at its global positions. */
static int place_step(const sl_spec_t *spec, uint64_t step, const uint64_t *items,
                      const float *cost, const uint32_t *tokens, uint64_t *order, double *c,
                      uint32_t *t, uint32_t *rank, uint32_t *mb, double *load, double *rc,
                      uint32_t *rt, uint64_t *ri)
{
    uint32_t world = spec->world_size > 0 ? spec->world_size : 1;
    uint32_t micro = spec->batching.microbatches, bs = spec->batch_size;
    uint32_t per_rank = micro * bs, g = world * per_rank;
    for (uint32_t k = 0; k < g; k++) {
        c[k] = cost[items[k]];
        t[k] = tokens[items[k]];
    }
    int rc_ = sl_balance_pack_cap(c, t, g, world, per_rank, 0, rank, load);
    for (uint32_t r = 0; rc_ == 0 && r < world; r++) {
        uint32_t m = 0;
        for (uint32_t k = 0; k < g; k++) {
            if (rank[k] == r) {
                rc[m] = c[k];
                rt[m] = t[k];
                ri[m++] = items[k];
            }
        }
        rc_ = sl_balance_pack_cap(rc, rt, m, micro, bs, spec->batching.token_budget, mb, load);
        uint32_t fill[4096] = {0};
        for (uint32_t k = 0; rc_ == 0 && k < m; k++) {
            uint64_t q = step * per_rank + (uint64_t)mb[k] * bs + fill[mb[k]]++;
            order[q * world + r] = ri[k];
        }
    }
    return rc_;
}

int sl_balance_order(const sl_spec_t *spec, uint64_t n, const float *cost,
                     const uint32_t *tokens, uint64_t *order)
{
    uint32_t world = spec->world_size > 0 ? spec->world_size : 1;
    uint64_t g = (uint64_t)world * spec->batching.microbatches * spec->batch_size;
    if (spec->batching.microbatches > 4096 || g == 0 || g > UINT32_MAX / 8) {
        return -EINVAL;
    }
    uint64_t steps = n / g, L = spec->batching.lookahead;
    uint64_t *win = malloc(g * L * sizeof(*win));
    double *wc = malloc(g * L * sizeof(*wc)), *c = malloc(g * sizeof(*c));
    double *rc = malloc(g * sizeof(*rc)), *load = malloc(4096 * sizeof(*load));
    uint32_t *deal = malloc(g * L * sizeof(*deal)), *t = malloc(g * 4), *rt = malloc(g * 4);
    uint32_t *rank = malloc(g * 4), *mb = malloc(g * 4);
    uint64_t *step_items = malloc(g * sizeof(*step_items)), *ri = malloc(g * sizeof(*ri));
    int rc_ = 0;
    if (!win || !wc || !c || !rc || !load || !deal || !t || !rt || !rank || !mb ||
        !step_items || !ri) {
        rc_ = -ENOMEM;
    }
    for (uint64_t s0 = 0; rc_ == 0 && s0 < steps; s0 += L) {
        uint64_t ns = steps - s0 < L ? steps - s0 : L;
        memcpy(win, order + s0 * g, ns * g * sizeof(*win));
        for (uint64_t k = 0; k < ns * g; k++) {
            wc[k] = cost[win[k]];
        }
        rc_ = sl_balance_deal(wc, (uint32_t)ns, (uint32_t)g, deal);
        for (uint64_t s = 0; rc_ == 0 && s < ns; s++) {
            for (uint64_t k = 0; k < g; k++) {
                step_items[k] = win[deal[s * g + k]];
            }
            rc_ = place_step(spec, s0 + s, step_items, cost, tokens, order, c, t, rank, mb,
                             load, rc, rt, ri);
        }
    }
    free(win);
    free(wc);
    free(c);
    free(rc);
    free(load);
    free(deal);
    free(t);
    free(rt);
    free(rank);
    free(mb);
    free(step_items);
    free(ri);
    return rc_;
}

void sl_balance_stats(const sl_spec_t *spec, uint64_t n, const float *cost, const uint64_t *order,
                      sl_balance_stats_t *ret)
{
    uint32_t world = spec->world_size > 0 ? spec->world_size : 1;
    uint64_t g = (uint64_t)world * spec->batching.microbatches * spec->batch_size;
    memset(ret, 0, sizeof(*ret));
    double *load = calloc(world, sizeof(*load));
    if (load == NULL || g == 0) {
        free(load);
        return;
    }
    for (uint64_t s0 = 0; s0 + g <= n; s0 += g) {
        memset(load, 0, world * sizeof(*load));
        double sum = 0, max = 0;
        for (uint64_t p = s0; p < s0 + g; p++) {
            load[p % world] += cost[order[p]];
            sum += cost[order[p]];
        }
        for (uint32_t r = 0; r < world; r++) {
            max = load[r] > max ? load[r] : max;
        }
        double imb = sum > 0 ? max / (sum / world) : 1.0;
        ret->imbalance += imb;
        ret->imbalance_max = imb > ret->imbalance_max ? imb : ret->imbalance_max;
        ret->step_load += load[spec->rank < world ? spec->rank : 0];
        ret->steps++;
    }
    if (ret->steps > 0) {
        ret->imbalance /= (double)ret->steps;
        ret->step_load /= (double)ret->steps;
    }
    free(load);
}
