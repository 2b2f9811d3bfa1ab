/* spec_layout: the units a spec's stages compile into, computed from the
 * spec alone (no decoder, no pipeline): how many, their names, which spec
 * stages each covers, and where a split in spec-stage terms falls. The
 * engine's sl_pipeline_new instantiates exactly this layout
 * (common/engine/pipeline.h), so a planner that only needs counts and
 * names asks here and cannot drift from what workers run.
 *
 * A unit is what a split point may fall between: one stage, or a decode
 * directly followed by a crop that fuses into it (SL_OPF_FUSES_DECODE); a
 * normalize "on": "device" is no unit. Any thread; pure. */
#ifndef SL_SPEC_LAYOUT_H
#define SL_SPEC_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/spec/spec.h"

#define SL_LAYOUT_MAX_UNITS SL_SPEC_MAX_STAGES
#define SL_LAYOUT_NAME_MAX 64

enum {
    SL_LAYOUT_NO_FUSE = 1u << 0, /* tests/benchmarks: decode and crop as two units */
};

typedef struct sl_layout_unit_s {
    sl_op_e op;           /* the op of its first stage */
    uint32_t first_stage; /* spec position of the first stage it covers */
    uint32_t nstages;     /* spec stages covered: 2 when fused */
    uint32_t param_stage; /* the stage whose parameters it runs (the crop's, fused) */
    uint32_t rng_stream;  /* the spec position its random draws are keyed by */
    /* normalize directly followed by to_chw: a run covering both does them
     * in one pass (pipeline.h). */
    bool pass_with_next;
    char name[SL_LAYOUT_NAME_MAX]; /* "decode_jpeg+random_resized_crop", "flip", ... */
} sl_layout_unit_t;

typedef struct sl_layout_s {
    uint32_t nunits;
    sl_layout_unit_t units[SL_LAYOUT_MAX_UNITS];
} sl_layout_t;

/* Fills *ret with spec's units (flags: SL_LAYOUT_*). Returns 0, or -EINVAL
 * for a spec no parse yields (too many stages, an op out of range); *ret
 * is then untouched. */
int sl_spec_layout(const sl_spec_t *spec, unsigned flags, sl_layout_t *ret);
/* The unit's name, "?" past the end. */
const char *sl_layout_unit_name(const sl_layout_t *l, uint32_t unit);
/* A split in spec-stage terms (the spec's offload.split) as a unit
 * boundary: a split inside a fused unit moves to the unit's end. */
uint32_t sl_layout_unit_for_split(const sl_layout_t *l, uint32_t spec_split);

#endif
