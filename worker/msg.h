/* msg: finished samples of one split packed into Batch messages for the Fetch
 * stream. Pure logic (no threads, no I/O) so it is unit-tested on its own.
 *
 * A message holds at most batch_size samples and at most max_bytes of packed
 * protobuf; the split's last message carries split_done = true (it has zero
 * samples only when the split itself is empty). A single sample whose output
 * alone would not fit max_bytes is turned into a skipped sample
 * (reason "too_large") rather than sent in an oversized message the client's
 * channel would refuse.
 *
 * Ownership: a wk_msg_t owns its Sluice__Batch, the Sample array and every
 * sample's data and detail strings; the batch can be handed to
 * sl_rpc_stream_send as is. Not thread-safe: the owner (a job's runner, then
 * the job's output queue under the job mutex, then the stream thread that
 * popped it) is always one thread at a time. */
#ifndef WK_MSG_H
#define WK_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "common/engine/batcher.h"
#include "common/sample/codec.h"
#include "proto/sluice.pb-c.h"

/* Bytes a message costs beyond its samples: job_id, split_id, split_done,
 * stage_to (at most 30). */
#define WK_MSG_OVERHEAD 32

/* How a sample's data travels (docs/protocol.md "Compressed samples"):
 * codec SL_CODEC_NONE = the raw tensor; else s->t holds the compressed
 * bytes (t.nbytes their length, the shape still the tensor's) and raw_size
 * the tensor's size. */
typedef struct wk_coding_s {
    uint32_t codec;
    uint64_t raw_size;
} wk_coding_t;

/* Compresses a delivered sample's tensor in place for the wire: zstd after
 * a left-neighbour delta for uint8 pixels, zstd alone for float32; encoded
 * bytes and skips are left raw, as is anything that does not shrink.
 * corrupt != 0 (test-only fault injection, SLUICE_TEST_CORRUPT_COMPRESSED)
 * damages the compressed bytes. *ret says what was done. 0 or -ENOMEM (the
 * sample is then left raw). */
int wk_sample_compress(sl_codec_t *z, int corrupt, sl_sample_t *s, wk_coding_t *ret);

typedef struct wk_msg_s {
    Sluice__Batch batch;
    Sluice__Sample *samples; /* cap entries; batch.samples points into it */
    Sluice__Sample **ptrs;
    uint32_t cap;
    size_t bytes;            /* packed size upper bound (WK_MSG_OVERHEAD + samples) */
    uint64_t assignment;     /* the dispatcher's hand-out of the split (not sent) */
    struct wk_msg_s *next;   /* link in a wk_msglist_t */
} wk_msg_t;

/* FIFO of messages; bytes sums their `bytes`. */
typedef struct wk_msglist_s {
    wk_msg_t *head, *tail;
    size_t count;
    size_t bytes;
} wk_msglist_t;

/* Packs the samples of one split. Every message carries the split's
 * stage_to, so the client knows which units the samples went through. */
typedef struct wk_packer_s {
    uint64_t job_id, split_id;
    uint32_t stage_to;
    uint64_t assignment; /* copied to every message (wk_msg_t.assignment) */
    uint32_t batch_size; /* >= 1 */
    size_t max_bytes;    /* max packed bytes of one message */
    wk_msg_t *cur;       /* message being filled, NULL before the first sample */
    uint64_t skipped_too_large;
    /* Where a sample whose output does not fit a message is read again and
     * sent unprocessed (stage_to 0) for the client to finish; NULL: such a
     * sample is a too_large skip. */
    const struct sl_source_s *src;
    uint64_t sent_raw;
} wk_packer_t;

wk_msg_t *wk_msg_new(uint64_t job_id, uint64_t split_id, uint32_t cap);
void wk_msg_free(wk_msg_t *m); /* NULL ok */

/* Packed bytes a sample adds to a Batch (field tag + length + Sample), an
 * upper bound; cd NULL = raw. */
size_t wk_sample_wire_bytes(const sl_sample_t *s, const char *detail, const wk_coding_t *cd);

void wk_msglist_init(wk_msglist_t *l);
void wk_msglist_push(wk_msglist_t *l, wk_msg_t *m);
wk_msg_t *wk_msglist_pop(wk_msglist_t *l); /* NULL when empty */
void wk_msglist_clear(wk_msglist_t *l);   /* frees every message */

void wk_packer_init(wk_packer_t *pk, uint64_t job_id, uint64_t split_id, uint32_t stage_to,
                    uint32_t batch_size, size_t max_bytes);
/* Adds a finished sample (s->skip >= 0: skipped, detail says why), coded as
 * cd says (NULL = raw). Takes s->t's data (s->t is left empty). A message
 * that cannot take the sample is appended to out first. Returns 0 or
 * -ENOMEM (the sample is then lost and the caller must drop the split). */
int wk_packer_add(wk_packer_t *pk, sl_sample_t *s, const char *detail, const wk_coding_t *cd,
                  wk_msglist_t *out);
/* The split is complete: appends the last message with split_done = true
 * (empty if the split had no samples). Returns 0 or -ENOMEM. */
int wk_packer_finish(wk_packer_t *pk, wk_msglist_t *out);
/* Frees the partial message (split dropped). */
void wk_packer_reset(wk_packer_t *pk);
/* Bytes held in the partial message. */
size_t wk_packer_bytes(const wk_packer_t *pk);

#endif
