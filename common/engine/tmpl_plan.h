/* tmpl_plan: the length of the sequence template writes, from counts alone
 * (tiles per image, turns' roles, token ids). template (pipe_text.c) lays
 * out its ids by it and balance_costs.c predicts each sample's length by it,
 * so the prediction and the delivered length cannot drift apart. Pure, any
 * thread. */
#ifndef SL_TMPL_PLAN_H
#define SL_TMPL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spec/spec.h"

typedef struct sl_tmpl_plan_s {
    uint32_t nimages;   /* images kept: the first nimages of the sample */
    uint64_t image_ids; /* their image_token ids */
    uint64_t full;      /* the sequence's length without max_seq_len */
    uint64_t len;       /* the sequence delivered (<= max_seq_len when set) */
    bool truncated;     /* the text is cut: the first len - eos ids, then eos */
    bool skip;          /* over max_seq_len with "overflow": "skip" */
} sl_tmpl_plan_t;

/* Ids of the text part: the tokens, plus with chat each turn's role marker
 * and the end marker. roles: nturns entries, read at a stride of stride
 * uint32 words (a TURNS field's rows: SL_RF_TURN_WORDS). */
uint64_t sl_tmpl_text_ids(const sl_stage_spec_t *st, const uint32_t *roles, size_t stride,
                          uint32_t nturns, uint64_t ntokens);

/* The rule of max_seq_len (docs/records.md): a sequence over it drops its
 * trailing images (all of an image's tiles at once, last image first) until
 * it fits or none is left, then cuts the text from the end, keeping eos;
 * with "overflow": "skip" it is a skip instead. tiles[i]: image i's tiles
 * (1 for an image that is not tiled). */
void sl_tmpl_plan(const sl_stage_spec_t *st, const uint32_t *tiles, uint32_t nimages,
                  uint64_t text_ids, sl_tmpl_plan_t *ret);

#endif
