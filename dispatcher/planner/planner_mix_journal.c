/* planner_mix_journal: a mixed job's planner state for the journal
 * (planner_mix_journal.h). Under the dispatcher mutex. */
#include "dispatcher/planner/planner_mix_journal.h"

#include "dispatcher/planner/planner_job_impl.h"
#include "dispatcher/planner/planner_mix.h"

int disp_pjob_mix_to_journal(const disp_pjob_t *pj, disp_pmix_pb_t *b, Sluice__PlannerInputs *in,
                             disp_hprof_t *client, disp_hprof_t *classes, uint64_t *step,
                             uint32_t *changes)
{
    const disp_pmix_t *m = pj->mix;
    if (m == NULL) {
        return 0;
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        Sluice__MixSourceCost *c = &b->c[j];
        sluice__mix_source_cost__init(c);
        c->name = (char *)m->names[j];
        c->n_unit_cpu_sec_per_sample = m->nunits;
        c->unit_cpu_sec_per_sample = (double *)m->unit_sec[j];
        c->n_bytes_per_sample = (size_t)m->nunits + 1;
        c->bytes_per_sample = (double *)m->bytes[j];
        c->read_cpu_sec_per_sample = m->read_sec[j];
        c->samples = m->samples[j];
        c->profiled_share = m->profiled[j];
        b->pc[j] = c;
    }
    in->n_mix_sources = m->nsources;
    in->mix_sources = b->pc;
    in->mix_sources_cached = m->cached != 0;
    *client = pj->client;
    for (uint32_t u = 0; u < m->nunits; u++) {
        client->units[u].cpu_sec_per_sample = m->blend_unit[u];
    }
    client->read_sec = m->blend_read;
    for (uint32_t c = 0; c < pj->nclasses && c < DISP_PL_MAX_CLASSES; c++) {
        classes[c] = pj->classes[c].prof;
        if (!pj->classes[c].profiled) {
            continue; /* not re-weighted: as sent */
        }
        for (uint32_t u = 0; u < m->nunits; u++) {
            classes[c].units[u].cpu_sec_per_sample = m->class_unit[c][u];
        }
        classes[c].read_sec = m->class_read[c];
    }
    *step = m->step;
    *changes = m->changes;
    return 1;
}

void disp_pjob_mix_from_journal(disp_pjob_t *pj, uint64_t step, uint32_t changes)
{
    if (pj->mix == NULL) {
        return;
    }
    disp_pjob_mix_apply(pj, step);
    pj->mix->changes = changes;
}
