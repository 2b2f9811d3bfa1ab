/* pb_wire: a small, bounds-checked reader of the protobuf wire format over a
 * message that lives in several non-contiguous segments (the slices gRPC
 * received), so a large bytes field can be copied once, straight from the
 * slices to its final place, instead of flattened and unpacked first.
 *
 * It knows only the wire format (varints, tags, the four wire types used by
 * proto3); which fields mean what is the caller's business (batch_wire.c).
 * Every read checks what remains: a truncated or lying message gives
 * -EBADMSG, never a read past the end. The reader does not own the
 * segments. */
#ifndef SL_PB_WIRE_H
#define SL_PB_WIRE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_pbw_seg_s {
    const uint8_t *p;
    size_t n;
} sl_pbw_seg_t;

enum {
    SL_PBW_VARINT = 0,
    SL_PBW_I64 = 1,
    SL_PBW_LEN = 2,
    SL_PBW_I32 = 5,
};

typedef struct sl_pbw_reader_s {
    const sl_pbw_seg_t *segs;
    size_t nsegs;
    size_t seg;  /* current segment */
    size_t off;  /* offset in it */
    size_t left; /* bytes this reader may still consume */
} sl_pbw_reader_t;

/* A reader over the whole of segs (empty segments are allowed). */
void sl_pbw_init(sl_pbw_reader_t *r, const sl_pbw_seg_t *segs, size_t nsegs);
static inline size_t sl_pbw_left(const sl_pbw_reader_t *r) { return r->left; }
/* A varint of at most 10 bytes. -EBADMSG when truncated or longer. */
int sl_pbw_varint(sl_pbw_reader_t *r, uint64_t *v);
/* A field key: *field >= 1 and a known wire type, else -EBADMSG. */
int sl_pbw_tag(sl_pbw_reader_t *r, uint32_t *field, uint32_t *wire_type);
/* Skips one value of wire_type (groups are refused: proto3 has none). */
int sl_pbw_skip(sl_pbw_reader_t *r, uint32_t wire_type);
/* A length-delimited value: reads its length, checks it against what
 * remains, returns a reader over exactly those bytes in *sub and moves r past
 * them. */
int sl_pbw_sub(sl_pbw_reader_t *r, sl_pbw_reader_t *sub);
/* Copies the next n bytes to dst (n <= left, else -EBADMSG and nothing is
 * consumed). */
int sl_pbw_copy(sl_pbw_reader_t *r, void *dst, size_t n);
/* Moves past n bytes (n <= left, else -EBADMSG). */
int sl_pbw_advance(sl_pbw_reader_t *r, size_t n);
/* If the next n bytes sit in one segment, points *p at them (no copy) and
 * moves past them; else returns -EAGAIN and consumes nothing. -EBADMSG when
 * n > left. */
int sl_pbw_contig(sl_pbw_reader_t *r, size_t n, const uint8_t **p);

#endif
