/* cli_plan_read: remote read rates in `sluice plan --explain`
 * (cli_plan_read.h). The bound is the planner's arithmetic
 * (planner_read.c): rate / encoded bytes per sample, per host. */
#include "client/cli/cli_plan_read.h"

#include <stdio.h>

/* One host's part: "client 12.3 MB/s (HEAD 4.0 ms) = 456.7 samples/s". */
static void one(const char *who, const Sluice__HostProfile *p, unsigned n)
{
    double bytes = p->encoded_bytes_per_sample;
    printf("  %-24s %8.1f MB/s (HEAD %.1f ms)", who, p->source_bytes_per_sec / 1e6,
           p->source_latency_sec * 1e3);
    if (bytes > 0.0) {
        printf(" = %.1f samples/s%s", p->source_bytes_per_sec / bytes, n > 1 ? " per worker" : "");
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
        one("client", in->client, 1);
    }
    for (size_t c = 0; c < in->n_classes; c++) {
        const Sluice__WorkerClass *k = in->classes[c];
        if (k == NULL || k->profile == NULL || k->profile->source_bytes_per_sec <= 0.0) {
            continue;
        }
        char who[64];
        snprintf(who, sizeof(who), "workers %.40s", k->key != NULL ? k->key : "?");
        one(who, k->profile, (unsigned)k->n_worker_ids);
    }
}
