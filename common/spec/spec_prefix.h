/* spec_prefix: the part of a spec the prefix cache may keep (docs/cache.md):
 * the longest run of units from the first that draws nothing from the
 * sample's random stream (no stage with SL_OPF_RANDOM in the op table; a
 * plugin always counts as drawing, its ABI cannot say otherwise), and the
 * hash that names that prefix. A unit's output over that prefix is a pure
 * function of (prefix hash, source fingerprint, sample index). Any thread;
 * pure. */
#ifndef SL_SPEC_PREFIX_H
#define SL_SPEC_PREFIX_H

#include <stdint.h>

#include "common/spec/spec.h"
#include "common/spec/spec_layout.h"

#define SL_PREFIX_HASH_LEN 32

/* Units [0, n) of l (spec's layout) that draw nothing: 0 when the first
 * unit draws. */
uint32_t sl_spec_cache_prefix(const sl_spec_t *spec, const sl_layout_t *l);

/* SHA-256 over the canonical form of the prefix: the source part of the
 * spec's canonical JSON (or its mix) without the order keys (shuffle, seed,
 * shuffle_block), max_pixels, and the canonical JSON of every spec stage up
 * to the end of unit nunits-1, under a version line. Everything else (epochs,
 * batching, offload, seed, name) leaves it unchanged. Returns 0, -EINVAL
 * (nunits beyond the layout), -ENOMEM. */
int sl_spec_prefix_hash(const sl_spec_t *spec, const sl_layout_t *l, uint32_t nunits,
                        uint8_t out[SL_PREFIX_HASH_LEN]);

#endif
