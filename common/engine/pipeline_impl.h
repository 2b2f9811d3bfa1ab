/* pipeline_impl: what pipeline.c (image units) shares with pipe_record.c
 * (the same units over a record's fields, and the record-only units). Not a
 * public API. */
#ifndef SL_PIPELINE_IMPL_H
#define SL_PIPELINE_IMPL_H

#include "common/base/rng.h"
#include "common/engine/pipeline.h"
#include "common/sample/record.h"
#include "common/spec/mix.h"
#include "common/spec/spec_layout.h"
#include "common/text/tokenizer.h"

/* What a unit runs. UNIT_NONE (0) is no kind: an op without a row in
 * pipeline.c's table of unit makers fails sl_pipeline_new. */
typedef enum {
    UNIT_NONE = 0,
    UNIT_DECODE,
    UNIT_DECODE_RRC,
    UNIT_DECODE_CENTER_CROP,
    UNIT_RRC,
    UNIT_RESIZE,
    UNIT_CENTER_CROP,
    UNIT_FLIP,
    UNIT_NORMALIZE,
    UNIT_TO_CHW,
    UNIT_TILES, /* records only, from here on */
    UNIT_TOKENIZE,
    UNIT_TEMPLATE,
    UNIT_PLUGIN,  /* a plugin_dir's stage, in a host process (pipe_plugin.c) */
    UNIT_AUGMENT, /* any augmentation op (pipe_augment.c); images and records */
    UNIT_VFLIP,
    UNIT_VIDEO, /* decode_video: records only (pipe_video.c) */
    UNIT__COUNT
} unit_kind_e;

/* One unit: its place in the spec (the layout's, common/spec/spec_layout.h)
 * and what the engine made of it. */
typedef struct {
    unit_kind_e kind;
    uint32_t first_stage;      /* spec position of the first stage it covers */
    uint32_t nstages;          /* spec stages covered (2 when fused) */
    uint32_t rng_stream;       /* spec position of the stage that draws randomness */
    const sl_stage_spec_t *st; /* the parameters (the crop's, for fused units) */
    /* normalize directly followed by to_chw: when one run covers both, they
     * run as one pass (sl_img_normalize_chw), charged to to_chw. */
    int pass_with_next;
    const char *name;                      /* the layout's */
    const struct sl_plugin_info_s *plugin; /* UNIT_PLUGIN: bound by sl_pipeline_bind_plugins */
} unit_t;

struct sl_pipeline_s {
    sl_spec_t spec;                     /* own deep copy (sl_spec_copy): units point into it */
    sl_layout_t layout;                 /* what the units were made from; names point into it */
    sl_tokenizer_t *tok;                /* tokenize's ranks (sl_pipeline_load); NULL before */
    uint8_t tok_sha[32];                /* SHA-256 of the ranks file's bytes (with tok) */
    const struct sl_plugins_s *plugins; /* the host's plugin_dir (bind); not owned */
    unit_t units[SL_PIPE_MAX_UNITS];
    uint32_t nunits;
    /* A mix with per-source stages (pipe_mix.c): bit u of skip[j], unit u
     * is left out for source j's samples; any: some bit is set. */
    uint32_t mix_skip[SL_MIX_MAX_SOURCES];
    bool mix_any;
};

/* Fills p's mix_skip from its spec's mix (-EINVAL, err naming the source,
 * for a source that keeps only part of a fused unit). */
int sl_pipe_mix_init(sl_pipeline_t *p, char *err, size_t errlen);
/* The units sample index leaves out (0: none); -EINVAL (err says which
 * source and sample) when io is a record with images or clips and its
 * source leaves out an image unit. */
int sl_pipe_mix_skip(const sl_pipeline_t *p, uint64_t index, const sl_tensor_t *io, uint32_t from,
                     uint32_t to, uint32_t *ret_skip, char *err, size_t errlen);

/* Runs an image unit on one image tensor (encoded bytes for the decode
 * units), drawing from stream; the output replaces io. For the decode
 * units *ret_src_h / *ret_src_w get the decoded image's full size. */
int sl_pipe_image_unit(const sl_pipeline_t *p, const unit_t *u, uint64_t epoch, uint64_t index,
                       uint64_t stream, sl_tensor_t *io, sl_pipe_scratch_t *sc, uint32_t *ret_src_h,
                       uint32_t *ret_src_w, char *err, size_t errlen);
/* One unit on a record (io holds an SL_DT_RECORD tensor). */
int sl_pipe_record_unit(const sl_pipeline_t *p, const unit_t *u, uint64_t epoch, uint64_t index,
                        sl_tensor_t *io, sl_pipe_scratch_t *sc, char *err, size_t errlen);

/* A plugin unit on one image (pipe_plugin.c). */
int sl_pipe_plugin_unit(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                        sl_pipe_scratch_t *sc, char *err, size_t errlen);
/* Ends sc's plugin host processes. */
void sl_pipe_plugin_scratch_free(sl_pipe_scratch_t *sc);
/* An augmentation unit on one uint8 HWC image, drawing from rng; the
 * result replaces io (pipe_augment.c). */
int sl_pipe_augment(const unit_t *u, sl_rng_t *rng, sl_tensor_t *io, sl_pipe_scratch_t *sc,
                    char *err, size_t errlen);

/* Releases the tokenizer scratch of sc (pipe_text.c). */
void sl_pipe_tok_scratch_free(sl_pipe_scratch_t *sc);
/* The text units on a parsed record, writing the new record into out. */
int sl_pipe_tokenize(const sl_pipeline_t *p, const unit_t *u, const sl_rec_t *in, sl_tensor_t *out,
                     sl_pipe_scratch_t *sc, char *err, size_t errlen);
int sl_pipe_template(const unit_t *u, const sl_rec_t *in, sl_tensor_t *out, char *err,
                     size_t errlen);
/* decode_video on a parsed record: its clips' frames and its still images
 * as IMAGE fields, written into out (pipe_video.c). */
int sl_pipe_video(const sl_pipeline_t *p, const unit_t *u, uint64_t epoch, uint64_t index,
                  const sl_rec_t *in, sl_tensor_t *out, sl_pipe_scratch_t *sc, char *err,
                  size_t errlen);
/* Copies in's fields whose kind is in [lo, hi] to out. */
int sl_pipe_copy_kinds(const sl_rec_t *in, sl_tensor_t *out, sl_rf_kind_e lo, sl_rf_kind_e hi);

#endif
