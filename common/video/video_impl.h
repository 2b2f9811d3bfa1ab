/* video_impl: what video_clip.c (a clip opened from memory, its packet
 * index) shares with video_decode.c (the frames wanted, decoded and
 * converted). Not a public API. */
#ifndef SL_VIDEO_IMPL_H
#define SL_VIDEO_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/video/video.h"
#include "common/video/video_dl.h" /* FFmpeg's headers; its names are loaded pointers */

/* The bytes an AVIOContext reads from: the caller's buffer, never copied. */
typedef struct {
    const uint8_t *buf;
    size_t len, pos;
} vmem_t;

/* An open clip: its demuxer over the caller's bytes and the video stream
 * chosen (the first that is not a cover picture). */
typedef struct {
    vmem_t mem;
    AVIOContext *io;
    AVFormatContext *fmt;
    AVStream *st;
    const AVCodec *codec; /* NULL when the codec is not one we decode */
} vclip_t;

/* The clip's packets in decode order, and its frames in presentation
 * order: rank r is packet order[r] with timestamp pts_sorted[r]. */
typedef struct {
    AVPacket **pk;
    uint32_t npk, cap;
    int64_t *pts;    /* per packet */
    uint8_t *key;    /* per packet: a keyframe */
    uint32_t *order; /* per frame: its packet */
    int64_t *spts;   /* per frame: its timestamp, ascending */
    double *t;       /* per frame: seconds since the first frame */
    uint32_t nframes;
    uint32_t nkey;
} vindex_t;

/* Opens buf[0..len) (checks of sl_video_decode: empty, container, stream,
 * size). max_pixels 0: not checked. Returns 0 or -errno with err set; on
 * failure c holds nothing to close. */
int sl_vclip_open(vclip_t *c, const uint8_t *buf, size_t len, uint64_t max_pixels, char *err,
                  size_t errlen);
void sl_vclip_close(vclip_t *c);
/* Reads every packet of the stream into ix (deadline: sl_mono_sec() time,
 * 0 none). Returns 0, -ENOMSG (truncated), -EBADMSG, -EFBIG (too many
 * frames), -ETIME, -ENOMEM. */
int sl_vclip_index(vclip_t *c, vindex_t *ix, double deadline, char *err, size_t errlen);
void sl_vindex_free(vindex_t *ix);

#endif
