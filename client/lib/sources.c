/* sources: a mixed job's sources for its consumer (sluice.h "Mixed jobs",
 * docs/mixing.md): their names, shares and which one a sample came from.
 * Read-only over the opened job; any thread. */
#include <stdint.h>

#include "client/lib/client_impl.h"
#include "common/data/source.h"
#include "common/spec/mix.h"

uint32_t sluice_mix_nsources(const sluice_job_t *job)
{
    return job != NULL && job->spec.mix != NULL ? job->spec.mix->nsources : 0;
}

const char *sluice_mix_source_name(const sluice_job_t *job, uint32_t source)
{
    if (source >= sluice_mix_nsources(job)) {
        return NULL;
    }
    return job->spec.mix->src[source].name;
}

double sluice_mix_source_share(const sluice_job_t *job, uint32_t source)
{
    if (source >= sluice_mix_nsources(job)) {
        return 0.0;
    }
    double sum = 0.0;
    for (uint32_t j = 0; j < job->spec.mix->nsources; j++) {
        sum += job->spec.mix->src[j].weight;
    }
    return sum > 0.0 ? job->spec.mix->src[source].weight / sum : 0.0;
}

uint64_t sluice_mix_samples_per_epoch(const sluice_job_t *job)
{
    return sluice_mix_nsources(job) > 0 ? job->spec.mix->samples_per_epoch : 0;
}

int sluice_sample_source(const sluice_job_t *job, uint64_t index)
{
    uint32_t j = 0;
    if (job == NULL || sl_source_mix_child(job->src, index, &j) < 0) {
        return -1;
    }
    return (int)j;
}
