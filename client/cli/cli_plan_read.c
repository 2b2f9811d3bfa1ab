/* cli_plan_read: remote read rates in `sluice plan --explain`
 * (cli_plan_read.h). The bound is the planner's arithmetic
 * (planner_read.c, common/cost/read_rate.h): per host, 1 / (encoded bytes
 * per sample / rate + requests x latency / its cores). */
#include "client/cli/cli_plan_read.h"

#include <stdio.h>

#include "common/cost/read_rate.h"

/* The cores a host gives the job, as the planner counts its concurrent
 * reads (planner_job_live.c cores_of). */
static double cores_of(uint32_t threads, double budget)
{
    double t = threads > 0 ? (double)threads : 1.0;
    return budget > 0.0 && budget < t ? budget : t;
}

/* One host's part: "client 12.3 MB/s, HEAD 4.0 ms x 1 request / 4 reads at
 * once = 456.7 samples/s (latency 3 %)". */
static void one(const char *who, const Sluice__HostProfile *p, double conc, unsigned n)
{
    double bytes = p->encoded_bytes_per_sample;
    double req = SL_READ_REQUESTS_PER_SAMPLE;
    printf("  %-24s %8.1f MB/s, HEAD %.1f ms x %.0f request / %.0f reads at once", who,
           p->source_bytes_per_sec / 1e6, p->source_latency_sec * 1e3, req, conc);
    double r = sl_read_samples_per_sec(bytes, p->source_bytes_per_sec, p->source_latency_sec, req,
                                       conc);
    if (r > 0.0) {
        /* The latency's part of a sample's read time. */
        double lat = p->source_latency_sec > 0.0 ? req * p->source_latency_sec / conc : 0.0;
        printf(" = %.1f samples/s%s (latency %.0f %%)", r, n > 1 ? " per worker" : "",
               100.0 * lat * r);
    }
    printf("\n");
}

void sl_cli_plan_print_reads(const Sluice__PlannerInputs *in)
{
    int any = in->client != NULL && in->client->source_bytes_per_sec > 0.0;
    for (size_t c = 0; c < in->n_classes && !any; c++) {
        const Sluice__WorkerClass *k = in->classes[c];
        any = k != NULL && k->profile != NULL && k->profile->source_bytes_per_sec > 0.0;
    }
    if (!any) {
        return;
    }
    printf("source reads (measured; they bound the client and worker limits):\n");
    if (in->client != NULL && in->client->source_bytes_per_sec > 0.0) {
        one("client", in->client, in->client_cpu_budget > 1.0 ? in->client_cpu_budget : 1.0, 1);
    }
    for (size_t c = 0; c < in->n_classes; c++) {
        const Sluice__WorkerClass *k = in->classes[c];
        if (k == NULL || k->profile == NULL || k->profile->source_bytes_per_sec <= 0.0) {
            continue;
        }
        char who[64];
        snprintf(who, sizeof(who), "workers %.40s", k->key != NULL ? k->key : "?");
        one(who, k->profile, cores_of(k->threads, k->cpu_budget), (unsigned)k->n_worker_ids);
    }
}
