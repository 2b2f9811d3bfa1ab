/* codec: lossless compression of one sample's output tensor for the wire
 * (docs/protocol.md "Compressed samples"): zstd, optionally after a
 * left-neighbour delta filter that turns smooth image rows into small values
 * zstd packs well. Pure functions over memory; no threads, no logging.
 *
 * The delta filter works on bytes: within each row of `row` bytes, byte i
 * (i >= step) becomes in[i] - in[i - step] (mod 256); step is the distance
 * between horizontally adjacent values of one channel (c for HWC uint8, 1
 * for CHW). It is meant for uint8 pixels; on other data it is merely useless.
 *
 * A context holds zstd's state and a scratch buffer so a thread that
 * compresses many samples allocates once; one context per thread. */
#ifndef SL_CODEC_H
#define SL_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/sample/tensor.h"

/* Values of Sample.codec on the wire: never renumber. */
typedef enum sl_codec_e {
    SL_CODEC_NONE = 0,       /* data is the raw tensor */
    SL_CODEC_ZSTD = 1,       /* data is one zstd frame of the raw tensor */
    SL_CODEC_ZSTD_DELTA = 2, /* one zstd frame of the delta-filtered tensor */
    SL_CODEC__COUNT
} sl_codec_e;

#define SL_CODEC_LEVEL 1 /* zstd level: the fastest (the issue measures 1.6x / 2.5x) */

typedef struct sl_codec_s sl_codec_t;

/* The codec a worker uses for a tensor (and the profiler measures):
 * nothing for encoded bytes (JPEG does not shrink), delta + zstd for uint8
 * pixels, zstd for anything else; *ret_row / *ret_step for the delta. */
sl_codec_e sl_codec_for_tensor(const sl_tensor_t *t, uint32_t *ret_row, uint32_t *ret_step);

sl_codec_t *sl_codec_new(void);
void sl_codec_free(sl_codec_t *z); /* NULL ok */

/* Geometry of the delta filter for a tensor: row bytes and step (see above). */
void sl_codec_delta_geometry(uint32_t layout_chw, uint32_t w, uint32_t c, uint32_t *ret_row,
                             uint32_t *ret_step);
void sl_codec_delta(uint8_t *p, size_t n, uint32_t row, uint32_t step);   /* in place */
void sl_codec_undelta(uint8_t *p, size_t n, uint32_t row, uint32_t step); /* in place */

/* Compresses src[0, n) with codec (ZSTD or ZSTD_DELTA; row/step used by
 * the latter) into a new malloc'd buffer (*ret, *ret_len; caller frees).
 * -ENOSPC when the result would not be smaller than n (send it raw),
 * -EINVAL for an unknown codec, -ENOMEM. */
int sl_codec_compress(sl_codec_t *z, sl_codec_e codec, const uint8_t *src, size_t n,
                      uint32_t row, uint32_t step, uint8_t **ret, size_t *ret_len);

/* Decompresses the frame spread over in[0, nin) into dst, which must be
 * exactly raw bytes long (the caller checked raw against its limits before
 * allocating dst). Anything but one well-formed frame of exactly raw bytes
 * -- unknown codec, a declared size that differs, corrupt or truncated data,
 * trailing bytes -- is -EBADMSG with err saying why. */
int sl_codec_decompress(sl_codec_t *z, sl_codec_e codec, const struct iovec *in, size_t nin,
                        uint8_t *dst, size_t raw, uint32_t row, uint32_t step, char *err,
                        size_t errlen);

#endif
