/* balance_costs: what a balanced spec's epoch order (common/order/balance.h)
 * is made from, read from the data: each sample's predicted trainer cost
 * and tokens. Apart from the pure order arithmetic because it reads every
 * sample's headers through the source. Any thread, on the caller's buffers. */
#ifndef SL_BALANCE_COSTS_H
#define SL_BALANCE_COSTS_H

#include <stdint.h>

/* Per-sample predictions for a balanced spec, from what every host indexes
 * alike (so every host computes the same schedule): the sequence length
 * (text bytes / 4 as tokens, capped by tokenize's max_tokens, plus the
 * template's image tokens and bos/eos) and the image tiles (each image's
 * header through sl_tiles_grid, or one per image without image_tiles).
 * ret_cost, ret_tokens and ret_tiles (may be NULL) hold n = sl_source_count
 * entries. Reads every
 * sample's image headers once. Returns 0, -ENOMEM. A sample whose headers
 * cannot be read counts its images as one tile each. */
struct sl_source_s;
struct sl_spec_s;
int sl_balance_sample_costs(const struct sl_spec_s *spec, const struct sl_source_s *src,
                            float *ret_cost, uint32_t *ret_tokens, uint32_t *ret_tiles);

#endif
