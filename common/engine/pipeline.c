#include "common/engine/pipeline.h"
#include "common/engine/pipeline_impl.h"
#include "common/text/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/err.h"
#include "common/image/image_decode.h"
#include "common/image/imgops.h"
#include "common/image/jpeg.h"
#include "common/base/rng.h"
#include "common/base/clock.h"

/* The engine's side of the op table (common/spec/spec_ops.c): the unit
 * each op makes alone, and the one it makes fused into the decode before
 * it (ops with SL_OPF_FUSES_DECODE). */
typedef struct {
    unit_kind_e kind;
    unit_kind_e fused;
} unit_maker_t;

static const unit_maker_t unit_makers[SL_OP__COUNT] = {
    [SL_OP_DECODE_JPEG] = {UNIT_DECODE, UNIT_NONE},
    [SL_OP_DECODE_IMAGE] = {UNIT_DECODE, UNIT_NONE},
    [SL_OP_RANDOM_RESIZED_CROP] = {UNIT_RRC, UNIT_DECODE_RRC},
    [SL_OP_RESIZE] = {UNIT_RESIZE, UNIT_NONE},
    [SL_OP_CENTER_CROP] = {UNIT_CENTER_CROP, UNIT_DECODE_CENTER_CROP},
    [SL_OP_FLIP] = {UNIT_FLIP, UNIT_NONE},
    [SL_OP_NORMALIZE] = {UNIT_NORMALIZE, UNIT_NONE},
    [SL_OP_TO_CHW] = {UNIT_TO_CHW, UNIT_NONE},
    [SL_OP_IMAGE_TILES] = {UNIT_TILES, UNIT_NONE},
    [SL_OP_TOKENIZE] = {UNIT_TOKENIZE, UNIT_NONE},
    [SL_OP_TEMPLATE] = {UNIT_TEMPLATE, UNIT_NONE},
    [SL_OP_PLUGIN] = {UNIT_PLUGIN, UNIT_NONE},
    [SL_OP_COLOR_JITTER] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_RANDOM_GRAYSCALE] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_GAUSSIAN_BLUR] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_RANDOM_ERASING] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_RANDOM_ROTATION] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_RANDOM_AFFINE] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_SOLARIZE] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_POSTERIZE] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_AUTO_CONTRAST] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_EQUALIZE] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_TRIVIAL_AUGMENT_WIDE] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_RAND_AUGMENT] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_VERTICAL_FLIP] = {UNIT_VFLIP, UNIT_NONE},
    [SL_OP_RANDOM_CROP] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_RANDOM_APPLY] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_RANDOM_CHOICE] = {UNIT_AUGMENT, UNIT_NONE},
    [SL_OP_DECODE_VIDEO] = {UNIT_VIDEO, UNIT_NONE},
};

/* One unit of the layout, made: the kind its op (or, fused, the op of
 * its second stage) makes. */
static int make_unit(const sl_spec_t *s, const sl_layout_unit_t *lu, unit_t *u, char *err,
                     size_t errlen)
{
    const sl_stage_spec_t *st = &s->stages[lu->param_stage];
    const unit_maker_t *m = &unit_makers[st->op];
    u->kind = lu->nstages > 1 ? m->fused : m->kind;
    if (u->kind == UNIT_NONE) {
        return sl_err(err, errlen, -EINVAL, "%s: no unit runs it", lu->name);
    }
    u->first_stage = lu->first_stage;
    u->nstages = lu->nstages;
    u->rng_stream = lu->rng_stream;
    u->st = st;
    u->pass_with_next = lu->pass_with_next;
    u->name = lu->name;
    return 0;
}

/* The units are the layout's (common/spec/spec_layout.h), made one by
 * one: what a planner counts from the spec alone is what runs here. */
int sl_pipeline_new(const sl_spec_t *spec, unsigned flags, sl_pipeline_t **ret, char *err,
                    size_t errlen)
{
    sl_pipeline_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = sl_spec_copy(&p->spec, spec);
    if (rc < 0) {
        free(p);
        return sl_err(err, errlen, rc, "out of memory");
    }
    rc = sl_spec_layout(&p->spec, (flags & SL_PIPE_NO_FUSE) ? SL_LAYOUT_NO_FUSE : 0, &p->layout);
    if (rc < 0) {
        sl_err(err, errlen, rc, "the spec has no unit layout");
    }
    for (uint32_t k = 0; rc == 0 && k < p->layout.nunits; k++) {
        rc = make_unit(&p->spec, &p->layout.units[k], &p->units[k], err, errlen);
    }
    if (rc < 0) {
        sl_pipeline_free(p);
        return rc;
    }
    p->nunits = p->layout.nunits;
    rc = sl_pipe_mix_init(p, err, errlen); /* per-source stages */
    if (rc < 0) {
        sl_pipeline_free(p);
        return rc;
    }
    *ret = p;
    return 0;
}

void sl_pipeline_free(sl_pipeline_t *p)
{
    if (p != NULL) {
        sl_tokenizer_free(p->tok);
        sl_spec_clear(&p->spec);
    }
    free(p);
}

uint32_t sl_pipeline_nunits(const sl_pipeline_t *p) { return p->nunits; }

const char *sl_pipeline_unit_name(const sl_pipeline_t *p, uint32_t unit)
{
    return unit < p->nunits ? p->units[unit].name : "?";
}

uint32_t sl_pipeline_unit_for_split(const sl_pipeline_t *p, uint32_t spec_split)
{
    return sl_layout_unit_for_split(&p->layout, spec_split);
}

void sl_pipe_scratch_init(sl_pipe_scratch_t *s)
{
    sl_tensor_init(&s->a);
    sl_tensor_init(&s->b);
    sl_tensor_init(&s->c);
    s->tok = NULL;
    s->tok_owner = NULL;
    s->ids = NULL;
    s->ids_cap = 0;
    memset(s->plugin, 0, sizeof(s->plugin));
    memset(s->plugin_dead, 0, sizeof(s->plugin_dead));
    s->sub_sec = NULL;
}

void sl_pipe_scratch_free(sl_pipe_scratch_t *s)
{
    sl_tensor_free(&s->a);
    sl_tensor_free(&s->b);
    sl_tensor_free(&s->c);
    sl_pipe_tok_scratch_free(s);
    sl_pipe_plugin_scratch_free(s);
}

static int need_pixels(const sl_tensor_t *t, const char *what, char *err, size_t errlen)
{
    if (t->dtype != SL_DT_U8 || t->layout != SL_LAYOUT_HWC || t->h == 0 || t->w == 0) {
        return sl_err(err, errlen, -EINVAL, "%s needs a uint8 HWC image, got %s %ux%ux%u", what,
                      sl_dtype_name(t->dtype), t->h, t->w, t->c);
    }
    return 0;
}

/* DCT scales M/8 the fused crop may decode at: bit M-1 of SCALES_ALLOWED.
 * Chosen by measurement (decode_bench --scan, docs/benchmarks.md "Fused
 * decode at M/8"): 3/8, 5/8 and 6/8 (plain-C IDCTs) beat the next
 * power-of-two scale by 1-9% of decode + resample; 7/8 loses to 8/8 by
 * ~10%, so a crop that needs 7/8 decodes at full size. */
#define SCALES_ALLOWED 0xbfu

/* A scale must leave the crop at least SCALE_MARGIN_NUM / SCALE_MARGIN_DEN
 * times the output size. At 1x the fused sample strayed up to 4.6 levels
 * (mean abs) from decode-then-crop on textured images: the DCT scaling cuts
 * every frequency above its new Nyquist, the unfused antialiased resample
 * lets part of them through (aliased), and with little downscaling left the
 * difference shows. 1.5x kept the worst at 2.0 (docs/benchmarks.md). */
#define SCALE_MARGIN_NUM 3u
#define SCALE_MARGIN_DEN 2u

/* The smallest allowed DCT scale M/8 (M in eighths) that still leaves at
 * least 1.5x out pixels of the crop in each direction, so the resample
 * always shrinks by that much; 8 (full size) when none does. */
static uint32_t pick_scale(uint32_t crop_w, uint32_t crop_h, uint32_t out_w, uint32_t out_h)
{
    for (uint32_t m = 1; m < 8; m++) {
        if ((SCALES_ALLOWED & (1u << (m - 1))) &&
            (uint64_t)crop_w * m / 8 * SCALE_MARGIN_DEN >= (uint64_t)out_w * SCALE_MARGIN_NUM &&
            (uint64_t)crop_h * m / 8 * SCALE_MARGIN_DEN >= (uint64_t)out_h * SCALE_MARGIN_NUM) {
            return m;
        }
    }
    return 8;
}

/* Copies the overlap of a centred crop_h x crop_w window; outside the image
 * the output is zero, as torchvision's CenterCrop pads. */
static int center_crop_padded(const sl_tensor_t *in, uint32_t ch, uint32_t cw, sl_tensor_t *out)
{
    if (ch <= in->h && cw <= in->w) {
        uint32_t x, y;
        sl_center_crop_params(in->h, in->w, ch, cw, &x, &y);
        return sl_img_crop(in, x, y, cw, ch, out);
    }
    int rc = sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_HWC, ch, cw, in->c);
    if (rc < 0) {
        return rc;
    }
    memset(out->data, 0, out->nbytes);
    /* Offsets of the image inside the window (pad) or of the window inside
     * the image (crop), per axis, with torchvision's rounding. */
    int64_t oy = ch > in->h ? ((int64_t)ch - in->h) / 2 : 0;
    int64_t ox = cw > in->w ? ((int64_t)cw - in->w) / 2 : 0;
    uint32_t iy = 0, ix = 0;
    if (ch <= in->h) {
        uint32_t dummy;
        sl_center_crop_params(in->h, 1, ch, 1, &dummy, &iy);
    }
    if (cw <= in->w) {
        uint32_t dummy;
        sl_center_crop_params(1, in->w, 1, cw, &ix, &dummy);
    }
    uint32_t rows = ch < in->h ? ch : in->h;
    uint32_t cols = cw < in->w ? cw : in->w;
    for (uint32_t r = 0; r < rows; r++) {
        memcpy(out->data + ((size_t)(oy + r) * cw + (size_t)ox) * in->c,
               in->data + ((size_t)(iy + r) * in->w + ix) * in->c, (size_t)cols * in->c);
    }
    return 0;
}

/* A decode unit on a format without region decode (PNG, WebP): the whole image,
 * then the fused unit's crop on it, exactly as the unfused stages would. */
static int run_decode_full(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng,
                           sl_tensor_t *io, sl_pipe_scratch_t *sc, uint32_t *ret_h,
                           uint32_t *ret_w, char *err, size_t errlen)
{
    const sl_stage_spec_t *st = u->st;
    int rc = sl_image_decode(io->data, io->nbytes, p->spec.max_pixels, &sc->a, NULL, err, errlen);
    if (rc < 0) {
        return rc;
    }
    *ret_h = sc->a.h;
    *ret_w = sc->a.w;
    if (u->kind == UNIT_DECODE) {
        sl_tensor_swap(io, &sc->a);
        return 0;
    }
    if (u->kind == UNIT_DECODE_CENTER_CROP) {
        return center_crop_padded(&sc->a, st->size_h, st->size_w, io);
    }
    uint32_t x, y, w, h;
    sl_rrc_params(sc->a.h, sc->a.w, st->scale, st->ratio, rng, &x, &y, &w, &h);
    rc = sl_img_resize_rect_ex(&sc->a, x, y, w, h, st->size_h, st->size_w, SL_RESIZE_CLIP, NULL,
                               io);
    return rc < 0 ? sl_err(err, errlen, rc, "resize of the decoded image failed") : 0;
}

/* The decode units: decode_jpeg alone, or fused with the crop that follows
 * it as one region-of-interest decode (docs/design.md invariant 2: one unit for
 * split points, the same bytes as the unfused stages). */
static int run_decode(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                      sl_pipe_scratch_t *sc, uint32_t *ret_h, uint32_t *ret_w, char *err,
                      size_t errlen)
{
    const sl_spec_t *s = &p->spec;
    const sl_stage_spec_t *st = u->st;
    int rc;
    if (io->dtype != SL_DT_BYTES) {
        return sl_err(err, errlen, -EINVAL, "decode_jpeg needs encoded bytes, got %s",
                      sl_dtype_name(io->dtype));
    }
    sl_image_format_e fmt = sl_image_sniff(io->data, io->nbytes);
    if (s->stages[u->first_stage].op == SL_OP_DECODE_IMAGE &&
        (fmt == SL_IMAGE_PNG || fmt == SL_IMAGE_WEBP)) {
        return run_decode_full(p, u, rng, io, sc, ret_h, ret_w, err, errlen);
    }
    if (u->kind == UNIT_DECODE) {
        rc = sl_jpeg_decode(io->data, io->nbytes, s->max_pixels, &sc->a, err, errlen);
        if (rc == 0) {
            sl_tensor_swap(io, &sc->a);
            *ret_h = io->h;
            *ret_w = io->w;
        }
        return rc;
    }
    /* Sub-stage times (sc->sub_sec): a few thread-CPU clock reads per sample,
     * ~1 us against the unit's milliseconds. */
    double *sub = u->kind == UNIT_DECODE_RRC ? sc->sub_sec : NULL;
    double t_start = sub != NULL ? sl_thread_cpu_sec() : 0;
    sl_jpeg_info_t info;
    rc = sl_jpeg_probe(io->data, io->nbytes, &info, err, errlen);
    if (rc < 0) {
        return rc;
    }
    *ret_h = info.height;
    *ret_w = info.width;
    if ((uint64_t)info.width * info.height > s->max_pixels) {
        return sl_err(err, errlen, -EFBIG, "%ux%u pixels exceed max_pixels %llu",
                      info.width, info.height, (unsigned long long)s->max_pixels);
    }
    if (u->kind == UNIT_DECODE_CENTER_CROP &&
        (st->size_h > info.height || st->size_w > info.width)) {
        /* Padding needed: decode whole and pad like the unfused path. */
        rc = sl_jpeg_decode(io->data, io->nbytes, s->max_pixels, &sc->a, err, errlen);
        if (rc == 0) {
            rc = center_crop_padded(&sc->a, st->size_h, st->size_w, io);
        }
        return rc;
    }
    uint32_t x, y, w, h, m = 8; /* DCT scale m/8 */
    if (u->kind == UNIT_DECODE_RRC) {
        sl_rrc_params(info.height, info.width, st->scale, st->ratio, rng, &x, &y, &w, &h);
        m = pick_scale(w, h, st->size_w, st->size_h);
    } else {
        w = st->size_w;
        h = st->size_h;
        sl_center_crop_params(info.height, info.width, h, w, &x, &y);
    }
    uint32_t x0, y0;
    sl_jpeg_times_t jt;
    rc = sl_jpeg_decode_region_timed(io->data, io->nbytes, s->max_pixels, x, y, w, h, m, &sc->a,
                                     &x0, &y0, sub != NULL ? &jt : NULL, err, errlen);
    if (rc < 0) {
        return rc;
    }
    double t_resample = sub != NULL ? sl_thread_cpu_sec() : 0;
    double ds = (double)m / 8.0; /* exact: every product below is too */
    if (u->kind == UNIT_DECODE_CENTER_CROP) {
        /* Scale 1: an exact integer crop out of the decoded rows. */
        return sl_img_crop(&sc->a, x - x0, y - y0, w, h, io);
    }
    /* CLIP: the crop is the whole image to the filter, as torchvision's
     * crop-then-resize has it (no pixels from outside the crop). */
    rc = sl_img_resize_rect_ex(&sc->a, x * ds - x0, y * ds - y0, w * ds, h * ds,
                               st->size_h, st->size_w, SL_RESIZE_CLIP, NULL, io);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "resize of the decoded region failed");
    }
    if (sub != NULL) {
        double setup = t_resample - t_start - jt.skip_sec - jt.rows_sec;
        sub[SL_SUB_SETUP] += setup > 0 ? setup : 0;
        sub[SL_SUB_SKIP] += jt.skip_sec;
        sub[SL_SUB_ROWS] += jt.rows_sec;
        sub[SL_SUB_RESAMPLE] += sl_thread_cpu_sec() - t_resample;
    }
    return 0;
}

/* normalize + to_chw as one pass: the same floats as the two units. */
static int run_normalize_chw(const unit_t *u, sl_tensor_t *io, sl_pipe_scratch_t *sc, char *err,
                             size_t errlen)
{
    if (io->dtype == SL_DT_BYTES) {
        return sl_err(err, errlen, -EINVAL, "normalize needs pixels, got encoded bytes");
    }
    int rc = sl_img_normalize_chw(io, u->st->mean, u->st->std, &sc->a);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "normalize+to_chw failed on a %ux%ux%u %s tensor", io->h,
                      io->w, io->c, sl_dtype_name(io->dtype));
    }
    sl_tensor_swap(io, &sc->a);
    return 0;
}

/* The image units, one function each, indexed by kind below. Those that
 * write sc->a return 1 so sl_pipe_image_unit swaps it in; those that work
 * in place (or swap themselves) return 0. */
typedef int (*image_run_fn)(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                            sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w,
                            char *err, size_t errlen);

/* After an image op that wrote sc->a: 1 (swap it in), or its failure
 * with the unit and the tensor it got. */
static int produced(const unit_t *u, const sl_tensor_t *io, int rc, char *err, size_t errlen)
{
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s failed on a %ux%ux%u %s tensor", u->name, io->h, io->w,
                      io->c, sl_dtype_name(io->dtype));
    }
    return 1;
}

static int run_decode_unit(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                           sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w,
                           char *err, size_t errlen)
{
    return run_decode(p, u, rng, io, sc, ret_src_h, ret_src_w, err, errlen);
}

static int run_rrc(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                   sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w, char *err,
                   size_t errlen)
{
    const sl_stage_spec_t *st = u->st;
    int rc = need_pixels(io, "random_resized_crop", err, errlen);
    if (rc < 0) {
        return rc;
    }
    uint32_t x, y, w, h;
    sl_rrc_params(io->h, io->w, st->scale, st->ratio, rng, &x, &y, &w, &h);
    rc = sl_img_resize_interp(io, x, y, w, h, st->size_h, st->size_w, SL_RESIZE_CLIP,
                              (sl_img_interp_e)st->resize_interp, NULL, &sc->a);
    return produced(u, io, rc, err, errlen);
}

static int run_resize(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                      sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w, char *err,
                      size_t errlen)
{
    const sl_stage_spec_t *st = u->st;
    int rc = need_pixels(io, "resize", err, errlen);
    if (rc < 0) {
        return rc;
    }
    uint32_t oh = st->size_h, ow = st->size_w;
    if (st->resize_shorter) {
        sl_resize_shorter_dims(io->h, io->w, st->size_h, &oh, &ow);
    }
    /* Bilinear: the whole image as Pillow's box (the bytes resize always
     * gave); the others with CLIP, the same rectangle. */
    rc = st->resize_interp == SL_RESIZE_INTERP_BILINEAR
             ? sl_img_resize_rect(io, 0, 0, io->w, io->h, oh, ow, &sc->a)
             : sl_img_resize_interp(io, 0, 0, io->w, io->h, oh, ow, SL_RESIZE_CLIP,
                                    (sl_img_interp_e)st->resize_interp, NULL, &sc->a);
    return produced(u, io, rc, err, errlen);
}

static int run_center_crop(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                           sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w,
                           char *err, size_t errlen)
{
    int rc = need_pixels(io, "center_crop", err, errlen);
    if (rc < 0) {
        return rc;
    }
    rc = center_crop_padded(io, u->st->size_h, u->st->size_w, &sc->a);
    return produced(u, io, rc, err, errlen);
}

static int run_flip(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                    sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w, char *err,
                    size_t errlen)
{
    if (io->dtype == SL_DT_BYTES) {
        return sl_err(err, errlen, -EINVAL, "flip needs pixels, got encoded bytes");
    }
    if (sl_rng_uniform(rng) < u->st->p) {
        return sl_img_flip_h(io);
    }
    return 0;
}

/* vertical_flip: the same single draw as flip. */
static int run_vflip(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                     sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w, char *err,
                     size_t errlen)
{
    if (io->dtype == SL_DT_BYTES) {
        return sl_err(err, errlen, -EINVAL, "vertical_flip needs pixels, got encoded bytes");
    }
    if (sl_rng_uniform(rng) < u->st->p) {
        return sl_img_flip_v(io);
    }
    return 0;
}

static int run_normalize(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                         sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w, char *err,
                         size_t errlen)
{
    if (io->dtype == SL_DT_BYTES) {
        return sl_err(err, errlen, -EINVAL, "normalize needs pixels, got encoded bytes");
    }
    int rc = sl_img_normalize(io, u->st->mean, u->st->std, &sc->a);
    return produced(u, io, rc, err, errlen);
}

static int run_to_chw(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                      sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w, char *err,
                      size_t errlen)
{
    if (io->dtype == SL_DT_BYTES) {
        return sl_err(err, errlen, -EINVAL, "to_chw needs pixels, got encoded bytes");
    }
    int rc = sl_img_to_chw(io, &sc->a);
    return produced(u, io, rc, err, errlen);
}

static int run_plugin(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                      sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w, char *err,
                      size_t errlen)
{
    return sl_pipe_plugin_unit(p, u, rng, io, sc, err, errlen);
}

static int run_augment(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                       sl_pipe_scratch_t *sc, uint32_t *ret_src_h, uint32_t *ret_src_w, char *err,
                       size_t errlen)
{
    return sl_pipe_augment(u, rng, io, sc, err, errlen);
}

/* NULL: not an image unit (the record-only ones, pipe_record.c). */
static const image_run_fn image_runs[UNIT__COUNT] = {
    [UNIT_DECODE] = run_decode_unit,
    [UNIT_DECODE_RRC] = run_decode_unit,
    [UNIT_DECODE_CENTER_CROP] = run_decode_unit,
    [UNIT_RRC] = run_rrc,
    [UNIT_RESIZE] = run_resize,
    [UNIT_CENTER_CROP] = run_center_crop,
    [UNIT_FLIP] = run_flip,
    [UNIT_NORMALIZE] = run_normalize,
    [UNIT_TO_CHW] = run_to_chw,
    [UNIT_PLUGIN] = run_plugin,
    [UNIT_AUGMENT] = run_augment,
    [UNIT_VFLIP] = run_vflip,
};

int sl_pipe_image_unit(const sl_pipeline_t *p, const unit_t *u, uint64_t epoch, uint64_t index,
                       uint64_t stream, sl_tensor_t *io, sl_pipe_scratch_t *sc, uint32_t *ret_src_h,
                       uint32_t *ret_src_w, char *err, size_t errlen)
{
    image_run_fn run = (size_t)u->kind < UNIT__COUNT ? image_runs[u->kind] : NULL;
    if (run == NULL) {
        return sl_err(err, errlen, -EINVAL, "unknown unit");
    }
    sl_rng_t rng;
    sl_rng_init(&rng, p->spec.seed, epoch, index, stream);
    int rc = run(p, u, &rng, io, sc, ret_src_h, ret_src_w, err, errlen);
    if (rc <= 0) {
        return rc;
    }
    sl_tensor_swap(io, &sc->a);
    return 0;
}

int sl_pipeline_run(const sl_pipeline_t *p, uint32_t from, uint32_t to, uint64_t epoch,
                    uint64_t index, sl_tensor_t *io, sl_pipe_scratch_t *scratch,
                    sl_unit_stat_t *stats, char *err, size_t errlen)
{
    if (from > to || to > p->nunits) {
        return sl_err(err, errlen, -EINVAL, "unit range [%u, %u) outside 0..%u", from, to,
                      p->nunits);
    }
    uint32_t skip = 0;
    int mrc = sl_pipe_mix_skip(p, index, io, from, to, &skip, err, errlen);
    if (mrc < 0) {
        return mrc;
    }
    for (uint32_t u = from; u < to; u++) {
        if (skip & (1u << u)) {
            continue; /* its mix source leaves this unit out */
        }
        double t0 = stats ? sl_thread_cpu_sec() : 0;
        scratch->sub_sec = stats != NULL ? stats[u].sub_sec : NULL;
        int rc;
        if (p->units[u].pass_with_next && u + 1 < to && io->dtype != SL_DT_RECORD) {
            rc = run_normalize_chw(&p->units[u], io, scratch, err, errlen);
            if (rc < 0) {
                return rc;
            }
            if (stats != NULL) {
                /* One pass, charged to to_chw: the split between the two
                 * then costs the client the whole pass, never less than the
                 * split before normalize with 4x fewer bytes (docs/planner.md). */
                stats[u].out_bytes += io->nbytes; /* HWC float32: as many bytes */
                stats[u].samples++;
            }
            u++;
        } else if (io->dtype == SL_DT_RECORD) {
            rc = sl_pipe_record_unit(p, &p->units[u], epoch, index, io, scratch, err, errlen);
            if (rc < 0) {
                return rc;
            }
        } else {
            uint32_t sh, sw;
            rc = sl_pipe_image_unit(p, &p->units[u], epoch, index, p->units[u].rng_stream, io,
                                    scratch, &sh, &sw, err, errlen);
            if (rc < 0) {
                return rc;
            }
        }
        if (stats != NULL) {
            stats[u].cpu_sec += sl_thread_cpu_sec() - t0;
            stats[u].out_bytes += io->nbytes;
            stats[u].samples++;
        }
    }
    return 0;
}
