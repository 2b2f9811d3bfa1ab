/* video: a few frames out of an encoded clip (mp4/mov, mkv/webm; H.264,
 * HEVC, VP8, VP9, AV1) on FFmpeg's libraries, and what a clip's container
 * header tells before any decode (the cost model's features).
 *
 * A clip is decoded from memory (the record's bytes): no file, no protocol,
 * only the mov and matroska demuxers. The frames are numbered in
 * presentation order over the frames the decoder shows (packets the
 * demuxer marks discardable are not frames), which is what a sequential
 * decode (PyAV, decord) counts. Only what the wanted frames need is
 * decoded: the packets are indexed first, each wanted frame is decoded
 * from the last keyframe before it unless the decoder is already on its
 * way there, and a frame no other frame references is skipped unless it is
 * wanted (sl_video_stats_t says how many frames that cost). One decoder
 * thread by default; more are slice threads (frame threading reports a
 * damaged stream's errors on frames that vary from run to run).
 *
 * RGB conversion is pinned: swscale with SWS_BILINEAR into 16-byte aligned
 * rows (the flags and alignment PyAV's to_ndarray(format='rgb24') uses),
 * the YUV matrix from the stream's colorspace (BT.601 when unspecified)
 * and its range (full for JPEG-range frames), so a frame's bytes equal
 * PyAV's with src_colorspace set to the stream's matrix.
 *
 * Libraries never log: FFmpeg's own log is silenced once per process.
 * Any thread; nothing is shared between calls. */
#ifndef SL_VIDEO_H
#define SL_VIDEO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sample/tensor.h"

/* Limits a clip must stay within (docs/limits.md "Video"). */
#define SL_VIDEO_MAX_SIDE 16384u                 /* width or height */
#define SL_VIDEO_MAX_CLIP_FRAMES 200000u         /* frames (packets) in the clip */
#define SL_VIDEO_MAX_OUT_BYTES ((size_t)1 << 30) /* the sampled frames together */
#define SL_VIDEO_MAX_THREADS 8u                  /* decoder threads per clip */
#define SL_VIDEO_MAX_WANTED 256u                 /* frames one call returns */

typedef enum {
    SL_VIDEO_SAMPLE_UNIFORM = 0, /* round(linspace(0, n - 1, frames)) */
    SL_VIDEO_SAMPLE_FPS,         /* one frame every 1/fps s of presentation time */
} sl_video_sampling_e;

/* Which frames, and at what size. */
typedef struct sl_video_req_s {
    sl_video_sampling_e sampling;
    uint32_t frames;     /* UNIFORM: how many (1..SL_VIDEO_MAX_WANTED) */
    double fps;          /* FPS: frames per second of presentation time, > 0 */
    uint32_t max_frames; /* FPS: at most this many (1..SL_VIDEO_MAX_WANTED) */
    /* random_offset's draw in [0, 1), or negative for none. UNIFORM: the n
     * frames cut into `frames` equal segments, frame floor((k + offset) n /
     * frames) of each; FPS: the times start at offset / fps. */
    double offset;
    uint32_t out_h, out_w; /* 0, 0: the stream's size; else swscale scales to it */
    /* Or, when set, the size for a stream of src_h x src_w (0, 0: its own),
     * asked once the header is read. */
    void (*size_of)(void *ctx, uint32_t src_h, uint32_t src_w, uint32_t *ret_h, uint32_t *ret_w);
    void *size_ctx;
} sl_video_req_t;

typedef struct sl_video_limits_s {
    uint64_t max_pixels; /* width x height of a frame */
    double max_sec;      /* wall time one clip may take (0: no limit) */
    uint32_t threads;    /* decoder threads, 1..SL_VIDEO_MAX_THREADS */
} sl_video_limits_t;

/* What one decode did: for the benchmark and the profiler. */
typedef struct sl_video_stats_s {
    uint32_t nframes; /* frames in the clip */
    uint32_t decoded; /* frames the decoder produced */
    uint32_t seeks;   /* jumps to a keyframe past the decoder's position */
    uint32_t keyframes;
} sl_video_stats_t;

/* What the container header says, before any decode. */
typedef struct sl_video_info_s {
    char codec[16]; /* "h264", "hevc", "vp9", "av1", "vp8", or FFmpeg's name */
    bool supported; /* a codec sl_video_decode takes */
    uint32_t width, height;
    uint64_t nframes;    /* from the header's index, or duration x rate (0: unknown) */
    double duration_sec; /* 0: unknown */
    double fps;          /* average frame rate (0: unknown) */
    uint64_t keyframes;  /* keyframes the container's index lists (mp4's sync
                          * samples, mkv's cues; 0: unknown) */
} sl_video_info_t;

/* Frames a decode of `wanted` frames is expected to decode: each from the
 * keyframe before it, half a GOP on average (the GOP from the header's
 * keyframes, else 250, x264's default), never more than the clip. */
double sl_video_decode_estimate(const sl_video_info_t *info, uint32_t wanted);
/* The decode work of `wanted` frames in megapixels decoded, weighted by
 * the codec's cost per pixel relative to H.264 (the cost model's mpix
 * feature for a clip: common/profile/features.c). */
double sl_video_work_mpix(const sl_video_info_t *info, uint32_t wanted);

/* Frame indices (presentation order) of a clip of n frames whose
 * presentation times are t[0..n) (seconds, ascending): at most cap of them
 * into ret_idx, their number in *ret_n. Pure: the tests check it alone.
 * Returns 0, or -EINVAL for a request out of range or n == 0. */
int sl_video_pick(uint32_t n, const double *t, const sl_video_req_t *req, uint32_t *ret_idx,
                  uint32_t cap, uint32_t *ret_n);

/* Decodes the requested frames of the clip buf[0..len) into out: uint8 RGB,
 * the frames stacked top to bottom (out->h = frames x *ret_fh, out->w =
 * *ret_fw, out->c = 3). *ret_src_h, *ret_src_w: the stream's size. Returns
 * 0 or, with err saying why: -ENODATA (zero bytes), -EBADMSG (not a clip
 * we read, or corrupt), -ENOMSG (truncated), -ENOMEDIUM (no video stream),
 * -EPROTONOSUPPORT (a codec other than those above), -EFBIG (a frame over
 * max_pixels or SL_VIDEO_MAX_SIDE, more than SL_VIDEO_MAX_CLIP_FRAMES
 * frames, the output over SL_VIDEO_MAX_OUT_BYTES), -ETIME (over max_sec),
 * -EINVAL (a bad request), -ENOMEM. stats may be NULL. */
int sl_video_decode(const uint8_t *buf, size_t len, const sl_video_req_t *req,
                    const sl_video_limits_t *lim, sl_tensor_t *out, uint32_t *ret_frames,
                    uint32_t *ret_fh, uint32_t *ret_fw, uint32_t *ret_src_h, uint32_t *ret_src_w,
                    sl_video_stats_t *stats, char *err, size_t errlen);

/* Reads the container header of buf[0..len) (no decode). Returns 0, or the
 * codes of sl_video_decode that a header alone can give. */
int sl_video_probe(const uint8_t *buf, size_t len, sl_video_info_t *ret, char *err, size_t errlen);

#endif
