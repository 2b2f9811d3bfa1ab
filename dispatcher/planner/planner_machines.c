/* planner_machines: hosts that share a machine (planner_machines.h). */
#include "dispatcher/planner/planner_machines.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int id_ok(const char *s)
{
    if (s == NULL || s[0] == '\0' || strlen(s) >= SL_MACHINE_ID_MAX) {
        return 0;
    }
    for (const char *p = s; *p != '\0'; p++) {
        if (*p <= ' ' || *p >= 0x7f) {
            return 0;
        }
    }
    return 1;
}

void disp_worker_note_machine(disp_worker_t *w, const char *machine_id, const char *cpu_set,
                              double cpu_budget)
{
    w->machine_id[0] = '\0';
    if (id_ok(machine_id)) {
        memcpy(w->machine_id, machine_id, strlen(machine_id) + 1);
    }
    w->has_cpus = sl_cpuset_parse(cpu_set, &w->cpus) == 0;
    w->cpu_budget = isfinite(cpu_budget) && cpu_budget > 0.0 ? cpu_budget : 0.0;
}

static int same_machine(const disp_pm_host_t *a, const disp_pm_host_t *b)
{
    if (!id_ok(a->machine_id) || !id_ok(b->machine_id) ||
        strcmp(a->machine_id, b->machine_id) != 0) {
        return 0;
    }
    /* Disjoint CPU sets on one machine (pinned containers) do not compete. */
    return a->cpus == NULL || b->cpus == NULL || sl_cpuset_overlap(a->cpus, b->cpus);
}

static size_t root(size_t *up, size_t i)
{
    while (up[i] != i) {
        up[i] = up[up[i]];
        i = up[i];
    }
    return i;
}

void disp_pm_group(const disp_pm_host_t *hosts, size_t n, disp_pl_input_t *in)
{
    in->nmachines = 0;
    size_t *up = malloc(n * sizeof(*up) + 1);
    if (up == NULL) {
        return; /* every host on its own: the planner's old view */
    }
    for (size_t i = 0; i < n; i++) {
        up[i] = i;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            if (same_machine(&hosts[i], &hosts[j])) {
                up[root(up, j)] = root(up, i);
            }
        }
    }
    for (size_t r = 0; r < n && in->nmachines < DISP_PL_MAX_MACHINES; r++) {
        if (root(up, r) != r) {
            continue;
        }
        disp_pl_machine_t m;
        memset(&m, 0, sizeof(m));
        sl_cpuset_t all;
        memset(&all, 0, sizeof(all));
        int known = 1;
        size_t members = 0;
        for (size_t i = 0; i < n; i++) {
            const disp_pm_host_t *h = &hosts[i];
            if (root(up, i) != r) {
                continue;
            }
            members++;
            m.cores += h->cores;
            if (h->cpus != NULL) {
                sl_cpuset_or(&all, h->cpus);
            } else {
                known = 0;
            }
            if (h->cls < 0) {
                m.client = 1;
            } else if ((uint32_t)h->cls < DISP_PL_MAX_CLASSES) {
                m.workers[h->cls]++;
            }
        }
        if (members < 2) {
            continue;
        }
        if (known && sl_cpuset_count(&all) > 0) {
            m.cores = fmin(m.cores, (double)sl_cpuset_count(&all));
        }
        in->machines[in->nmachines++] = m;
    }
    free(up);
}

json_t *disp_pm_json(const disp_pl_input_t *in)
{
    json_t *a = json_array();
    for (uint32_t m = 0; a != NULL && m < in->nmachines; m++) {
        const disp_pl_machine_t *x = &in->machines[m];
        json_t *per = json_array();
        for (uint32_t c = 0; per != NULL && c < in->nclasses; c++) {
            if (json_array_append_new(per, json_integer(x->workers[c])) != 0) {
                json_decref(per);
                per = NULL;
            }
        }
        json_t *j = per != NULL ? json_pack("{s:f,s:b,s:o}", "cores", x->cores, "client",
                                            x->client, "workers_per_class", per)
                                : NULL;
        if (j == NULL || json_array_append_new(a, j) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}
