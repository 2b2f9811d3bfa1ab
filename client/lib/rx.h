/* rx: a Batch message as the client received it -- the gRPC slices, kept
 * alive, plus an index of its fields (client/lib/batch_wire.h) -- so that the
 * consumer (job.c) copies each sample's bytes once, from the slices straight
 * into its place in the batch being assembled. The fetcher builds it; a
 * malformed message fails here and the stream is treated as broken.
 *
 * Compressed samples (docs/protocol.md) are decompressed here, on the
 * fetcher's thread, into a buffer per sample that the sample's data reader
 * then points at: a corrupt payload must break the stream before the
 * consumer delivers anything of the message, and the batcher's fill step
 * cannot fail. The cost is one copy of the raw bytes more than an
 * uncompressed sample (buffer -> batch slot). */
#ifndef CL_RX_H
#define CL_RX_H

#include <stddef.h>
#include <stdint.h>

#include "client/lib/batch_wire.h"
#include "common/sample/codec.h"
#include "common/rpc/rpc_client.h"
#include "proto/sluice.pb-c.h"

typedef struct cl_rx_s {
    sl_rpc_raw_t *raw;  /* the received message, or NULL */
    uint8_t *flat;      /* or: the packed bytes of an unpacked Batch */
    sl_pbw_seg_t seg;   /* flat as one segment */
    sl_wire_batch_t wb; /* index into raw's / flat's bytes */
    uint8_t **bufs;     /* per sample: its decompressed bytes, or NULL */
    sl_pbw_seg_t *dsegs; /* per sample: bufs[i] as the segment its reader reads */
    uint64_t raw_total; /* decompressed bytes of the message so far */
} cl_rx_t;

/* Decompressed bytes one message may expand to: bounds what a peer can make
 * the client allocate (credits bound the messages held). */
#define CL_RX_MAX_RAW_BYTES ((uint64_t)1 << 30)

/* Takes raw (freed on failure too) and indexes it. codec: the caller's
 * decompression context, made here on the first compressed message and kept
 * by the caller for its later ones (one per Fetch stream: a zstd context is
 * ~100 KB of allocation); NULL makes one for this message only. 0, or
 * -EBADMSG / -ENOMEM with err filled. */
int cl_rx_from_raw(sl_rpc_raw_t *raw, sl_codec_t **codec, cl_rx_t **ret, char *err,
                   size_t errlen);
/* The same from an unpacked message (tests and fuzz targets build those):
 * packs it once and indexes the bytes. */
int cl_rx_from_batch(const Sluice__Batch *b, sl_codec_t **codec, cl_rx_t **ret,
                     char *err, size_t errlen);
void cl_rx_free(cl_rx_t *rx); /* NULL ok */

#endif
