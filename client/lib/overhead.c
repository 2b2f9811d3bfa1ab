/* overhead: see overhead.h. */
#include "client/lib/overhead.h"

#include <errno.h>
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

int cl_overhead_from_probe(double cpu, double bytes, double sample_bytes, double recv_per_byte,
                           double *ret_sec)
{
    if (!(bytes >= sample_bytes) || !(sample_bytes >= 1.0) || !isfinite(bytes) || !isfinite(cpu) ||
        cpu < 0.0) {
        return -EINVAL;
    }
    double per_byte = isfinite(recv_per_byte) && recv_per_byte > 0.0 ? recv_per_byte : 0.0;
    double per = cpu / (bytes / sample_bytes) - per_byte * sample_bytes;
    *ret_sec = per > 0.0 ? per : 0.0;
    return 0;
}
