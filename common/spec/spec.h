/* spec: the pipeline spec (docs/design.md "Pipeline spec") parsed and validated.
 * The same parser runs in the CLI, the client library and the dispatcher, so
 * a spec error reads the same wherever it is found. Errors name the file (or
 * the name the caller gave the buffer), the line and the field path, e.g.
 *   "train.json:7: stages[1].size: must be an integer in 1..16384". */
#ifndef SL_SPEC_H
#define SL_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spec/spec_aug.h"

#define SL_SPEC_MAX_STAGES 32
#define SL_SPEC_MAX_BYTES (1u << 20) /* a spec larger than 1 MiB is refused */
#define SL_SPEC_PATH_MAX 1024
#define SL_SPEC_NAME_MAX 64 /* "name": what status pages call the job */

typedef enum {
    SL_OP_DECODE_JPEG = 0,
    SL_OP_RANDOM_RESIZED_CROP,
    SL_OP_RESIZE,
    SL_OP_CENTER_CROP,
    SL_OP_FLIP,
    SL_OP_NORMALIZE,
    SL_OP_TO_CHW,
    /* Appended (ops travel by name; the numbering is internal). */
    SL_OP_DECODE_IMAGE, /* JPEG or PNG, by the bytes' magic */
    SL_OP_IMAGE_TILES,  /* records: any-resolution tiling */
    SL_OP_TOKENIZE,     /* records: text -> token ids (tiktoken BPE) */
    SL_OP_TEMPLATE,     /* records: image placeholders + text ids -> input_ids */
    SL_OP_PLUGIN,       /* a stage from a plugin_dir (common/plugin/sluice_plugin.h) */
    /* Built-in augmentations (spec_stages_aug.c, common/image/augment.h). */
    SL_OP_COLOR_JITTER,
    SL_OP_RANDOM_GRAYSCALE,
    SL_OP_GAUSSIAN_BLUR,
    SL_OP_RANDOM_ERASING,
    SL_OP_RANDOM_ROTATION,
    SL_OP_RANDOM_AFFINE,
    SL_OP_SOLARIZE,
    SL_OP_POSTERIZE,
    SL_OP_AUTO_CONTRAST,
    SL_OP_EQUALIZE,
    SL_OP_TRIVIAL_AUGMENT_WIDE,
    SL_OP_RAND_AUGMENT,
    /* torchvision recipes as written (issue #38). */
    SL_OP_VERTICAL_FLIP,
    SL_OP_RANDOM_CROP,   /* RandomCrop with padding (CIFAR); an augmentation row */
    SL_OP_RANDOM_APPLY,  /* RandomApply over nested augmentations */
    SL_OP_RANDOM_CHOICE, /* RandomChoice over nested augmentations */
    SL_OP_DECODE_VIDEO,  /* records: clips -> sampled frames as images (issue #37) */
    SL_OP__COUNT
} sl_op_e;

/* resize / random_resized_crop "interpolation" (common/image/imgops.h has
 * the same order). */
typedef enum {
    SL_RESIZE_INTERP_BILINEAR = 0, /* the default: Pillow's, antialiased */
    SL_RESIZE_INTERP_BICUBIC,      /* Pillow's BICUBIC (timm's recipes) */
    SL_RESIZE_INTERP_NEAREST,      /* torch's nearest on tensors */
} sl_resize_interp_e;

typedef enum {
    SL_SRC_IMAGEFOLDER = 0,
    SL_SRC_TAR,
    SL_SRC_FILELIST,
    SL_SRC_WEBDATASET, /* multimodal records from tar shards (common/sample/record.h) */
    SL_SRC_JSONL,      /* multimodal records from a JSON-lines manifest */
} sl_source_type_e;

/* tokenize "encoding": picks the pre-tokenization pattern and the special
 * tokens that go with the ranks file. */
typedef enum {
    SL_TOKENIZER_CL100K = 0,
    SL_TOKENIZER_O200K,
    SL_TOKENIZER_GPT2,
} sl_tokenizer_enc_e;

#define SL_SPEC_VOCAB_MAX 256 /* tokenize "vocab": a path under the data root */
#define SL_SPEC_PLUGIN_NAME_MAX 64
#define SL_SPEC_PLUGIN_PARAMS_MAX 1024 /* a plugin's "params", as canonical JSON text */

typedef enum {
    SL_OFFLOAD_AUTO = 0, /* planner decides (default) */
    SL_OFFLOAD_OFF,      /* everything on the client */
    SL_OFFLOAD_ALL,      /* every stage remote (tf.data service behaviour) */
    SL_OFFLOAD_FASTFLOW, /* FastFlow's Algorithm 1 */
    SL_OFFLOAD_FIXED,    /* {"split": K, "local_share": F} */
} sl_offload_e;

typedef enum {
    SL_ON_ERROR_SKIP = 0, /* bad sample: counted skip with a reason (default) */
    SL_ON_ERROR_FAIL,     /* bad sample: the job fails */
} sl_on_error_e;

typedef enum {
    SL_RANK_DROP = 0, /* every rank gets floor(n / world) positions (drop_last) */
    SL_RANK_PAD,      /* every rank gets ceil(n / world): the first positions repeat */
} sl_rank_padding_e;

/* Compression of the samples workers send (docs/protocol.md "Compressed
 * samples"). */
typedef enum {
    SL_COMPRESS_OFF = 0, /* raw tensors on the wire (default) */
    SL_COMPRESS_ZSTD,    /* always: zstd, after a left-neighbour delta for uint8 */
} sl_compress_e;

/* The prefix cache (docs/cache.md): "auto" lets the worker (and the
 * client's local share) cache the spec's deterministic prefix when it has
 * a cache_dir; "off" never does. */
typedef enum {
    SL_CACHE_AUTO = 0, /* default */
    SL_CACHE_OFF,
} sl_cache_mode_e;

#define SL_SPEC_WORLD_MAX 4096

/* "batching": how samples are grouped into each rank's batches
 * (common/order/balance.h, docs/records.md "Balanced batching"). */
typedef enum {
    SL_BATCHING_COUNT = 0, /* equal counts per rank (DistributedSampler), the default */
    SL_BATCHING_BALANCED,  /* equal predicted trainer cost per rank and step */
    SL_BATCHING_PACKED,    /* M packs per rank and step, counts free (common/order/pack.h) */
} sl_batching_e;

typedef struct sl_batching_s {
    sl_batching_e mode;
    uint32_t microbatches; /* per rank and step, each of batch_size samples; default 1 */
    uint64_t token_budget; /* per microbatch, 0 = none (packed: per pack, > 0) */
    uint64_t tile_budget;  /* packed: tiles per pack, 0 = none */
    uint32_t lookahead;    /* steps dealt together, default 4 (packed: 8) */
    double a, b, c, d;     /* cost = a tokens + b tokens^2 + c tiles + d */
} sl_batching_t;

/* "batch_transforms": MixUp / CutMix over a whole batch, in the client where
 * the batch is handed out (torchvision references/classification
 * RandomMixup / RandomCutmix; client/lib/mix.h). Labels become soft
 * [n x num_classes]. */
typedef enum { SL_BATCH_TF_MIXUP = 0, SL_BATCH_TF_CUTMIX, SL_BATCH_TF__COUNT } sl_batch_tf_e;
#define SL_SPEC_MAX_BATCH_TFS 2
typedef struct sl_batch_tf_s {
    sl_batch_tf_e op;
    double alpha; /* lambda ~ Beta(alpha, alpha), alpha > 0 */
    double p;     /* probability the chosen transform applies to a batch */
} sl_batch_tf_t;
/* template: the ids every sequence has whatever its data (bos, eos, and with
 * chat the longest role marker plus the end marker): max_seq_len must be
 * above it. */
struct sl_stage_spec_s;
uint32_t sl_tmpl_fixed_ids(const struct sl_stage_spec_s *st);
/* "mixup", "cutmix"; "unknown" outside the enum. */
const char *sl_batch_tf_name(sl_batch_tf_e op);

/* template's chat markers: one per role (system, user, assistant: the
 * order of sl_role_e in common/sample/record.h), then the end of a turn;
 * each at most SL_TMPL_MARKER_MAX ids. */
#define SL_TMPL_MARKERS 4
#define SL_TMPL_END 3
#define SL_TMPL_MARKER_MAX 8

/* One stage: its op and a union of the op's parameters (the size of the
 * largest member, the augmentations'). The members are anonymous, so a
 * field reads by its name (st->size_h, st->vocab, st->aug.p); only the
 * fields of the stage's own op hold anything. Parse zeroes a stage before
 * filling it, so parsed stages compare as bytes except for the owned
 * strings (vocab, plugin_params): heap copies owned by the spec, freed by
 * sl_spec_clear, duplicated by sl_spec_copy.
 *
 * Sizes are {height, width}; an int size N in JSON means:
 *  - resize: the shorter side becomes N, aspect kept (size_h = size_w = N,
 *    resize_shorter = true); [H, W] resizes to exactly H x W.
 *  - center_crop / random_resized_crop: N means N x N. */
typedef struct sl_stage_spec_s {
    sl_op_e op;
    union {
        struct { /* random_resized_crop, resize, center_crop */
            uint32_t size_h, size_w;
            bool resize_shorter;
            double scale[2]; /* random_resized_crop, default {0.08, 1.0}, 0 < a <= b <= 1 */
            double ratio[2]; /* random_resized_crop, default {3/4, 4/3}, 0 < a <= b */
            /* resize, random_resized_crop "interpolation" (sl_resize_interp_e):
             * 0, bilinear, is the default, so a zeroed stage is today's. */
            uint32_t resize_interp;
        };
        double p;          /* flip, vertical_flip probability, default 0.5, 0..1 */
        struct {           /* normalize */
            float mean[3]; /* per channel, on values scaled to 0..1 */
            float std[3];  /* > 0 */
            /* "on": "device": the pipeline leaves the pixels uint8 and the
             * consumer applies the normalization on its training device (no
             * unit, no CPU work here; sl_spec_device_norm). false: "cpu",
             * float32 out. */
            bool on_device;
        };
        /* image_tiles: tile x tile crops, min..max tiles per image, plus a
         * thumbnail of the whole image when more than one tile. */
        struct {
            uint32_t tile, min_tiles, max_tiles;
            bool thumbnail;
        };
        /* tokenize: ranks file under the data root (owned, shorter than
         * SL_SPEC_VOCAB_MAX), its encoding, truncation (0: none),
         * special-token text recognised (true) or plain (false). */
        struct {
            char *vocab;
            sl_tokenizer_enc_e encoding;
            uint32_t max_tokens;
            bool allow_special;
        };
        /* template: each image tile becomes tokens_per_tile image_token ids,
         * images first, then the text's ids; bos/eos around it (-1: none).
         * chat: each turn of a conversation between its role's marker ids
         * (tmpl_marker[role], sl_role_e order) and the end marker's
         * (tmpl_marker[SL_TMPL_END]); labels: emit LABELS (ignore_index
         * but on the assistant's ids, or on all but image ids with
         * train_all); max_seq_len (0: none) caps the sequence, by dropping
         * trailing images then truncating, or as a skip (skip_long). */
        struct {
            int64_t image_token, bos, eos;
            uint32_t tokens_per_tile;
            bool chat, labels, train_all, skip_long;
            int32_t ignore_index;
            uint32_t max_seq_len;
            uint32_t tmpl_nmarker[SL_TMPL_MARKERS];
            uint32_t tmpl_marker[SL_TMPL_MARKERS][SL_TMPL_MARKER_MAX];
        };
        /* plugin: the stage's name, the SHA-256 of the plugin file that
         * must provide it, and its parameters (a JSON object's canonical
         * text, owned, shorter than SL_SPEC_PLUGIN_PARAMS_MAX). */
        struct {
            char plugin[SL_SPEC_PLUGIN_NAME_MAX];
            char plugin_sha256[65];
            char *plugin_params;
        };
        sl_aug_spec_t aug; /* the augmentation ops' parameters (spec_aug.h) */
        /* decode_video (spec_stages_video.c): "sampling" (0 uniform, 1
         * fps), "frames" (uniform), "fps" and "max_frames" (fps),
         * "random_offset", decoder "threads", "timeout_sec" per clip. */
        struct {
            uint32_t v_sampling, v_frames, v_max_frames, v_threads;
            double v_fps, v_timeout_sec;
            bool v_random_offset;
        };
    };
} sl_stage_spec_t;

typedef struct sl_spec_s {
    sl_source_type_e source_type;
    char source_path[SL_SPEC_PATH_MAX]; /* relative to the data root */
    bool shuffle;                       /* default true */
    /* Shuffle by blocks of this many consecutive samples (then within a
     * window of SL_SHUFFLE_WINDOW_BLOCKS blocks), so a split reads a few
     * sequential runs of its shards. 0: every sample shuffled alone (the
     * default, except webdataset: 64). common/order/ranks.h. */
    uint32_t shuffle_block;
    uint64_t seed;                      /* default 0 */

    sl_stage_spec_t stages[SL_SPEC_MAX_STAGES];
    uint32_t nstages;

    uint32_t batch_size; /* default 32, 1..65536 */
    uint32_t epochs;     /* default 1, 1..1000000 */
    bool drop_last;      /* default false: the last short batch is delivered */
    bool deterministic;  /* default false: batches in arrival order */
    sl_offload_e offload;
    uint32_t split;     /* SL_OFFLOAD_FIXED: stages run remotely, 0..nstages */
    double local_share; /* SL_OFFLOAD_FIXED: fraction of samples done locally, 0..1 */
    sl_on_error_e on_error;
    uint64_t max_pixels; /* decompression-bomb limit, default 100 000 000 */
    /* Multi-rank jobs (common/order/ranks.h): this consumer's rank of world_size
     * (default 0 of 1) and how an epoch that does not divide is shared. */
    uint32_t world_size;
    uint32_t rank;
    sl_rank_padding_e rank_padding;
    char name[SL_SPEC_NAME_MAX]; /* "" when the spec has none */
    sl_compress_e compress;
    sl_cache_mode_e cache; /* "cache": default auto */
    sl_batching_t batching;
    /* A resumed job: the epochs its predecessors consumed part of
     * (common/spec/resume.h), NULL for none. Owned by the spec that parsed
     * (or sl_spec_copy'd) it (sl_spec_clear); a struct copy borrows it. */
    struct sl_resume_s *resume;
    /* Batch transforms (none by default: nbatch_tfs 0), one of them drawn
     * per batch when there are two; num_classes (0 when absent, else >= 2)
     * is the soft labels' width. */
    uint32_t nbatch_tfs;
    sl_batch_tf_t batch_tfs[SL_SPEC_MAX_BATCH_TFS];
    uint32_t num_classes;
    /* "mix" instead of "source" (common/spec/mix.h, docs/mixing.md), NULL
     * for a single source. Owned like resume. */
    struct sl_mix_s *mix;
} sl_spec_t;

/* Parses a spec from memory. name is used in error messages (a file name, or
 * "<rpc>" for a spec that arrived over the wire). Returns 0, -EINVAL for an
 * invalid spec (err says where and why), -E2BIG above SL_SPEC_MAX_BYTES. */
int sl_spec_parse(const char *name, const char *buf, size_t len, sl_spec_t *ret_spec,
                  char *err, size_t errlen);
/* Frees what a parsed (or copied) spec owns: its resume section and its
 * stages' strings (vocab, plugin_params), leaving those pointers NULL;
 * the other fields stay. NULL ok. */
void sl_spec_clear(sl_spec_t *spec);
/* A deep copy of src into dst (whose old contents are overwritten, not
 * freed): dst then owns its own resume section and stage strings, to be
 * released with sl_spec_clear. A plain struct copy only borrows them (and
 * must never be cleared). Returns 0, or -ENOMEM with dst as sl_spec_init
 * leaves it. */
int sl_spec_copy(sl_spec_t *dst, const sl_spec_t *src);
/* Reads and parses a file; I/O errors are reported with the path. */
int sl_spec_parse_file(const char *path, sl_spec_t *ret_spec, char *err, size_t errlen);

/* Default spec values (what parse fills for absent keys). */
void sl_spec_init(sl_spec_t *spec);
/* What an op is (its row in the op table, common/spec/spec_ops.c). */
enum {
    SL_OPF_DECODE = 1u << 0,       /* encoded bytes -> uint8 HWC pixels */
    SL_OPF_GEOMETRY = 1u << 1,     /* random_resized_crop, resize, center_crop */
    SL_OPF_AUGMENT = 1u << 2,      /* a built-in augmentation (spec_aug.h) */
    SL_OPF_RANDOM = 1u << 3,       /* draws from the sample's random stream */
    SL_OPF_RECORD = 1u << 4,       /* needs a multimodal source (records) */
    SL_OPF_ON_PIXELS = 1u << 5,    /* needs decoded images before it */
    SL_OPF_WHOLE = 1u << 6,        /* works on whole uint8 HWC images */
    SL_OPF_FUSES_DECODE = 1u << 7, /* right after a decode, one unit with it */
};
/* "decode_jpeg", ...; "unknown" outside the enum. */
const char *sl_op_name(sl_op_e op);
/* SL_OPF_* of op; 0 outside the enum. */
unsigned sl_op_flags(sl_op_e op);
/* Does the spec use plugin stages? */
int sl_spec_has_plugins(const sl_spec_t *spec);
/* Is op one of the built-in augmentations (spec_aug.h)? */
bool sl_op_is_augment(sl_op_e op);
/* Does op draw from the sample's random stream (a deterministic op's
 * output depends on its input alone)? */
bool sl_op_draws_random(sl_op_e op);
/* Does the spec end in uint8 with a normalize its consumer applies ("on":
 * "device")? Then true, and its mean and std (either may be NULL). */
bool sl_spec_device_norm(const sl_spec_t *spec, float ret_mean[3], float ret_std[3]);
const char *sl_offload_name(sl_offload_e o);
/* Does the source yield multimodal records (webdataset, jsonl, a filelist
 * whose stages decode_video)? */
bool sl_spec_is_record(const sl_spec_t *spec);
const char *sl_tokenizer_enc_name(sl_tokenizer_enc_e e);
/* "imagefolder", "tar", ... as the spec spells it. */
const char *sl_source_type_name(sl_source_type_e t);
/* Parses the CLI's --offload form: off|all|auto|fastflow|K:F. */
int sl_offload_parse(const char *s, sl_offload_e *ret_mode, uint32_t *ret_split,
                     double *ret_share, char *err, size_t errlen);

/* Canonical JSON of a parsed spec (every field, defaults filled in): what
 * the client sends to the dispatcher after applying CLI overrides, and what a
 * spec hash is taken over. Returns a malloc'd string, NULL on ENOMEM (or for
 * a spec no parse yields: seed above INT64_MAX, an enum out of range).
 * sl_spec_parse(sl_spec_to_json(s)) yields a spec equal to s. */
char *sl_spec_to_json(const sl_spec_t *spec);

#endif
