/* mix: the "mix" section of a spec (docs/mixing.md): several sources blended
 * by weight into one epoch order (common/order/blend.h), optionally with a
 * schedule that changes the weights at step boundaries.
 *
 * A parsed mix knows its sources' kinds and paths; their sizes (count) and
 * the resolved samples_per_epoch are filled in by the host that opens the
 * data (sl_mix_resolve, from common/data/source_mix.c) and then travel in
 * the canonical JSON, so every host (client, workers, dispatcher) computes
 * the same blend from the spec alone. Owned by the spec that parsed it
 * (sl_spec_clear frees it, sl_spec_copy duplicates it). */
#ifndef SL_MIX_H
#define SL_MIX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spec/spec.h"

#define SL_MIX_MAX_SOURCES 16
#define SL_MIX_NAME_MAX 64                 /* a source's "name": 1..63 bytes */
#define SL_MIX_MAX_SCHEDULE 64             /* "schedule" entries */
#define SL_MIX_SPE_MAX (UINT64_C(1) << 32) /* samples_per_epoch bound */

typedef enum {
    SL_MIX_STOP_ALL = 0, /* "all_exhausted" (default): every source seen whole */
    SL_MIX_STOP_FIRST,   /* "first_exhausted": no source repeats */
    SL_MIX_NSTOP
} sl_mix_stop_e;

typedef struct sl_mix_source_s {
    char name[SL_MIX_NAME_MAX];
    double weight; /* > 0; normalized by the blend */
    sl_source_type_e type;
    char path[SL_SPEC_PATH_MAX]; /* relative to the data root */
    uint64_t count;              /* samples (0: not resolved yet) */
    /* Its own "stages" (docs/mixing.md "Per-source stages"): a subsequence
     * of the job's; bit i of keep: the job's stage i runs on its samples. */
    bool own_stages;
    uint32_t keep;
} sl_mix_source_t;

/* From global step from_step on, the weights are these (by source, >= 0,
 * not all 0). */
typedef struct sl_mix_step_s {
    uint64_t from_step;
    double weights[SL_MIX_MAX_SOURCES];
} sl_mix_step_t;

typedef struct sl_mix_s {
    uint32_t nsources;
    sl_mix_source_t src[SL_MIX_MAX_SOURCES];
    sl_mix_stop_e stop;
    uint64_t samples_per_epoch; /* 0: not given and not resolved yet */
    uint32_t nsteps;
    sl_mix_step_t steps[SL_MIX_MAX_SCHEDULE]; /* from_step strictly increasing, > 0 */
} sl_mix_t;

void sl_mix_free(sl_mix_t *mix);
/* A heap copy, NULL on ENOMEM. */
sl_mix_t *sl_mix_dup(const sl_mix_t *mix);
/* The canonical JSON object of the section, NULL on ENOMEM. */
json_t *sl_mix_to_json(const sl_mix_t *mix, uint64_t seed, bool shuffle);
/* "all_exhausted" / "first_exhausted". */
const char *sl_mix_stop_name(sl_mix_stop_e s);
/* The weights in force at global step into out (by source, not
 * normalized; 0 past nsources). */
void sl_mix_weights_at(const sl_mix_t *mix, uint64_t step, double out[SL_MIX_MAX_SOURCES]);
/* Parses "mix" of root into spec->mix (spec_source.c calls it when the
 * key is there); the spec's source_type becomes the first source's. */
struct sl_spec_pctx_s;
int sl_spec_parse_mix(struct sl_spec_pctx_s *c, json_t *root, sl_spec_t *spec);
/* Parses each mix source's "stages" of root (after sl_spec_parse_mix):
 * every entry must be one of the job's "stages" (the same JSON), in the
 * job's order; of a record job a source may leave out only image stages
 * (decode, geometry, augmentation, tiling, normalize, to_chw), of an image
 * job none (its tensors' shape and type are the sample kind). Errors name
 * mix.sources[i].stages. */
int sl_spec_parse_mix_stages(struct sl_spec_pctx_s *c, json_t *root, sl_mix_t *mix);
/* Writes the own "stages" of root's mix sources: the job's canonical
 * stages (root's "stages") each keeps. 0 or -ENOMEM. */
int sl_mix_stages_to_json(const sl_mix_t *mix, json_t *root);

/* samples_per_epoch that stop implies for counts: all_exhausted:
 * max_i ceil(count_i / share_i); first_exhausted: max(1, min_i
 * floor(count_i / share_i)) (share_i: weight_i over the weights' sum, the
 * first weights, before any schedule). */
uint64_t sl_mix_default_spe(const sl_mix_t *mix, const uint64_t *counts);
/* Records the opened sources' counts (every one > 0) and resolves
 * samples_per_epoch. A mix that already holds counts (a spec that travelled)
 * must match them: -ESTALE otherwise ("the data differs"). 0, -EINVAL,
 * -ESTALE; err names the source. */
int sl_mix_resolve(sl_mix_t *mix, const uint64_t *counts, char *err, size_t errlen);
/* A spec that travelled (dispatcher): a mixed one must be resolved, its
 * counts summing to the n samples the request names. 0 (also unmixed) or
 * -EINVAL (err says why). */
int sl_spec_mix_check(const sl_spec_t *spec, uint64_t n, char *err, size_t errlen);
/* Is every count known (sl_mix_resolve ran, here or on the host that sent
 * the spec)? */
bool sl_mix_resolved(const sl_mix_t *mix);

#endif
