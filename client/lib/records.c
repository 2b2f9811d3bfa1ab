/* records: sluice_batch_records -- a batch of records (common/sample/record.h)
 * as ragged arrays a model takes. Two passes over the batch: the first
 * counts, one allocation holds every array, the second fills. Tokens and
 * tiles are copied once into their batch-wide arrays; untiled images are
 * not copied at all (offsets into batch->data). Training-loop thread. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "common/sample/record.h"

typedef struct {
    size_t keys, metas, text, tokens, input_ids, labels, images, tiles_bytes;
    uint32_t nlabels; /* samples with labels: 0 or all with input_ids */
    uint64_t ntiles;
    uint32_t tile, tile_c;
    int tiles_dtype;
} counts_t;

struct rec_arena_s {
    sluice_records_t pub;
};

static int rec_error(sluice_job_t *job, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int rec_error(sluice_job_t *job, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(job->consumer.last_error, sizeof(job->consumer.last_error), fmt, ap);
    va_end(ap);
    return code;
}

static int set_bad(sluice_job_t *job, uint32_t i, const char *why)
{
    return rec_error(job, -EBADMSG, "batch sample %u: %s", i, why);
}

static int count(sluice_job_t *job, const sluice_batch_t *b, counts_t *c)
{
    sl_rec_t r;
    char err[256];
    memset(c, 0, sizeof(*c));
    c->tiles_dtype = -1;
    for (uint32_t i = 0; i < b->n; i++) {
        if (sl_rec_parse(b->data + b->offsets[i], b->sizes[i], &r, err, sizeof(err)) < 0) {
            return set_bad(job, i, err);
        }
        const sl_rfield_t *k = sl_rec_find(&r, SL_RF_KEY);
        const sl_rfield_t *m = sl_rec_find(&r, SL_RF_META);
        const sl_rfield_t *t = sl_rec_find(&r, SL_RF_TEXT);
        const sl_rfield_t *tok = sl_rec_find(&r, SL_RF_TOKENS);
        const sl_rfield_t *ids = sl_rec_find(&r, SL_RF_INPUT_IDS);
        c->keys += (k ? k->nbytes : 0) + 1;
        c->metas += (m ? m->nbytes : 2) + 1;
        c->text += t ? t->nbytes : 0;
        c->tokens += tok ? tok->h : 0;
        c->input_ids += ids ? ids->h : 0;
        const sl_rfield_t *lab = sl_rec_find(&r, SL_RF_LABELS);
        if (lab != NULL && (ids == NULL || lab->h != ids->h)) {
            return set_bad(job, i, "labels do not match input_ids");
        }
        c->nlabels += lab != NULL;
        c->labels += lab ? lab->h : 0;
        if (c->input_ids > INT32_MAX) { /* cu_seqlens_i32 */
            return set_bad(job, i, "more than 2^31 input ids in one batch");
        }
        for (uint32_t f = 0; f < r.n; f++) {
            const sl_rfield_t *x = &r.f[f];
            if (x->kind == SL_RF_IMAGE_ENC || x->kind == SL_RF_IMAGE || x->kind == SL_RF_TILES) {
                c->images++;
            }
            if (x->kind != SL_RF_TILES) {
                continue;
            }
            if (c->tiles_dtype < 0) {
                c->tile = x->h;
                c->tile_c = x->c;
                c->tiles_dtype = (int)x->dtype;
            } else if (x->h != c->tile || x->c != c->tile_c || (int)x->dtype != c->tiles_dtype) {
                return set_bad(job, i, "tiles of different shapes in one batch");
            }
            c->ntiles += x->count;
            c->tiles_bytes += x->nbytes;
        }
    }
    if (c->nlabels > 0 && c->labels != c->input_ids) {
        return rec_error(job, -EBADMSG, "batch: labels on some samples only");
    }
    return 0;
}

/* Carves an 8-byte-aligned piece of n bytes from *p. */
static void *carve(uint8_t **p, size_t n)
{
    void *r = *p;
    *p += (n + 7) & ~(size_t)7;
    return r;
}

static size_t arena_size(const counts_t *c, uint32_t n)
{
    size_t a = sizeof(struct rec_arena_s) + 64;
    size_t o = (size_t)(n + 1) * sizeof(int64_t) + 8;
    a += 2 * (size_t)n * sizeof(char *) + 16;       /* keys, metas */
    a += c->keys + c->metas + c->text + 24;         /* their bytes */
    a += 5 * o + (size_t)n * sizeof(int64_t) + 8;   /* text/token/cu/image/tile offsets, seq_lens */
    a += (c->tokens + c->input_ids) * 4 + 16;
    a += c->images * (2 * 4 + 2 * sizeof(size_t) + 3 * 4 + 2 * sizeof(int) + 4) + 64;
    a += c->tiles_bytes + 8;
    a += (c->labels + c->input_ids) * 4 + (size_t)(n + 1) * 4 + 24; /* labels, positions, cu32 */
    return a;
}

static void fill_images(const sluice_batch_t *b, uint32_t i, const sl_rec_t *r,
                        sluice_records_t *o, uint64_t *img, uint8_t *tiles, size_t *tile_bytes,
                        uint64_t *ntiles)
{
    uint32_t *hw = (uint32_t *)o->image_hw, *shape = (uint32_t *)o->image_shape;
    size_t *data = (size_t *)o->image_data, *nb = (size_t *)o->image_nbytes;
    int *dt = (int *)o->image_dtype, *lay = (int *)o->image_layout;
    uint32_t *tpi = (uint32_t *)o->tiles_per_image;
    for (uint32_t f = 0; f < r->n; f++) {
        const sl_rfield_t *x = &r->f[f];
        if (x->kind != SL_RF_IMAGE_ENC && x->kind != SL_RF_IMAGE && x->kind != SL_RF_TILES) {
            continue;
        }
        uint64_t k = (*img)++;
        hw[2 * k] = x->src_h;
        hw[2 * k + 1] = x->src_w;
        tpi[k] = x->kind == SL_RF_TILES ? x->count : 0;
        if (x->kind == SL_RF_TILES) {
            memcpy(tiles + *tile_bytes, x->data, x->nbytes);
            *tile_bytes += x->nbytes;
            *ntiles += x->count;
            data[k] = SIZE_MAX;
            nb[k] = 0;
            shape[3 * k] = shape[3 * k + 1] = shape[3 * k + 2] = 0;
            dt[k] = (int)x->dtype;
            lay[k] = (int)x->layout;
            continue;
        }
        data[k] = (size_t)(x->data - b->data);
        nb[k] = x->nbytes;
        shape[3 * k] = x->h;
        shape[3 * k + 1] = x->w;
        shape[3 * k + 2] = x->c;
        dt[k] = (int)x->dtype;
        lay[k] = (int)x->layout;
    }
    (void)i;
}

/* labels, position_ids, cu_seqlens_i32, max_seqlen: the packed form. */
static void fill_packed(const sluice_batch_t *b, const counts_t *c, sluice_records_t *o,
                        uint8_t **p)
{
    int32_t *labels = c->nlabels > 0 ? carve(p, c->labels * 4) : NULL;
    int32_t *pos = carve(p, c->input_ids * 4), *cu = carve(p, (size_t)(b->n + 1) * 4);
    int32_t max = 0;
    sl_rec_t r;
    for (uint32_t i = 0; i < b->n; i++) {
        (void)sl_rec_parse(b->data + b->offsets[i], b->sizes[i], &r, NULL, 0);
        const sl_rfield_t *lab = sl_rec_find(&r, SL_RF_LABELS);
        int64_t at = o->cu_seqlens[i], len = o->cu_seqlens[i + 1] - at;
        cu[i] = (int32_t)at;
        for (int64_t k = 0; k < len; k++) {
            pos[at + k] = (int32_t)k;
        }
        if (labels != NULL && lab != NULL) {
            memcpy(labels + at, lab->data, lab->nbytes);
        }
        max = len > max ? (int32_t)len : max;
    }
    cu[b->n] = (int32_t)o->cu_seqlens[b->n];
    o->labels = labels;
    o->position_ids = pos;
    o->cu_seqlens_i32 = cu;
    o->max_seqlen = max;
}

static void fill(const sluice_batch_t *b, const counts_t *c, struct rec_arena_s *a)
{
    sluice_records_t *o = &a->pub;
    uint8_t *p = (uint8_t *)(a + 1);
    uint32_t n = b->n;
    size_t off_bytes = (size_t)(n + 1) * sizeof(int64_t);
    const char **keys = carve(&p, n * sizeof(char *));
    const char **metas = carve(&p, n * sizeof(char *));
    char *kb = carve(&p, c->keys), *mb = carve(&p, c->metas), *tb = carve(&p, c->text + 1);
    int64_t *text_off = carve(&p, off_bytes), *tok_off = carve(&p, off_bytes);
    int64_t *cu = carve(&p, off_bytes), *img_off = carve(&p, off_bytes);
    int64_t *tile_off = carve(&p, off_bytes), *seq = carve(&p, n * sizeof(int64_t));
    int32_t *tokens = carve(&p, c->tokens * 4), *ids = carve(&p, c->input_ids * 4);
    *o = (sluice_records_t){.n = n, .keys = keys, .metas = metas, .text = tb,
                            .text_offsets = text_off, .token_offsets = tok_off,
                            .cu_seqlens = cu, .seq_lens = seq, .nimages = c->images,
                            .image_offsets = img_off, .tile_offsets = tile_off};
    o->image_hw = carve(&p, c->images * 2 * 4);
    o->image_data = carve(&p, c->images * sizeof(size_t));
    o->image_nbytes = carve(&p, c->images * sizeof(size_t));
    o->image_shape = carve(&p, c->images * 3 * 4);
    o->image_dtype = carve(&p, c->images * sizeof(int));
    o->image_layout = carve(&p, c->images * sizeof(int));
    o->tiles_per_image = carve(&p, c->images * 4);
    uint8_t *tiles = carve(&p, c->tiles_bytes);
    size_t ko = 0, mo = 0, to = 0, tok_n = 0, ids_n = 0, tile_bytes = 0;
    uint64_t img = 0, ntiles = 0;
    bool have_tok = false, have_ids = false;
    sl_rec_t r;
    for (uint32_t i = 0; i < n; i++) {
        /* Parsed without errors in count(): the bytes have not changed. */
        (void)sl_rec_parse(b->data + b->offsets[i], b->sizes[i], &r, NULL, 0);
        const sl_rfield_t *k = sl_rec_find(&r, SL_RF_KEY), *m = sl_rec_find(&r, SL_RF_META);
        const sl_rfield_t *t = sl_rec_find(&r, SL_RF_TEXT), *tok = sl_rec_find(&r, SL_RF_TOKENS);
        const sl_rfield_t *x = sl_rec_find(&r, SL_RF_INPUT_IDS);
        keys[i] = kb + ko;
        if (k != NULL) {
            memcpy(kb + ko, k->data, k->nbytes);
            ko += k->nbytes;
        }
        kb[ko++] = '\0';
        metas[i] = mb + mo;
        memcpy(mb + mo, m ? (const char *)m->data : "{}", m ? m->nbytes : 2);
        mo += m ? m->nbytes : 2;
        mb[mo++] = '\0';
        text_off[i] = (int64_t)to;
        if (t != NULL) {
            memcpy(tb + to, t->data, t->nbytes);
            to += t->nbytes;
        }
        tok_off[i] = (int64_t)tok_n;
        if (tok != NULL) {
            memcpy(tokens + tok_n, tok->data, tok->nbytes);
            tok_n += tok->h;
            have_tok = true;
        }
        cu[i] = (int64_t)ids_n;
        if (x != NULL) {
            memcpy(ids + ids_n, x->data, x->nbytes);
            ids_n += x->h;
            have_ids = true;
        }
        seq[i] = x ? x->h : tok ? tok->h : 0;
        img_off[i] = (int64_t)img;
        tile_off[i] = (int64_t)ntiles;
        fill_images(b, i, &r, o, &img, tiles, &tile_bytes, &ntiles);
    }
    text_off[n] = (int64_t)to;
    tok_off[n] = (int64_t)tok_n;
    cu[n] = (int64_t)ids_n;
    img_off[n] = (int64_t)img;
    tile_off[n] = (int64_t)ntiles;
    o->tokens = have_tok ? tokens : NULL;
    o->input_ids = have_ids ? ids : NULL;
    if (have_ids) {
        fill_packed(b, c, o, &p);
    }
    if (c->tiles_dtype >= 0) {
        o->tiles = tiles;
        o->tiles_dtype = c->tiles_dtype;
        o->ntiles = ntiles;
        o->tile = c->tile;
        o->tile_c = c->tile_c;
    }
}

int sluice_batch_records(sluice_job_t *job, sluice_batch_t *batch, const sluice_records_t **ret)
{
    if (batch->priv_records != NULL) {
        *ret = batch->priv_records;
        return 0;
    }
    for (uint32_t i = 0; i < batch->n; i++) {
        const sl_sample_meta_t *m = &((const sl_batch_t *)batch->priv)->meta[i];
        if (m->dtype != SL_DT_RECORD) {
            return rec_error(job, -EINVAL, "batch sample %u is %s, not a record", i,
                                sl_dtype_name(m->dtype));
        }
    }
    counts_t c;
    int rc = count(job, batch, &c);
    if (rc < 0) {
        return rc;
    }
    struct rec_arena_s *a = calloc(1, arena_size(&c, batch->n));
    if (a == NULL) {
        return rec_error(job, -ENOMEM, "out of memory laying out %u records", batch->n);
    }
    fill(batch, &c, a);
    batch->priv_records = a;
    *ret = &a->pub;
    return 0;
}
