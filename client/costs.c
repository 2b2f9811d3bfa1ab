/* costs: see costs.h. */
#include "client/costs.h"
#include "common/costmodel.h"

int cl_sample_costs(const sl_source_t *src, float *out, uint64_t n)
{
    double total = 0;
    for (uint64_t i = 0; i < n; i++) {
        total += (double)sl_source_size(src, i);
    }
    double overhead = n > 0 ? SL_COST_SIZE_OVERHEAD_SHARE * total / (double)n : 0;
    for (uint64_t i = 0; i < n; i++) {
        out[i] = (float)((double)sl_source_size(src, i) + overhead);
    }
    return 0;
}
