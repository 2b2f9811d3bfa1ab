/* overhead: see overhead.h. */
#include "client/lib/overhead.h"

#include <math.h>

double cl_overhead_add(cl_overhead_t *o, uint32_t version, double samples, double cpu)
{
    if (version != o->version) {
        o->version = version;
        o->cpu = 0.0;
        o->samples = 0.0;
    }
    double keep = 1.0 - 1.0 / CL_OVERHEAD_WINDOW_REPORTS;
    o->cpu = o->cpu * keep + (isfinite(cpu) && cpu > 0.0 ? cpu : 0.0);
    o->samples = o->samples * keep + (isfinite(samples) && samples > 0.0 ? samples : 0.0);
    return o->samples >= CL_OVERHEAD_MIN_SAMPLES ? o->cpu / o->samples : 0.0;
}
