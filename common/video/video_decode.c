/* video_decode: the frames a request wants (sl_video_pick), decoded from
 * the keyframe before each unless the decoder is already on its way, and
 * converted to RGB with the pinned swscale set-up (video.h). Any thread. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/err.h"
#include "common/video/video_impl.h"

/* Row alignment of the converted frame: PyAV's (av_image_alloc(..., 16)),
 * so swscale takes the same code path as the oracle. */
#define RGB_ALIGN 16

static int pick_uniform(uint32_t n, const sl_video_req_t *req, uint32_t *idx)
{
    uint32_t k = req->frames;
    for (uint32_t i = 0; i < k; i++) {
        double v;
        if (req->offset >= 0) {
            v = floor(((double)i + req->offset) * (double)n / (double)k);
        } else if (k == 1) {
            v = 0;
        } else if (i == k - 1) {
            v = (double)(n - 1); /* numpy's linspace ends exactly at stop */
        } else {
            /* numpy: arange(k) * ((n - 1) / (k - 1)), rounded half to even */
            v = nearbyint((double)i * ((double)(n - 1) / (double)(k - 1)));
        }
        idx[i] = v >= (double)n ? n - 1 : (uint32_t)v;
    }
    return (int)k;
}

/* The frame shown at each time start + (k + offset) / fps: the last one
 * whose time is not after it. */
static int pick_fps(uint32_t n, const double *t, const sl_video_req_t *req, uint32_t *idx,
                    uint32_t cap)
{
    double off = req->offset >= 0 ? req->offset : 0;
    uint32_t got = 0, f = 0;
    for (uint32_t k = 0; got < req->max_frames && got < cap; k++) {
        double at = ((double)k + off) / req->fps;
        if (at > t[n - 1] + 1e-9) {
            break;
        }
        while (f + 1 < n && t[f + 1] <= at + 1e-9) {
            f++;
        }
        idx[got++] = f;
    }
    return (int)got;
}

int sl_video_pick(uint32_t n, const double *t, const sl_video_req_t *req, uint32_t *ret_idx,
                  uint32_t cap, uint32_t *ret_n)
{
    if (n == 0 || req->offset >= 1) {
        return -EINVAL;
    }
    int got;
    if (req->sampling == SL_VIDEO_SAMPLE_UNIFORM) {
        if (req->frames == 0 || req->frames > cap) {
            return -EINVAL;
        }
        got = pick_uniform(n, req, ret_idx);
    } else if (req->sampling == SL_VIDEO_SAMPLE_FPS) {
        if (!(req->fps > 0) || req->max_frames == 0) {
            return -EINVAL;
        }
        got = pick_fps(n, t, req, ret_idx, cap);
    } else {
        return -EINVAL;
    }
    *ret_n = (uint32_t)got;
    return 0;
}

/* One decode: the clip, its index, the decoder, the converter and which
 * wanted frame (distinct ranks, ascending) is done. */
typedef struct {
    vclip_t clip;
    vindex_t ix;
    AVCodecContext *dec;
    AVFrame *frame;
    struct SwsContext *sws;
    uint8_t *rgb[4]; /* one converted frame, RGB_ALIGN'ed rows */
    int rgb_ls[4];
    uint32_t fh, fw;
    uint32_t want[SL_VIDEO_MAX_WANTED]; /* distinct ranks, ascending */
    uint8_t got[SL_VIDEO_MAX_WANTED];
    uint32_t nwant;
    int64_t start_pts; /* frames before it are not trusted (decoded from a later keyframe) */
    uint8_t *out;      /* frame slot k of the distinct ones at out + k * frame bytes */
    double deadline;
    sl_video_stats_t stats;
} vdec_t;

static int open_decoder(vdec_t *d, uint32_t threads, char *err, size_t errlen)
{
    d->dec = avcodec_alloc_context3(d->clip.codec);
    d->frame = av_frame_alloc();
    if (d->dec == NULL || d->frame == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = avcodec_parameters_to_context(d->dec, d->clip.st->codecpar);
    if (rc >= 0) {
        d->dec->pkt_timebase = d->clip.st->time_base;
        d->dec->thread_count = (int)threads;
        /* Slices only: frame threading reports a damaged stream's errors on
         * frames that vary from run to run (found by fuzz_video), and one
         * host would skip a clip another delivers. */
        d->dec->thread_type = FF_THREAD_SLICE;
        rc = avcodec_open2(d->dec, d->clip.codec, NULL);
    }
    if (rc < 0) {
        char why[AV_ERROR_MAX_STRING_SIZE];
        av_strerror(rc, why, sizeof(why));
        return sl_err(err, errlen, rc == AVERROR(ENOMEM) ? -ENOMEM : -EBADMSG,
                      "cannot open the %s decoder: %s", d->clip.codec->name, why);
    }
    if (av_image_alloc(d->rgb, d->rgb_ls, (int)d->fw, (int)d->fh, AV_PIX_FMT_RGB24, RGB_ALIGN) <
        0) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    return 0;
}

static int sws_matrix(enum AVColorSpace cs)
{
    switch (cs) {
    case AVCOL_SPC_BT709:
        return SWS_CS_ITU709;
    case AVCOL_SPC_FCC:
        return SWS_CS_FCC;
    case AVCOL_SPC_SMPTE240M:
        return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
        return SWS_CS_BT2020;
    default:
        return SWS_CS_DEFAULT; /* BT.601, and what an unspecified stream gets */
    }
}

/* The stream's matrix and range on the converter, changed only where they
 * differ from swscale's own defaults (as PyAV sets them). */
static int pin_colours(vdec_t *d, const AVFrame *f)
{
    int *inv, *tbl, src_range, dst_range, bri, con, sat;
    if (sws_getColorspaceDetails(d->sws, &inv, &src_range, &tbl, &dst_range, &bri, &con, &sat) <
        0) {
        return 0; /* not a YUV source: nothing to pin */
    }
    const int *want = sws_getCoefficients(sws_matrix(f->colorspace));
    int range = f->color_range == AVCOL_RANGE_JPEG ? 1 : src_range;
    if (memcmp(want, inv, 4 * sizeof(int)) == 0 && range == src_range) {
        return 0;
    }
    return sws_setColorspaceDetails(d->sws, want, range, tbl, dst_range, bri, con, sat) < 0
               ? -EINVAL
               : 0;
}

static int convert(vdec_t *d, const AVFrame *f, uint8_t *slot, char *err, size_t errlen)
{
    d->sws = sws_getCachedContext(d->sws, f->width, f->height, (enum AVPixelFormat)f->format,
                                  (int)d->fw, (int)d->fh, AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL,
                                  NULL, NULL);
    if (d->sws == NULL || pin_colours(d, f) < 0) {
        return sl_err(err, errlen, -EBADMSG, "cannot convert a %dx%d %s frame to RGB", f->width,
                      f->height, av_get_pix_fmt_name((enum AVPixelFormat)f->format));
    }
    sws_scale(d->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, d->rgb,
              d->rgb_ls);
    size_t row = (size_t)d->fw * 3;
    for (uint32_t y = 0; y < d->fh; y++) {
        memcpy(slot + y * row, d->rgb[0] + (size_t)y * (size_t)d->rgb_ls[0], row);
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* A frame out of the decoder: kept when it is a wanted one. */
static int take_frame(vdec_t *d, const AVFrame *f, char *err, size_t errlen)
{
    d->stats.decoded++;
    if (f->width <= 0 || f->height <= 0 || (uint32_t)f->width > SL_VIDEO_MAX_SIDE ||
        (uint32_t)f->height > SL_VIDEO_MAX_SIDE) {
        return sl_err(err, errlen, -EFBIG, "a %dx%d frame", f->width, f->height);
    }
    int64_t pts = f->pts != AV_NOPTS_VALUE ? f->pts : f->best_effort_timestamp;
    if (pts == AV_NOPTS_VALUE || pts < d->start_pts) {
        return 0;
    }
    /* Its rank: a binary search over the sorted timestamps. */
    uint32_t lo = 0, hi = d->ix.nframes;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (d->ix.spts[mid] < pts) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == d->ix.nframes || d->ix.spts[lo] != pts) {
        return 0;
    }
    const uint32_t *w = bsearch(&lo, d->want, d->nwant, sizeof(uint32_t), cmp_u32);
    if (w == NULL || d->got[w - d->want]) {
        return 0;
    }
    size_t k = (size_t)(w - d->want);
    if ((f->flags & AV_FRAME_FLAG_CORRUPT) || f->decode_error_flags != 0) {
        return sl_err(err, errlen, -EBADMSG, "frame %u is corrupt", lo);
    }
    int rc = convert(d, f, d->out + k * (size_t)d->fh * d->fw * 3, err, errlen);
    d->got[k] = rc == 0;
    return rc;
}

static int receive_all(vdec_t *d, char *err, size_t errlen)
{
    for (;;) {
        int rc = avcodec_receive_frame(d->dec, d->frame);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) {
            return 0;
        }
        if (rc < 0) {
            return 0; /* a decode error: the frames it cost are missed below */
        }
        rc = take_frame(d, d->frame, err, errlen);
        av_frame_unref(d->frame);
        if (rc < 0) {
            return rc;
        }
    }
}

/* Is a frame with timestamp pts one still wanted? */
static bool still_wanted(const vdec_t *d, int64_t pts)
{
    uint32_t lo = 0, hi = d->ix.nframes;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (d->ix.spts[mid] < pts) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == d->ix.nframes || d->ix.spts[lo] != pts) {
        return false;
    }
    const uint32_t *w = bsearch(&lo, d->want, d->nwant, sizeof(uint32_t), cmp_u32);
    return w != NULL && !d->got[w - d->want];
}

/* The last keyframe at or before rank r's packet whose frame is not after
 * it (0: the start). */
static uint32_t key_before(const vindex_t *ix, uint32_t r)
{
    for (uint32_t k = ix->order[r] + 1; k-- > 0;) {
        if (ix->key[k] && ix->pts[k] <= ix->spts[r]) {
            return k;
        }
    }
    return 0;
}

/* Decodes until every wanted frame is in: from the keyframe before the
 * next missing one whenever that keyframe is past what was sent. */
static int decode_wanted(vdec_t *d, char *err, size_t errlen)
{
    uint32_t next = 0;
    bool live = true; /* false once drained: nothing more comes out */
    d->start_pts = INT64_MIN;
    for (uint32_t w = 0; w < d->nwant; w++) {
        if (d->got[w]) {
            continue;
        }
        uint32_t k = key_before(&d->ix, d->want[w]);
        if (live && k > next) {
            avcodec_flush_buffers(d->dec);
            next = k;
            d->start_pts = d->ix.pts[k];
            d->stats.seeks++;
        }
        while (!d->got[w] && live) {
            if (d->deadline > 0 && sl_mono_sec() > d->deadline) {
                return sl_err(err, errlen, -ETIME, "decoding took too long (%u frames decoded)",
                              d->stats.decoded);
            }
            /* A frame no other references and nobody wants is not decoded
             * at all (the others' bytes cannot depend on it). */
            if (next < d->ix.npk) {
                d->dec->skip_frame = still_wanted(d, d->ix.pts[next]) ? AVDISCARD_DEFAULT
                                                                      : AVDISCARD_NONREF;
            }
            int rc = avcodec_send_packet(d->dec, next < d->ix.npk ? d->ix.pk[next] : NULL);
            if (rc == AVERROR(EAGAIN)) {
                rc = 0; /* output first, then the same packet again */
            } else if (next < d->ix.npk) {
                next++; /* a packet the decoder rejects is skipped, as ffmpeg does */
            } else {
                live = false;
            }
            rc = receive_all(d, err, errlen);
            if (rc < 0) {
                return rc;
            }
        }
        if (!d->got[w]) {
            return sl_err(err, errlen, -EBADMSG, "frame %u of %u could not be decoded", d->want[w],
                          d->ix.nframes);
        }
    }
    return 0;
}

static void vdec_free(vdec_t *d)
{
    sws_freeContext(d->sws);
    av_freep(&d->rgb[0]);
    av_frame_free(&d->frame);
    avcodec_free_context(&d->dec);
    sl_vindex_free(&d->ix);
    sl_vclip_close(&d->clip);
}

static int check_req(const sl_video_req_t *req, const sl_video_limits_t *lim, char *err,
                     size_t errlen)
{
    if (lim->threads == 0 || lim->threads > SL_VIDEO_MAX_THREADS) {
        return sl_err(err, errlen, -EINVAL, "threads must be 1..%u", SL_VIDEO_MAX_THREADS);
    }
    if ((req->out_h == 0) != (req->out_w == 0) || req->out_h > SL_VIDEO_MAX_SIDE ||
        req->out_w > SL_VIDEO_MAX_SIDE) {
        return sl_err(err, errlen, -EINVAL, "bad output size %ux%u", req->out_h, req->out_w);
    }
    return 0;
}

/* The distinct wanted ranks (idx is ascending); then the output checked
 * and sized. */
static int plan_output(vdec_t *d, const uint32_t *idx, uint32_t n, const sl_video_req_t *req,
                       sl_tensor_t *out, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < n; i++) {
        if (d->nwant == 0 || d->want[d->nwant - 1] != idx[i]) {
            d->want[d->nwant++] = idx[i];
        }
    }
    const AVCodecParameters *par = d->clip.st->codecpar;
    uint32_t oh = req->out_h, ow = req->out_w;
    if (req->size_of != NULL) {
        req->size_of(req->size_ctx, (uint32_t)par->height, (uint32_t)par->width, &oh, &ow);
        if ((oh == 0) != (ow == 0) || oh > SL_VIDEO_MAX_SIDE || ow > SL_VIDEO_MAX_SIDE) {
            return sl_err(err, errlen, -EFBIG, "cannot scale %dx%d frames to %ux%u", par->width,
                          par->height, oh, ow);
        }
    }
    d->fh = oh ? oh : (uint32_t)par->height;
    d->fw = ow ? ow : (uint32_t)par->width;
    uint64_t fbytes = (uint64_t)d->fh * d->fw * 3;
    if (fbytes * n > SL_VIDEO_MAX_OUT_BYTES || (uint64_t)d->fh * n > UINT32_MAX) {
        return sl_err(err, errlen, -EFBIG, "%u frames of %ux%u are over the %zu byte limit", n,
                      d->fh, d->fw, SL_VIDEO_MAX_OUT_BYTES);
    }
    if (sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_HWC, d->fh * n, d->fw, 3) < 0) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    /* Distinct frames go first, each at its rank's slot; spread below. */
    d->out = out->data;
    return 0;
}

/* Distinct frames were decoded into slots 0..nwant); the output wants
 * idx[0..n) in order, repeats included: spread from the back. */
static void spread(vdec_t *d, const uint32_t *idx, uint32_t n, sl_tensor_t *out)
{
    size_t fb = (size_t)d->fh * d->fw * 3;
    uint32_t k = d->nwant;
    for (uint32_t i = n; i-- > 0;) {
        while (k > 0 && d->want[k - 1] > idx[i]) {
            k--;
        }
        if (k - 1 != i) {
            memmove(out->data + (size_t)i * fb, out->data + (size_t)(k - 1) * fb, fb);
        }
    }
}

int sl_video_decode(const uint8_t *buf, size_t len, const sl_video_req_t *req,
                    const sl_video_limits_t *lim, sl_tensor_t *out, uint32_t *ret_frames,
                    uint32_t *ret_fh, uint32_t *ret_fw, uint32_t *ret_src_h, uint32_t *ret_src_w,
                    sl_video_stats_t *stats, char *err, size_t errlen)
{
    int rc = check_req(req, lim, err, errlen);
    if (rc == 0) {
        rc = sl_vdl_load(err, errlen); /* vdec_free calls FFmpeg */
    }
    if (rc < 0) {
        return rc;
    }
    vdec_t *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    d->deadline = lim->max_sec > 0 ? sl_mono_sec() + lim->max_sec : 0;
    uint32_t idx[SL_VIDEO_MAX_WANTED], n = 0;
    rc = sl_vclip_open(&d->clip, buf, len, lim->max_pixels, err, errlen);
    if (rc == 0) {
        rc = sl_vclip_index(&d->clip, &d->ix, d->deadline, err, errlen);
    }
    if (rc == 0) {
        rc = sl_video_pick(d->ix.nframes, d->ix.t, req, idx, SL_VIDEO_MAX_WANTED, &n);
        if (rc < 0) {
            sl_err(err, errlen, rc, "bad frame request");
        } else if (n == 0) {
            rc = sl_err(err, errlen, -EBADMSG, "no frame at the requested times");
        }
    }
    if (rc == 0) {
        rc = plan_output(d, idx, n, req, out, err, errlen);
    }
    if (rc == 0) {
        rc = open_decoder(d, lim->threads, err, errlen);
    }
    if (rc == 0) {
        rc = decode_wanted(d, err, errlen);
    }
    if (rc == 0) {
        spread(d, idx, n, out);
        *ret_frames = n;
        *ret_fh = d->fh;
        *ret_fw = d->fw;
        *ret_src_h = (uint32_t)d->clip.st->codecpar->height;
        *ret_src_w = (uint32_t)d->clip.st->codecpar->width;
        d->stats.nframes = d->ix.nframes;
        d->stats.keyframes = d->ix.nkey;
        if (stats != NULL) {
            *stats = d->stats;
        }
    }
    vdec_free(d);
    free(d);
    return rc;
}
