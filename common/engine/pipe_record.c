/* pipe_record: a unit over a record (common/sample/record.h). The image units
 * run on every image of the sample, each with its own random stream (the
 * stage's stream and the image's number), so a record's bytes, like an
 * image's, depend only on (seed, epoch, index) and never on where the unit
 * runs. A unit reads the parsed input record and writes a new one in kind
 * order; fields it does not touch are copied through. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/base/err.h"
#include "common/engine/pipeline_impl.h"
#include "common/image/imgops.h"
#include "common/image/tiles.h"

int sl_pipe_copy_kinds(const sl_rec_t *in, sl_tensor_t *out, sl_rf_kind_e lo, sl_rf_kind_e hi)
{
    for (uint32_t i = 0; i < in->n; i++) {
        if (in->f[i].kind >= lo && in->f[i].kind <= hi) {
            int rc = sl_rec_add_copy(out, &in->f[i]);
            if (rc < 0) {
                return rc;
            }
        }
    }
    return 0;
}

static int load_field(const sl_rfield_t *f, sl_tensor_t *t)
{
    int rc = f->kind == SL_RF_IMAGE_ENC
                 ? sl_tensor_reshape(t, SL_DT_BYTES, SL_LAYOUT_HWC, (uint32_t)f->nbytes, 1, 1)
                 : sl_tensor_reshape(t, f->dtype, f->layout, f->h, f->w, f->c);
    if (rc == 0) {
        memcpy(t->data, f->data, f->nbytes);
    }
    return rc;
}

static int add_tensor(sl_tensor_t *out, sl_rf_kind_e kind, const sl_tensor_t *t, uint32_t count,
                      uint32_t h, uint32_t src_h, uint32_t src_w)
{
    sl_rfield_t f = {.kind = kind, .dtype = t->dtype, .layout = t->layout, .count = count,
                     .h = h, .w = t->w, .c = t->c, .src_h = src_h, .src_w = src_w,
                     .nbytes = t->nbytes, .data = t->data};
    return sl_rec_add_copy(out, &f);
}

static bool is_decode(const unit_t *u)
{
    return u->kind == UNIT_DECODE || u->kind == UNIT_DECODE_RRC ||
           u->kind == UNIT_DECODE_CENTER_CROP;
}

/* normalize / to_chw on tiles: one tile at a time (a [n, c, t, t] block is
 * not one CHW image). */
static int tiles_unit(const unit_t *u, const sl_rfield_t *f, sl_tensor_t *out,
                      sl_pipe_scratch_t *sc, char *err, size_t errlen)
{
    if (u->kind == UNIT_TO_CHW) {
        return sl_rec_add_copy(out, f); /* tiles are CHW already */
    }
    if (u->kind != UNIT_NORMALIZE) {
        return sl_err(err, errlen, -EINVAL, "%s cannot run on image tiles", u->name);
    }
    size_t tile_bytes = f->nbytes / f->count;
    sl_rfield_t of = *f;
    of.dtype = SL_DT_F32;
    of.nbytes = (size_t)f->count * f->h * f->w * f->c * 4;
    uint8_t *dst;
    int rc = sl_rec_add(out, &of, &dst);
    for (uint32_t k = 0; rc == 0 && k < f->count; k++) {
        sl_tensor_t view = {.dtype = f->dtype, .layout = SL_LAYOUT_CHW, .h = f->h, .w = f->w,
                            .c = f->c, .nbytes = tile_bytes, .cap = tile_bytes,
                            .data = (uint8_t *)f->data + k * tile_bytes};
        rc = sl_img_normalize(&view, u->st->mean, u->st->std, &sc->a);
        if (rc == 0) {
            memcpy(dst + (size_t)k * sc->a.nbytes, sc->a.data, sc->a.nbytes);
        }
    }
    return rc < 0 ? sl_err(err, errlen, rc, "normalize of %u tiles failed", f->count) : 0;
}

/* The image units: every image (encoded for the decode units, pixels for the
 * rest) through sl_pipe_image_unit; tiles through tiles_unit. */
static int image_unit(const sl_pipeline_t *p, const unit_t *u, uint64_t epoch, uint64_t index,
                      const sl_rec_t *in, sl_tensor_t *out, sl_pipe_scratch_t *sc, char *err,
                      size_t errlen)
{
    int rc = sl_pipe_copy_kinds(in, out, SL_RF_KEY, SL_RF_INPUT_IDS);
    uint32_t img = 0;
    for (uint32_t i = 0; rc == 0 && i < in->n; i++) {
        const sl_rfield_t *f = &in->f[i];
        if (f->kind == SL_RF_TILES) {
            rc = tiles_unit(u, f, out, sc, err, errlen);
            continue;
        }
        if (f->kind != SL_RF_IMAGE_ENC && f->kind != SL_RF_IMAGE) {
            continue;
        }
        if (is_decode(u) != (f->kind == SL_RF_IMAGE_ENC)) {
            return sl_err(err, errlen, -EINVAL, "%s got %s", u->name, sl_rf_kind_name(f->kind));
        }
        rc = load_field(f, &sc->c);
        if (rc < 0) {
            return sl_err(err, errlen, rc, "image %u: cannot hold %zu bytes", img, f->nbytes);
        }
        uint32_t sh = f->src_h, sw = f->src_w;
        /* Stream per image: the stage's in the low half, the image's number
         * (from 1) in the high half, so no two images draw alike. */
        uint64_t stream = (uint64_t)u->rng_stream | (uint64_t)(img + 1) << 32;
        rc = sl_pipe_image_unit(p, u, epoch, index, stream, &sc->c, sc, &sh, &sw, err, errlen);
        if (rc < 0) { /* the message names the image: a sample may hold several */
            return sl_err_prefix(err, errlen, rc, "image %u", img);
        }
        rc = add_tensor(out, SL_RF_IMAGE, &sc->c, 1, sc->c.h, sh, sw);
        img++;
    }
    return rc == 0 ? sl_pipe_copy_kinds(in, out, SL_RF_TURNS, SL_RF__MAX) : rc;
}

static int tiles_make(const unit_t *u, const sl_rec_t *in, sl_tensor_t *out,
                      sl_pipe_scratch_t *sc, char *err, size_t errlen)
{
    int rc = sl_pipe_copy_kinds(in, out, SL_RF_KEY, SL_RF_INPUT_IDS);
    uint32_t img = 0;
    for (uint32_t i = 0; rc == 0 && i < in->n; i++) {
        const sl_rfield_t *f = &in->f[i];
        if (f->kind == SL_RF_IMAGE_ENC || f->kind == SL_RF_TILES) {
            return sl_err(err, errlen, -EINVAL, "image_tiles got %s", sl_rf_kind_name(f->kind));
        }
        if (f->kind != SL_RF_IMAGE) {
            continue;
        }
        if (f->dtype != SL_DT_U8 || f->layout != SL_LAYOUT_HWC) {
            return sl_err(err, errlen, -EINVAL, "image_tiles needs uint8 HWC images");
        }
        rc = load_field(f, &sc->c);
        uint32_t n = 0;
        uint32_t cols, rows;
        if (rc == 0) {
            rc = sl_tiles_make(&sc->c, u->st->tile, u->st->min_tiles, u->st->max_tiles,
                               u->st->thumbnail, &sc->a, &n, &cols, &rows, err, errlen);
        }
        if (rc < 0) {
            return sl_err_prefix(err, errlen, rc, "image %u", img);
        }
        sl_rfield_t tf = {.kind = SL_RF_TILES, .dtype = SL_DT_U8, .layout = SL_LAYOUT_CHW,
                          .count = n, .h = u->st->tile, .w = u->st->tile, .c = 3,
                          .src_h = f->src_h, .src_w = f->src_w, .nbytes = sc->a.nbytes,
                          .data = sc->a.data};
        rc = sl_rec_add_copy(out, &tf);
        img++;
    }
    return rc == 0 ? sl_pipe_copy_kinds(in, out, SL_RF_TURNS, SL_RF__MAX) : rc;
}

/* The record-only units, indexed by kind; NULL: an image unit, run on
 * each image of the record (image_unit). */
typedef int (*record_run_fn)(const sl_pipeline_t *p, const unit_t *u, const sl_rec_t *in,
                             sl_tensor_t *out, sl_pipe_scratch_t *sc, char *err, size_t errlen);

static int run_tiles(const sl_pipeline_t *p, const unit_t *u, const sl_rec_t *in, sl_tensor_t *out,
                     sl_pipe_scratch_t *sc, char *err, size_t errlen)
{
    return tiles_make(u, in, out, sc, err, errlen);
}

static int run_template(const sl_pipeline_t *p, const unit_t *u, const sl_rec_t *in,
                        sl_tensor_t *out, sl_pipe_scratch_t *sc, char *err, size_t errlen)
{
    return sl_pipe_template(u, in, out, err, errlen);
}

static const record_run_fn record_runs[UNIT__COUNT] = {
    [UNIT_TILES] = run_tiles,
    [UNIT_TOKENIZE] = sl_pipe_tokenize,
    [UNIT_TEMPLATE] = run_template,
};

int sl_pipe_record_unit(const sl_pipeline_t *p, const unit_t *u, uint64_t epoch, uint64_t index,
                        sl_tensor_t *io, sl_pipe_scratch_t *sc, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    sl_rec_t in;
    int rc = sl_rec_parse(io->data, io->nbytes, &in, err, errlen);
    if (rc < 0) {
        return rc == -EBADMSG ? -EINVAL : rc; /* a peer's bad tensor, as for images */
    }
    rc = sl_rec_begin(&sc->b);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "out of memory");
    }
    record_run_fn run = (size_t)u->kind < UNIT__COUNT ? record_runs[u->kind] : NULL;
    if (u->kind == UNIT_VIDEO) { /* draws per clip: needs the sample's epoch and index */
        rc = sl_pipe_video(p, u, epoch, index, &in, &sc->b, sc, err, errlen);
    } else {
        rc = run != NULL ? run(p, u, &in, &sc->b, sc, err, errlen)
                         : image_unit(p, u, epoch, index, &in, &sc->b, sc, err, errlen);
    }
    if (rc < 0) {
        return err != NULL && err[0] != '\0' ? rc : sl_err(err, errlen, rc, "%s failed", u->name);
    }
    sl_rec_finish(&sc->b);
    sl_tensor_swap(io, &sc->b);
    return 0;
}
