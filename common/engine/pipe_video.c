/* pipe_video: the decode_video unit on a record (common/video/video.h).
 * Each clip (VIDEO_ENC field) becomes its sampled frames as IMAGE fields,
 * uint8 RGB HWC like decode_image's, after the record's still images
 * (decoded as decode_image decodes them), so every image stage after it
 * runs per frame. random_offset draws one number per clip from the
 * sample's stream (the stage's, the clip's number in the high half), so
 * the frames depend only on (seed, epoch, index) wherever the unit runs.
 *
 * A resize (bilinear, the default) right after decode_video is done by
 * swscale while converting: the frames come out at the resize's size and
 * the resize unit, given its own output size, copies them. */
#include <errno.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/rng.h"
#include "common/engine/pipeline_impl.h"
#include "common/image/image_decode.h"
#include "common/image/imgops.h"
#include "common/video/video.h"

/* The resize the next stage would do, when swscale may do it instead
 * (ctx: the unit). */
typedef struct {
    const sl_pipeline_t *p;
    const unit_t *u;
} resize_ctx_t;

static void next_resize(void *ctx, uint32_t src_h, uint32_t src_w, uint32_t *ret_h, uint32_t *ret_w)
{
    const sl_pipeline_t *p = ((resize_ctx_t *)ctx)->p;
    const unit_t *u = ((resize_ctx_t *)ctx)->u;
    *ret_h = *ret_w = 0;
    uint32_t next = u->first_stage + u->nstages;
    if (next >= p->spec.nstages) {
        return;
    }
    const sl_stage_spec_t *st = &p->spec.stages[next];
    if (st->op != SL_OP_RESIZE || st->resize_interp != SL_RESIZE_INTERP_BILINEAR) {
        return;
    }
    if (st->resize_shorter) {
        sl_resize_shorter_dims(src_h, src_w, st->size_h, ret_h, ret_w);
    } else {
        *ret_h = st->size_h;
        *ret_w = st->size_w;
    }
}

static void req_of(const sl_stage_spec_t *st, sl_video_req_t *req)
{
    *req = (sl_video_req_t){
        .sampling = st->v_sampling == 1 ? SL_VIDEO_SAMPLE_FPS : SL_VIDEO_SAMPLE_UNIFORM,
        .frames = st->v_frames,
        .fps = st->v_fps,
        .max_frames = st->v_max_frames,
        .offset = -1,
    };
}

static int add_frames(sl_tensor_t *out, const sl_tensor_t *fr, uint32_t n, uint32_t fh,
                      uint32_t src_h, uint32_t src_w)
{
    size_t fb = (size_t)fh * fr->w * 3;
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        sl_rfield_t f = {.kind = SL_RF_IMAGE,
                         .dtype = SL_DT_U8,
                         .layout = SL_LAYOUT_HWC,
                         .count = 1,
                         .h = fh,
                         .w = fr->w,
                         .c = 3,
                         .src_h = src_h,
                         .src_w = src_w,
                         .nbytes = fb,
                         .data = fr->data + k * fb};
        rc = sl_rec_add_copy(out, &f);
    }
    return rc;
}

/* Clip v of the record into its frames. */
static int one_clip(const sl_pipeline_t *p, const unit_t *u, uint64_t epoch, uint64_t index,
                    uint32_t v, const sl_rfield_t *f, uint32_t *nimg, sl_tensor_t *out,
                    sl_pipe_scratch_t *sc, char *err, size_t errlen)
{
    const sl_stage_spec_t *st = u->st;
    sl_video_req_t req;
    req_of(st, &req);
    if (st->v_random_offset) {
        sl_rng_t rng;
        sl_rng_init(&rng, p->spec.seed, epoch, index,
                    (uint64_t)u->rng_stream | (uint64_t)(v + 1) << 32);
        req.offset = sl_rng_uniform(&rng);
    }
    resize_ctx_t rctx = {.p = p, .u = u};
    req.size_of = next_resize;
    req.size_ctx = &rctx;
    sl_video_limits_t lim = {.max_pixels = p->spec.max_pixels,
                             .max_sec = st->v_timeout_sec,
                             .threads = st->v_threads};
    uint32_t n = 0, fh = 0, fw = 0, sh = 0, sw = 0;
    int rc = sl_video_decode(f->data, f->nbytes, &req, &lim, &sc->c, &n, &fh, &fw, &sh, &sw, NULL,
                             err, errlen);
    if (rc == 0 && *nimg + n > SL_REC_MAX_FRAMES) {
        rc = sl_err(err, errlen, -ETOOMANYREFS,
                    "%u frames after %u images make more than %u images in a record", n, *nimg,
                    SL_REC_MAX_FRAMES);
    }
    if (rc == 0) {
        rc = add_frames(out, &sc->c, n, fh, sh, sw);
        *nimg += n;
    }
    return rc < 0 ? sl_err_prefix(err, errlen, rc, "video %u", v) : 0;
}

int sl_pipe_video(const sl_pipeline_t *p, const unit_t *u, uint64_t epoch, uint64_t index,
                  const sl_rec_t *in, sl_tensor_t *out, sl_pipe_scratch_t *sc, char *err,
                  size_t errlen)
{
    int rc = sl_pipe_copy_kinds(in, out, SL_RF_KEY, SL_RF_INPUT_IDS);
    uint32_t img = 0, vid = 0;
    for (uint32_t i = 0; rc == 0 && i < in->n; i++) {
        const sl_rfield_t *f = &in->f[i];
        if (f->kind == SL_RF_IMAGE || f->kind == SL_RF_TILES) {
            return sl_err(err, errlen, -EINVAL, "decode_video got %s", sl_rf_kind_name(f->kind));
        }
        if (f->kind == SL_RF_IMAGE_ENC) {
            /* A still image: decode_image's decode. */
            rc = sl_image_decode(f->data, f->nbytes, p->spec.max_pixels, &sc->c, NULL, err, errlen);
            if (rc < 0) {
                return sl_err_prefix(err, errlen, rc, "image %u", img);
            }
            sl_rfield_t of = {.kind = SL_RF_IMAGE,
                              .dtype = SL_DT_U8,
                              .layout = SL_LAYOUT_HWC,
                              .count = 1,
                              .h = sc->c.h,
                              .w = sc->c.w,
                              .c = sc->c.c,
                              .src_h = sc->c.h,
                              .src_w = sc->c.w,
                              .nbytes = sc->c.nbytes,
                              .data = sc->c.data};
            rc = sl_rec_add_copy(out, &of);
            img++;
        } else if (f->kind == SL_RF_VIDEO_ENC) {
            rc = one_clip(p, u, epoch, index, vid++, f, &img, out, sc, err, errlen);
        }
    }
    /* A conversation's turns (and labels) follow the images. */
    return rc == 0 ? sl_pipe_copy_kinds(in, out, SL_RF_TURNS, SL_RF__MAX) : rc;
}
