/* record: a multimodal sample (text, token ids, metadata, zero or more
 * images) as one self-describing byte string. It is what flows through the
 * pipeline, over the wire and into a batch when the source is webdataset or
 * jsonl, held in an sl_tensor_t of dtype SL_DT_RECORD (shape {nbytes, 1, 1}).
 *
 * One buffer rather than a struct of tensors: everything that already
 * carries a sample (executor, worker streams, compression, batcher,
 * exactly-once, splits) carries a record unchanged, and the bytes are the
 * canonical encoding that `--digests` hashes (docs/records.md).
 *
 * Layout, little-endian:
 *   header 16 B   "SLR1", u32 nfields, u64 total bytes (header included)
 *   field  40 B   u8 kind, u8 dtype, u8 layout, u8 0, u32 count,
 *                 u32 h, u32 w, u32 c, u32 src_h, u32 src_w, u32 0, u64 nbytes
 *          then   nbytes of payload, zero-padded to a multiple of 8
 * Fields come in kind order; only image kinds repeat (one field per image,
 * in the sample's image order). The writer zeroes every pad byte, so equal
 * content is equal bytes on every host. The parser checks all of this: a
 * record is also what a peer sends. */
#ifndef SL_RECORD_H
#define SL_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "common/sample/tensor.h"

#define SL_REC_MAGIC "SLR1"
#define SL_REC_HEADER 16u
#define SL_REC_FIELD_HEADER 40u
#define SL_REC_MAX_IMAGES 32u /* images (and clips) a sample names; more is a counted skip */
/* Decoded images in one record: decode_video makes a clip's sampled frames
 * images (its `frames` / `max_frames` go up to this), still images and
 * frames together; more is a counted skip (too_many_images). The bytes stay
 * bounded by the record's 2 GiB and decode_video's 1 GiB per clip. */
#define SL_REC_MAX_FRAMES 256u
#define SL_REC_MAX_FIELDS (8u + SL_REC_MAX_FRAMES)

typedef enum {
    SL_RF_KEY = 1,       /* bytes: UTF-8 sample key (webdataset key, jsonl "id") */
    SL_RF_LABEL = 2,     /* uint32 x 1: the label as int32 bits */
    SL_RF_TEXT = 3,      /* bytes: UTF-8 text */
    SL_RF_META = 4,      /* bytes: a JSON object */
    SL_RF_TOKENS = 5,    /* uint32 x h: the text's token ids (tokenize) */
    SL_RF_INPUT_IDS = 6, /* uint32 x h: the sequence the model sees (template) */
    SL_RF_IMAGE_ENC = 7, /* bytes: one encoded image (JPEG or PNG) */
    SL_RF_IMAGE = 8,     /* uint8/float32 pixels h x w x c (layout says the order) */
    SL_RF_TILES = 9,     /* count tiles of c x h x w (CHW), from one image */
    /* bytes: one encoded clip (mp4/mov, mkv/webm); decode_video turns it
     * into IMAGE fields, one per frame */
    SL_RF_VIDEO_ENC = 10,
    SL_RF_TURNS = 11,    /* uint32 x h x 4: a conversation's turns (SL_RF_TURN_*) */
    SL_RF_LABELS = 12,   /* uint32 x h: int32 bits, one per input id (template) */
    SL_RF__MAX = 12,
} sl_rf_kind_e;

/* A TURNS field is h rows of SL_RF_TURN_WORDS uint32: the turn's role
 * (sl_role_e), where its text starts in the TEXT field and how many bytes
 * it has there, and the end of its token ids in TOKENS (cumulative; 0 until
 * tokenize has run). Kinds 10 and 11 come after the images only because
 * kinds are numbered in the order they were added and renumbering would
 * change every record's bytes. */
#define SL_RF_TURN_WORDS 4u
enum { SL_RF_TURN_ROLE = 0, SL_RF_TURN_OFF = 1, SL_RF_TURN_LEN = 2, SL_RF_TURN_TOK_END = 3 };

typedef enum {
    SL_ROLE_SYSTEM = 0,
    SL_ROLE_USER = 1,      /* LLaVA "human", chat "user" */
    SL_ROLE_ASSISTANT = 2, /* LLaVA "gpt", chat "assistant" */
    SL_ROLE__COUNT = 3,
} sl_role_e;

/* One field. In a parsed record data points into the parsed buffer. src_h
 * and src_w are the decoded image's size (IMAGE, TILES; 0 elsewhere), kept
 * through crops and tiling because a sample's shape is part of what a
 * consumer and the cost model need. */
typedef struct sl_rfield_s {
    sl_rf_kind_e kind;
    sl_dtype_e dtype;
    sl_layout_e layout;
    uint32_t count, h, w, c;
    uint32_t src_h, src_w;
    size_t nbytes;
    const uint8_t *data;
} sl_rfield_t;

/* A parsed record: a view; valid while the buffer it was parsed from is. */
typedef struct sl_rec_s {
    uint32_t n;
    sl_rfield_t f[SL_REC_MAX_FIELDS];
} sl_rec_t;

/* Checks and indexes a record. Returns 0 or -EBADMSG (err says what is
 * wrong: magic, sizes, order, padding, a shape that does not match nbytes). */
int sl_rec_parse(const uint8_t *buf, size_t len, sl_rec_t *ret, char *err, size_t errlen);

/* The first field of a kind, or NULL. */
const sl_rfield_t *sl_rec_find(const sl_rec_t *r, sl_rf_kind_e kind);
/* How many fields of a kind. */
uint32_t sl_rec_count(const sl_rec_t *r, sl_rf_kind_e kind);

/* Writing: begin, add fields in kind order, finish. out becomes a record
 * tensor; its data may move on every add. */
int sl_rec_begin(sl_tensor_t *out);
/* Appends the field described by f (data ignored) and returns where its
 * f->nbytes of payload go, valid until the next add. Returns 0, -EINVAL (a
 * kind out of order, a non-image kind twice, more than SL_REC_MAX_FIELDS,
 * a shape that does not match nbytes), -EOVERFLOW, -ENOMEM. */
int sl_rec_add(sl_tensor_t *out, const sl_rfield_t *f, uint8_t **ret_payload);
/* sl_rec_add plus a copy of f->data. */
int sl_rec_add_copy(sl_tensor_t *out, const sl_rfield_t *f);
/* Byte-string fields (KEY, TEXT, META, IMAGE_ENC) and the label. */
int sl_rec_add_bytes(sl_tensor_t *out, sl_rf_kind_e kind, const void *data, size_t n);
int sl_rec_add_label(sl_tensor_t *out, int32_t label);
/* Writes the header's counts; the record is complete. */
void sl_rec_finish(sl_tensor_t *out);

/* Payload bytes a field's shape implies (count x h x w x c x dtype size),
 * or SIZE_MAX when it overflows. */
size_t sl_rec_shape_bytes(const sl_rfield_t *f);
int32_t sl_rec_label(const sl_rec_t *r); /* -1 without a label field */
/* Word i of a uint32 field (TOKENS, INPUT_IDS, TURNS, LABELS); the caller
 * keeps i below count x h x w x c. */
uint32_t sl_rec_u32(const sl_rfield_t *f, size_t i);
/* A role's name ("system", "user", "assistant") and back: LLaVA's "human"
 * and "gpt" are user and assistant. Returns the role or -EINVAL. */
const char *sl_role_name(sl_role_e role);
int sl_role_parse(const char *name);
const char *sl_rf_kind_name(sl_rf_kind_e kind);

#endif
