/* pipeline: a spec's stages compiled into units and run on one sample.
 *
 * A unit is what a split point may fall between. decode_jpeg directly
 * followed by random_resized_crop or center_crop becomes ONE unit that decodes
 * only the region it needs (DCT-scaled when the output size allows): a
 * sample's bytes then never depend on the plan (docs/design.md invariant 2).
 * Random stages draw from sl_rng keyed by (seed, epoch, index, spec stage
 * position), so a unit gives the same bytes on any host.
 *
 * Fused vs unfused: the fused unit's output differs from decode-then-crop by
 * DCT-domain downscaling only; tests/unit/test_pipeline.c bounds the mean
 * absolute difference (documented there and in docs/reference/spec.md "Fused decode"). A pipeline is
 * immutable after sl_pipeline_new and safe to run from many threads, each with
 * its own sl_pipe_scratch_t.
 *
 * normalize directly followed by to_chw stay TWO units, and a run that
 * covers both does them in one pass (sl_img_normalize_chw: bit-identical
 * floats, so no plan changes a byte). Not one unit, because units are wire
 * terms: a plan's split and a Batch's stage_to count them, and journals keep
 * them, so a unit that swallowed to_chw would shift every existing spec's
 * split points between versions (a newer client would skip the to_chw an
 * older worker had not run). The pass's CPU time is charged to to_chw and
 * normalize shows none; docs/planner.md says why that prices the split
 * between them correctly enough.
 *
 * A normalize with "on": "device" is no unit at all: the pixels stay uint8
 * and the consumer applies it (sl_spec_device_norm). */
#ifndef SL_PIPELINE_H
#define SL_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/spec/spec.h"
#include "common/sample/tensor.h"

#define SL_PIPE_MAX_UNITS SL_SPEC_MAX_STAGES

typedef struct sl_pipeline_s sl_pipeline_t;

/* Where a fused decode + random_resized_crop unit's time goes (sub_sec):
 * so a profile shows which stage to make cheaper. A sample through the
 * region path adds to all four; one decoded whole (PNG, WebP) to none. */
typedef enum {
    SL_SUB_SETUP = 0, /* probe, crop draw, header, decompressor start and end
                       * (a progressive file's entropy decoding of every scan) */
    SL_SUB_SKIP,      /* entropy decoding only, of the rows above the crop */
    SL_SUB_ROWS,      /* the crop's rows: entropy + IDCT + upsampling + colour */
    SL_SUB_RESAMPLE,  /* the antialiased resample to the output size */
    SL_SUB__COUNT
} sl_unit_sub_e;

/* Per-unit cost, accumulated by sl_pipeline_run when the caller asks. */
typedef struct sl_unit_stat_s {
    double cpu_sec;     /* thread CPU time spent in the unit */
    uint64_t out_bytes; /* bytes of the unit's output tensors */
    uint64_t samples;
    /* Parts of cpu_sec (thread CPU time too), fused decode + crop units
     * only; their sum stays below cpu_sec by the few clock reads between. */
    double sub_sec[SL_SUB__COUNT];
} sl_unit_stat_t;

/* Per-thread temporaries, so running allocates nothing in steady state. */
typedef struct sl_pipe_scratch_s {
    sl_tensor_t a, b;
    sl_tensor_t c;                /* records: the image being worked on */
    struct sl_tok_scratch_s *tok; /* records: tokenize's, made on first use */
    const void *tok_owner;        /* the tokenizer tok was made for */
    uint32_t *ids;                /* tokenize's output ids */
    size_t ids_cap;
    /* plugin units: this thread's host process for each (made on first use) */
    struct sl_plugin_conn_s *plugin[SL_PIPE_MAX_UNITS];
    /* ... and whether that unit failed twice in a row here: the job is
     * failing, so the samples still queued fail at once instead of each
     * waiting out the plugin's timeout. */
    uint8_t plugin_dead[SL_PIPE_MAX_UNITS];
    /* Set by sl_pipeline_run around each unit: where that unit adds its
     * sub_sec, or NULL when the caller takes no stats (no clock reads). */
    double *sub_sec;
} sl_pipe_scratch_t;

enum {
    SL_PIPE_NO_FUSE = 1 << 0, /* tests/benchmarks: run decode and crop separately */
};

int sl_pipeline_new(const sl_spec_t *spec, unsigned flags, sl_pipeline_t **ret, char *err,
                    size_t errlen);
void sl_pipeline_free(sl_pipeline_t *p);
/* Loads what units read from the data root (tokenize's ranks file), through
 * src's confinement. Call once, before the pipeline runs anywhere; a
 * pipeline without such units needs no call. Returns 0 or the open/parse
 * error (err names the file). Running a tokenize unit without it fails the
 * sample with -EINVAL. */
struct sl_source_s;
int sl_pipeline_load(sl_pipeline_t *p, const struct sl_source_s *src, char *err, size_t errlen);

uint32_t sl_pipeline_nunits(const sl_pipeline_t *p);
/* The SHA-256 of the files sl_pipeline_load read whose contents the output
 * depends on (tokenize's ranks file): 1 with out filled, 0 when it read
 * none. The prefix cache keys by it (docs/cache.md "The key"): a ranks
 * file replaced under the same name makes new keys. */
int sl_pipeline_content_hash(const sl_pipeline_t *p, uint8_t out[32]);
/* "decode_jpeg+random_resized_crop", "flip", ... */
const char *sl_pipeline_unit_name(const sl_pipeline_t *p, uint32_t unit);
/* A split in spec-stage terms (the spec's offload.split) as a unit boundary:
 * a split inside a fused unit moves to the unit's end. */
uint32_t sl_pipeline_unit_for_split(const sl_pipeline_t *p, uint32_t spec_split);

/* A random_erasing the consumer applies after its device normalize
 * (erase_on_device): the draws the stage would make here, from its own
 * stream (seed, epoch, index, stage), so the box depends on nothing a host
 * did before. noise_seed seeds the consumer's normal fill for "random". */
typedef struct sl_erase_box_s {
    uint32_t x, y, w, h;
    uint64_t noise_seed;
} sl_erase_box_t;
/* true and *ret when spec's stage erases this sample of img_h x img_w
 * pixels; false when it does not (p, no box in ten tries) or the stage is
 * no random_erasing. */
bool sl_pipe_erase_box(const sl_spec_t *spec, uint32_t stage, uint64_t epoch, uint64_t index,
                       uint32_t img_h, uint32_t img_w, sl_erase_box_t *ret);

void sl_pipe_scratch_init(sl_pipe_scratch_t *s);
void sl_pipe_scratch_free(sl_pipe_scratch_t *s);

/* Finds every plugin unit's stage in plugins (the host's own plugin_dir,
 * NULL for none; it must outlive p) by name and SHA-256, and checks its
 * parameters with the plugin. Returns 0; -ENOENT when this host lacks a
 * stage or has another build of it (err names the first; the others are
 * bound: a worker runs the units before it); -EINVAL when the plugin
 * refuses the parameters. A pipeline without plugin units needs no call.
 * An unbound plugin unit fails every sample with -ECHILD. */
struct sl_plugins_s;
int sl_pipeline_bind_plugins(sl_pipeline_t *p, const struct sl_plugins_s *plugins, char *err,
                             size_t errlen);

/* Runs units [from, to) on io in place. For from = 0 io holds the encoded
 * bytes (SL_DT_BYTES); afterwards it holds the output of unit to-1. stats, if
 * not NULL, has sl_pipeline_nunits entries; units run add to theirs.
 * Errors are the decoder's codes (common/image/jpeg.h), -EINVAL for a tensor the
 * unit cannot take (e.g. from a peer that sent the wrong dtype). */
int sl_pipeline_run(const sl_pipeline_t *p, uint32_t from, uint32_t to, uint64_t epoch,
                    uint64_t index, sl_tensor_t *io, sl_pipe_scratch_t *scratch,
                    sl_unit_stat_t *stats, char *err, size_t errlen);

#endif
