/* planner_read: a remote read is not free (docs/planner.md "Remote reads").
 * With a URL source every sample a host runs starts with reading its
 * encoded bytes (bytes[0] per sample) from the data server, at the rate
 * and request latency that host measured for its remote reads
 * (common/remote/rstats.h, sent in its HostProfile). One host reads
 *   R = 1 / (bytes[0] / rate + requests x latency / cores)
 * samples/s (common/cost/read_rate.h: each pool thread waits out its own
 * sample's requests). So, at local share f and throughput T:
 *   workers:  (1 - f) T <= sum over classes of workers x R
 *   client:        f  T <= R of the client
 * each a bound in samples/s that caps the worker and the client term.
 * A rate of 0 (a local source, or nothing measured yet) sets no bound, like
 * an unmeasured link; a class with workers and no rate makes the workers'
 * sum unbounded. Each worker is taken to have its own link to the data
 * server (workers on one machine share it: not modelled). Inputs are
 * sanitized here (NaN, Inf, negative: 0), as disp_pl_sanitize does for the
 * others. */
#include <math.h>

#include "common/cost/read_rate.h"
#include "dispatcher/planner/planner_impl.h"

static double clean(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

static double requests(const disp_pl_input_t *in)
{
    double r = clean(in->source_requests);
    return r > 0.0 ? r : SL_READ_REQUESTS_PER_SAMPLE;
}

double disp_pl_read_remote(const disp_pl_input_t *in, double f)
{
    double bytes = clean(in->bytes[0]);
    if (f >= 1.0 || bytes <= 0.0) {
        return INFINITY;
    }
    double rate = 0.0; /* samples/s */
    uint32_t n = 0;
    for (uint32_t c = 0; c < in->nclasses && c < DISP_PL_MAX_CLASSES; c++) {
        const disp_pl_class_t *cl = &in->classes[c];
        if (cl->workers == 0) {
            continue;
        }
        double r = clean(cl->source_rate);
        if (r <= 0.0) {
            return INFINITY; /* not measured: no bound, as an unmeasured link */
        }
        rate += (double)cl->workers *
                sl_read_samples_per_sec(bytes, r, cl->source_latency, requests(in), cl->cores);
        n += cl->workers;
    }
    if (n == 0) {
        return INFINITY; /* no worker: the worker term says so */
    }
    return rate / (1.0 - (f > 0.0 ? f : 0.0));
}

double disp_pl_read_client(const disp_pl_input_t *in, double f)
{
    double bytes = clean(in->bytes[0]), rate = clean(in->client_source_rate);
    if (f <= 0.0 || bytes <= 0.0 || rate <= 0.0) {
        return INFINITY;
    }
    return sl_read_samples_per_sec(bytes, rate, in->client_source_latency, requests(in),
                                   in->client_cores) /
           f;
}

void disp_pl_read_bound(const disp_pl_input_t *in, double f, disp_pl_terms_t *t)
{
    t->worker = fmin(t->worker, disp_pl_read_remote(in, f));
    t->client = fmin(t->client, disp_pl_read_client(in, f));
}
