/* read_rate: samples/s of one host's remote reads (read_rate.h). */
#include "common/cost/read_rate.h"

#include <math.h>

static double clean(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

double sl_read_samples_per_sec(double bytes, double rate, double latency_sec, double requests,
                               double concurrent)
{
    bytes = clean(bytes);
    rate = clean(rate);
    if (bytes <= 0.0 || rate <= 0.0) {
        return 0.0;
    }
    double conc = clean(concurrent) >= 1.0 ? clean(concurrent) : 1.0;
    double sec = bytes / rate + clean(requests) * clean(latency_sec) / conc;
    return 1.0 / sec;
}
