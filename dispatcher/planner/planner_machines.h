/* planner_machines: which of a job's hosts share a machine's CPUs, so the
 * planner counts them once (planner.h "Shared machines", docs/planner.md).
 *
 * Workers report a machine identity, their CPU set and CPU budget when they
 * register; the client sends its own in PlannerInputs. Hosts with the same
 * machine id whose CPU sets overlap (or are not known) are one machine; its
 * cores are the union of their CPU sets, capped by the sum of what each may
 * use. A host without an identity (an older peer) is a machine of its own.
 *
 * Pure over its inputs, no logging. Runs under the dispatcher mutex. */
#ifndef DISP_PLANNER_MACHINES_H
#define DISP_PLANNER_MACHINES_H

#include <jansson.h>
#include <stddef.h>

#include "common/cost/hostfacts.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/core/registry.h"

/* One host of a job as the planner sees it. */
typedef struct disp_pm_host_s {
    const char *machine_id; /* "" or NULL = unknown */
    const sl_cpuset_t *cpus; /* NULL = not known */
    double cores;           /* CPUs it gives the job */
    int cls;                /* its class in disp_pl_input_t; -1 = the client */
} disp_pm_host_t;

/* Records what a worker reported at registration. A machine id that is not
 * printable or too long, or a CPU set that does not parse, counts as not
 * reported (the worker is then its own machine, or shares with all of its
 * machine's hosts). */
void disp_worker_note_machine(disp_worker_t *w, const char *machine_id, const char *cpu_set,
                              double cpu_budget);

/* Groups hosts[0..n) into in->machines (groups of two or more only; at most
 * DISP_PL_MAX_MACHINES, the rest stay on their own as before). Classes must
 * be filled. */
void disp_pm_group(const disp_pm_host_t *hosts, size_t n, disp_pl_input_t *in);

/* in->machines as JSON: [{"cores", "client", "workers_per_class": [...]}];
 * NULL when out of memory. The caller owns the reference. */
json_t *disp_pm_json(const disp_pl_input_t *in);

#endif
