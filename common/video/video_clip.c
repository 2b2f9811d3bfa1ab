/* video_clip: a clip opened from memory (only the mov and matroska
 * demuxers, no nested opens), its header read (sl_video_probe) and its
 * packets indexed. Any thread. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/err.h"
#include "common/video/video_impl.h"

#define VIO_BUF 32768
/* The demuxers a clip may use: what .mp4/.mov and .mkv/.webm hold. */
#define VIDEO_FORMATS "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm"

/* The codecs we decode, and the names features and messages use. */
static const struct {
    enum AVCodecID id;
    const char *name;
} k_codecs[] = {
    {AV_CODEC_ID_H264, "h264"}, {AV_CODEC_ID_HEVC, "hevc"}, {AV_CODEC_ID_VP9, "vp9"},
    {AV_CODEC_ID_AV1, "av1"},   {AV_CODEC_ID_VP8, "vp8"},
};
#define NCODECS (sizeof(k_codecs) / sizeof(k_codecs[0]))

static int mem_read(void *opaque, uint8_t *out, int n)
{
    vmem_t *m = opaque;
    size_t left = m->len - m->pos;
    if (left == 0) {
        return AVERROR_EOF;
    }
    size_t k = (size_t)n < left ? (size_t)n : left;
    memcpy(out, m->buf + m->pos, k);
    m->pos += k;
    return (int)k;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence)
{
    vmem_t *m = opaque;
    int64_t base;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
        return (int64_t)m->len;
    case SEEK_SET:
        base = 0;
        break;
    case SEEK_CUR:
        base = (int64_t)m->pos;
        break;
    case SEEK_END:
        base = (int64_t)m->len;
        break;
    default:
        return AVERROR(EINVAL);
    }
    if (off < -base || base + off > (int64_t)m->len) {
        return AVERROR(EINVAL);
    }
    m->pos = (size_t)(base + off);
    return (int64_t)m->pos;
}

/* A clip names no other file: mov's external references and the like are
 * refused here (the data root is the sources' to confine). */
static int no_nested_open(struct AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                          AVDictionary **options)
{
    return AVERROR(EPERM);
}

void sl_vclip_close(vclip_t *c)
{
    if (c->fmt != NULL) {
        avformat_close_input(&c->fmt);
    }
    if (c->io != NULL) {
        av_freep(&c->io->buffer);
        avio_context_free(&c->io);
    }
    memset(c, 0, sizeof(*c));
}

static const char *codec_name(enum AVCodecID id)
{
    for (size_t i = 0; i < NCODECS; i++) {
        if (k_codecs[i].id == id) {
            return k_codecs[i].name;
        }
    }
    return NULL;
}

/* The first video stream that is not a cover picture; the others are not
 * demuxed at all. */
static AVStream *pick_stream(AVFormatContext *fmt)
{
    AVStream *st = NULL;
    for (unsigned i = 0; i < fmt->nb_streams; i++) {
        AVStream *s = fmt->streams[i];
        if (st == NULL && s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
            !(s->disposition & AV_DISPOSITION_ATTACHED_PIC)) {
            st = s;
        } else {
            s->discard = AVDISCARD_ALL;
        }
    }
    return st;
}

static int open_demuxer(vclip_t *c, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    c->mem = (vmem_t){.buf = buf, .len = len};
    uint8_t *iobuf = av_malloc(VIO_BUF);
    c->io = iobuf != NULL ? avio_alloc_context(iobuf, VIO_BUF, 0, &c->mem, mem_read, NULL, mem_seek)
                          : NULL;
    c->fmt = c->io != NULL ? avformat_alloc_context() : NULL;
    if (c->fmt == NULL) {
        if (c->io == NULL) {
            av_free(iobuf);
        }
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    c->fmt->pb = c->io;
    c->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    c->fmt->io_open = no_nested_open;
    c->fmt->format_whitelist = av_strdup(VIDEO_FORMATS);
    if (c->fmt->format_whitelist == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = avformat_open_input(&c->fmt, "", NULL, NULL);
    if (rc < 0) {
        c->fmt = NULL; /* freed by avformat_open_input */
        char why[AV_ERROR_MAX_STRING_SIZE];
        av_strerror(rc, why, sizeof(why));
        return sl_err(err, errlen, rc == AVERROR(ENOMEM) ? -ENOMEM : -EBADMSG,
                      "not a clip FFmpeg reads as mp4/mov or mkv/webm (%s)", why);
    }
    return 0;
}

int sl_vclip_open(vclip_t *c, const uint8_t *buf, size_t len, uint64_t max_pixels, char *err,
                  size_t errlen)
{
    memset(c, 0, sizeof(*c));
    int rc = sl_vdl_load(err, errlen); /* before anything that closes c calls FFmpeg */
    if (rc < 0) {
        return rc;
    }
    if (len == 0) {
        return sl_err(err, errlen, -ENODATA, "empty clip (0 bytes)");
    }
    rc = open_demuxer(c, buf, len, err, errlen);
    if (rc == 0) {
        c->st = pick_stream(c->fmt);
        if (c->st == NULL) {
            rc = sl_err(err, errlen, -ENOMEDIUM, "the clip has no video stream");
        }
    }
    const AVCodecParameters *par = rc == 0 ? c->st->codecpar : NULL;
    if (rc == 0 && codec_name(par->codec_id) == NULL) {
        rc = sl_err(err, errlen, -EPROTONOSUPPORT,
                    "codec %s is not supported (h264, hevc, vp8, vp9, av1)",
                    avcodec_get_name(par->codec_id));
    }
    if (rc == 0 && (par->width <= 0 || par->height <= 0)) {
        rc = sl_err(err, errlen, -EBADMSG, "the header gives no frame size");
    }
    if (rc == 0 &&
        ((uint32_t)par->width > SL_VIDEO_MAX_SIDE || (uint32_t)par->height > SL_VIDEO_MAX_SIDE ||
         (max_pixels > 0 && (uint64_t)par->width * (uint64_t)par->height > max_pixels))) {
        rc = sl_err(err, errlen, -EFBIG,
                    "%dx%d frames exceed the limit (%u a side, max_pixels %llu)", par->width,
                    par->height, SL_VIDEO_MAX_SIDE, (unsigned long long)max_pixels);
    }
    if (rc == 0 && c->st->nb_frames > (int64_t)SL_VIDEO_MAX_CLIP_FRAMES) {
        rc = sl_err(err, errlen, -EFBIG, "the header declares %lld frames, the limit is %u",
                    (long long)c->st->nb_frames, SL_VIDEO_MAX_CLIP_FRAMES);
    }
    if (rc == 0) {
        c->codec = avcodec_find_decoder(par->codec_id);
        if (c->codec == NULL) {
            rc = sl_err(err, errlen, -EPROTONOSUPPORT, "this FFmpeg has no %s decoder",
                        avcodec_get_name(par->codec_id));
        }
    }
    if (rc < 0) {
        sl_vclip_close(c);
    }
    return rc;
}

int sl_video_probe(const uint8_t *buf, size_t len, sl_video_info_t *ret, char *err, size_t errlen)
{
    vclip_t c;
    int rc = sl_vclip_open(&c, buf, len, 0, err, errlen);
    if (rc < 0 && rc != -EPROTONOSUPPORT) {
        return rc;
    }
    if (rc == -EPROTONOSUPPORT) {
        /* Still a clip: say what it holds (not decodable). */
        *ret = (sl_video_info_t){0};
        snprintf(ret->codec, sizeof(ret->codec), "unsupported");
        return rc;
    }
    const AVStream *st = c.st;
    sl_video_info_t info = {.supported = true,
                            .width = (uint32_t)st->codecpar->width,
                            .height = (uint32_t)st->codecpar->height};
    snprintf(info.codec, sizeof(info.codec), "%s", codec_name(st->codecpar->codec_id));
    AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    info.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
    if (st->duration > 0 && st->time_base.den > 0) {
        info.duration_sec = (double)st->duration * av_q2d(st->time_base);
    } else if (c.fmt->duration > 0) {
        info.duration_sec = (double)c.fmt->duration / AV_TIME_BASE;
    }
    int nidx = avformat_index_get_entries_count(st);
    for (int i = 0; i < nidx; i++) {
        const AVIndexEntry *e = avformat_index_get_entry(c.st, i);
        info.keyframes += e != NULL && (e->flags & AVINDEX_KEYFRAME);
    }
    if (st->nb_frames > 0) {
        info.nframes = (uint64_t)st->nb_frames;
    } else if (info.fps > 0 && info.duration_sec > 0) {
        info.nframes = (uint64_t)(info.duration_sec * info.fps + 0.5);
    }
    sl_vclip_close(&c);
    *ret = info;
    return 0;
}

/* Decode cost per pixel relative to H.264's (software decoders, one
 * thread; the fitted model scales them). */
static double codec_weight(const char *codec)
{
    static const struct {
        const char *name;
        double w;
    } k_weights[] = {{"h264", 1.0}, {"vp8", 1.0}, {"vp9", 1.3}, {"hevc", 1.6}, {"av1", 1.8}};
    for (size_t i = 0; i < sizeof(k_weights) / sizeof(k_weights[0]); i++) {
        if (strcmp(codec, k_weights[i].name) == 0) {
            return k_weights[i].w;
        }
    }
    return 1.0;
}

double sl_video_decode_estimate(const sl_video_info_t *info, uint32_t wanted)
{
    double n = (double)info->nframes;
    double gop = info->keyframes > 0 && n > 0 ? n / (double)info->keyframes : 250.0;
    double est = (double)wanted * (gop + 1.0) / 2.0;
    if (n > 0 && est > n) {
        est = n;
    }
    return est < (double)wanted ? (double)wanted : est;
}

double sl_video_work_mpix(const sl_video_info_t *info, uint32_t wanted)
{
    double mpix = (double)info->width * (double)info->height / 1e6;
    return sl_video_decode_estimate(info, wanted) * mpix * codec_weight(info->codec);
}

void sl_vindex_free(vindex_t *ix)
{
    for (uint32_t i = 0; i < ix->npk; i++) {
        av_packet_free(&ix->pk[i]);
    }
    free(ix->pk);
    free(ix->pts);
    free(ix->key);
    free(ix->order);
    free(ix->spts);
    free(ix->t);
    memset(ix, 0, sizeof(*ix));
}

static int grow(vindex_t *ix)
{
    uint32_t cap = ix->cap ? ix->cap * 2 : 256;
    AVPacket **pk = realloc(ix->pk, cap * sizeof(*pk));
    if (pk != NULL) {
        ix->pk = pk;
    }
    int64_t *pts = pk != NULL ? realloc(ix->pts, cap * sizeof(*pts)) : NULL;
    if (pts != NULL) {
        ix->pts = pts;
    }
    uint8_t *key = pts != NULL ? realloc(ix->key, cap) : NULL;
    if (key == NULL) {
        return -ENOMEM;
    }
    ix->key = key;
    ix->cap = cap;
    return 0;
}

static int cmp_rank(const void *a, const void *b, void *arg)
{
    const int64_t *pts = arg;
    int64_t x = pts[*(const uint32_t *)a], y = pts[*(const uint32_t *)b];
    return x < y ? -1 : x > y;
}

/* Frames in presentation order: every packet not marked discardable, by
 * timestamp, which must be there and distinct (a frame is found by it). */
static int rank_frames(const AVStream *st, vindex_t *ix, const uint8_t *discard, char *err,
                       size_t errlen)
{
    uint32_t n = 0;
    ix->order = malloc((ix->npk + 1) * sizeof(*ix->order));
    ix->spts = malloc((ix->npk + 1) * sizeof(*ix->spts));
    ix->t = malloc((ix->npk + 1) * sizeof(*ix->t));
    if (ix->order == NULL || ix->spts == NULL || ix->t == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < ix->npk; i++) {
        if (!discard[i]) {
            if (ix->pts[i] == AV_NOPTS_VALUE) {
                return sl_err(err, errlen, -EBADMSG, "packet %u has no timestamp", i);
            }
            ix->order[n++] = i;
        }
    }
    if (n == 0) {
        return sl_err(err, errlen, -ENOMSG, "the video stream has no frames");
    }
    qsort_r(ix->order, n, sizeof(*ix->order), cmp_rank, ix->pts);
    double tb = av_q2d(st->time_base);
    for (uint32_t r = 0; r < n; r++) {
        ix->spts[r] = ix->pts[ix->order[r]];
        if (r > 0 && ix->spts[r] == ix->spts[r - 1]) {
            return sl_err(err, errlen, -EBADMSG, "two frames with timestamp %lld",
                          (long long)ix->spts[r]);
        }
        ix->t[r] = (double)(ix->spts[r] - ix->spts[0]) * tb;
    }
    ix->nframes = n;
    return 0;
}

/* One packet read into the index; 1 at the end of the stream. */
static int read_one(vclip_t *c, vindex_t *ix, AVPacket *pk, uint8_t **discard, char *err,
                    size_t errlen)
{
    int rc = av_read_frame(c->fmt, pk);
    if (rc == AVERROR_EOF) {
        return 1;
    }
    if (rc < 0) {
        char why[AV_ERROR_MAX_STRING_SIZE];
        av_strerror(rc, why, sizeof(why));
        return sl_err(err, errlen, rc == AVERROR(ENOMEM) ? -ENOMEM : -EBADMSG, "packet %u: %s",
                      ix->npk, why);
    }
    if (pk->stream_index != c->st->index) {
        av_packet_unref(pk);
        return 0;
    }
    if (pk->flags & AV_PKT_FLAG_CORRUPT) {
        av_packet_unref(pk);
        return sl_err(err, errlen, -ENOMSG, "truncated: packet %u is cut off", ix->npk);
    }
    if (ix->npk >= SL_VIDEO_MAX_CLIP_FRAMES) {
        av_packet_unref(pk);
        return sl_err(err, errlen, -EFBIG, "more than %u frames", SL_VIDEO_MAX_CLIP_FRAMES);
    }
    if (ix->npk == ix->cap) {
        uint8_t *d = grow(ix) == 0 ? realloc(*discard, ix->cap) : NULL;
        if (d == NULL) {
            av_packet_unref(pk);
            return sl_err(err, errlen, -ENOMEM, "out of memory");
        }
        *discard = d;
    }
    AVPacket *keep = av_packet_alloc();
    if (keep == NULL) {
        av_packet_unref(pk);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    av_packet_move_ref(keep, pk);
    uint32_t i = ix->npk++;
    ix->pk[i] = keep;
    ix->pts[i] = keep->pts;
    ix->key[i] = (keep->flags & AV_PKT_FLAG_KEY) != 0;
    ix->nkey += ix->key[i];
    (*discard)[i] = (keep->flags & AV_PKT_FLAG_DISCARD) != 0;
    return 0;
}

/* Matroska declares no frame count but a duration: frames that stop well
 * before it were cut off (the stream's own duration, or the file's when
 * the video is its only stream: an audio track may run longer). */
static int check_duration(const vclip_t *c, const vindex_t *ix, char *err, size_t errlen)
{
    double dur = 0;
    if (c->st->duration > 0 && c->st->duration != AV_NOPTS_VALUE) {
        dur = (double)c->st->duration * av_q2d(c->st->time_base);
    } else if (c->fmt->nb_streams == 1 && c->fmt->duration > 0) {
        dur = (double)c->fmt->duration / AV_TIME_BASE;
    }
    double last = ix->t[ix->nframes - 1];
    double slack = dur * 0.02 > 0.5 ? dur * 0.02 : 0.5;
    if (dur > 0 && last < dur - slack) {
        return sl_err(err, errlen, -ENOMSG,
                      "truncated: the frames end at %.3f s, the header says %.3f s", last, dur);
    }
    return 0;
}

int sl_vclip_index(vclip_t *c, vindex_t *ix, double deadline, char *err, size_t errlen)
{
    memset(ix, 0, sizeof(*ix));
    AVPacket *pk = av_packet_alloc();
    uint8_t *discard = NULL;
    if (pk == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = 0;
    while (rc == 0) {
        if (deadline > 0 && (ix->npk & 255) == 255 && sl_mono_sec() > deadline) {
            rc = sl_err(err, errlen, -ETIME, "reading the clip took too long (%u packets)",
                        ix->npk);
            break;
        }
        rc = read_one(c, ix, pk, &discard, err, errlen);
    }
    av_packet_free(&pk);
    if (rc == 1 && c->st->nb_frames > 0 && (int64_t)ix->npk < c->st->nb_frames) {
        rc = sl_err(err, errlen, -ENOMSG, "truncated: %u of the %lld frames the header declares",
                    ix->npk, (long long)c->st->nb_frames);
    }
    if (rc == 1) {
        rc = rank_frames(c->st, ix, discard, err, errlen);
    }
    if (rc == 0) {
        rc = check_duration(c, ix, err, errlen);
    }
    free(discard);
    if (rc < 0) {
        sl_vindex_free(ix);
    }
    return rc;
}
