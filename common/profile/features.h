/* features: what the cost model (common/cost/costmodel.h) is fed, read
 * from a sample's encoded bytes without decoding it: the JPEG or PNG header
 * of every image (size, pixels, progressive) and a record's text. Apart
 * from the model because it parses images and records; the dispatcher uses
 * the model only. Pure: any thread. */
#ifndef SL_FEATURES_H
#define SL_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#include "common/cost/costmodel.h"

/* Features of an encoded sample; a file the header probe refuses gets its
 * size only (mpix 0). */
void sl_cost_features(const uint8_t *buf, size_t len, sl_cost_features_t *ret);
/* The same from the first len bytes of a file of file_bytes (its header
 * is in the first few KB unless metadata comes first). */
void sl_cost_features_head(const uint8_t *buf, size_t len, uint64_t file_bytes,
                           sl_cost_features_t *ret);
/* A record's features from a record of its images' heads (webdataset's
 * sl_source_read_head) and the sizes the index knows. */
void sl_cost_features_heads(const uint8_t *rec, size_t len, uint64_t image_bytes,
                            uint64_t text_bytes, sl_cost_features_t *ret);
/* How many bytes of a file sl_cost_features_head wants. */
#define SL_COST_HEAD_BYTES 65536
/* A clip (a record's VIDEO_ENC field) adds its bytes, one image and, as
 * mpix, the work of decoding this many frames out of it
 * (common/video/video.h sl_video_work_mpix: the codec, the frame size, the
 * frame count and the keyframe spacing its header gives): decode_video's
 * default; the fitted coefficient absorbs the spec's own count. */
#define SL_COST_VIDEO_FRAMES 8

#endif
