/* costs: the per-sample predicted cost a client sends with SubmitJob
 * (SubmitJobRequest.sample_costs, docs/planner.md "Data-aware balancing"),
 * from what indexing the source gave for free: each sample's encoded size.
 * No file is opened. */
#ifndef CL_COSTS_H
#define CL_COSTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/source.h"

/* Must not exceed the dispatcher's DISP_MAX_SAMPLE_COSTS (it refuses more). */
#define CL_MAX_SAMPLE_COSTS (1u << 23)

/* Predicted relative cost of each sample index of src into out[n]
 * (n = sl_source_count): size + SL_COST_SIZE_OVERHEAD_SHARE * mean size. Decode
 * time grows with pixels, which at one data set's JPEG quality grow about
 * with bytes; the overhead share stands for the per-sample work that does
 * not (open, read, a fixed-size crop's resize, normalize). Only ratios
 * matter to the dispatcher. Returns 0. */
int cl_sample_costs(const sl_source_t *src, float *out, uint64_t n);

#endif
