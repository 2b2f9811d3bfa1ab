/* batch_wire: reads a worker's Batch message (proto/sluice.proto) straight
 * from the received segments, without protobuf-c: the scalar fields are
 * decoded into an index and each sample's `data` is left where it is, as a
 * reader the consumer copies exactly once into the sample's final place.
 *
 * Same acceptance as protobuf-c for what a worker sends: fields in any order,
 * last value wins, unknown fields skipped. Refused (-EBADMSG, err says why):
 * truncated varints, lengths past the end, a known field with the wrong wire
 * type, more than max_samples samples. Whether a sample's shape makes sense
 * is judged per sample (sl_wire_sample_check), as a skip, not a broken
 * stream. */
#ifndef SL_BATCH_WIRE_H
#define SL_BATCH_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/data/url_vers.h"
#include "common/rpc/pb_wire.h"

#define SL_WIRE_MAX_SAMPLES 65536 /* per message: bounds the index */

typedef struct sl_wire_sample_s {
    uint64_t epoch, index, position;
    int32_t label;
    uint32_t dtype, layout, h, w, c;
    uint32_t codec;              /* sl_codec_e; rx.c decompresses before the consumer sees it */
    uint64_t raw_size;           /* with codec: the decompressed size */
    sl_pbw_reader_t data;        /* over the bytes of `data` (left = length) */
    sl_pbw_reader_t skip_reason; /* over the string's bytes; empty when absent */
    sl_pbw_reader_t skip_detail;
    sl_pbw_reader_t url_versions; /* packed fixed64 pairs (field 50); empty when absent */
} sl_wire_sample_t;

typedef struct sl_wire_batch_s {
    uint64_t job_id, split_id;
    int split_done;
    uint32_t stage_to;
    size_t n_samples;
    sl_wire_sample_t *samples; /* malloc'd; readers point into the segments */
} sl_wire_batch_t;

/* Parses the message in segs (which must outlive *ret). 0, or -EBADMSG /
 * -ENOMEM with err filled; *ret is then empty. */
int sl_wire_batch_parse(const sl_pbw_seg_t *segs, size_t nsegs, size_t max_samples,
                        sl_wire_batch_t *ret, char *err, size_t errlen);
void sl_wire_batch_free(sl_wire_batch_t *b);

/* Copies a string field into buf, NUL-terminated, truncated to len - 1
 * bytes; embedded NULs end it early. Returns its full length. */
size_t sl_wire_string(const sl_pbw_reader_t *r, char *buf, size_t len);

/* h*w*c times the dtype's element size, without overflow; 0 when beyond
 * SL_TENSOR_MAX_BYTES. */
uint64_t sl_wire_shape_bytes(const sl_wire_sample_t *s);

/* Judges a non-skipped sample of a message whose units [0, stage_to) ran,
 * for a pipeline of nunits: a known dtype and layout, data of exactly
 * h*w*c*element bytes (encoded bytes exactly when no unit ran), not empty,
 * at most SL_TENSOR_MAX_BYTES. 0 when fine, else -EBADMSG with detail
 * saying what is wrong (the caller turns it into a corrupt skip). */
int sl_wire_sample_check(const sl_wire_sample_t *s, uint32_t stage_to, uint32_t nunits,
                         char *detail, size_t len);

/* A sample's url_versions into *ret: whole 16-byte pairs, at most
 * SL_URL_VERS_MAX, no zero hash or validator, no URL twice with two
 * validators. 0, or -EBADMSG with detail saying what is wrong (the caller
 * turns it into a corrupt skip). */
int sl_wire_url_versions(const sl_wire_sample_t *s, sl_url_vers_t *ret, char *detail, size_t len);

#endif
