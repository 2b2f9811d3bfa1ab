/* cli_plan_read: `sluice plan --explain`'s line on remote reads: each
 * host's measured source read rate and the samples/s it allows the planner
 * (dispatcher/planner/planner_read.c). */
#ifndef SL_CLI_PLAN_READ_H
#define SL_CLI_PLAN_READ_H

#include "client/lib/plan_job.h" /* Sluice__PlannerInputs */

/* Prints nothing when no host measured a remote read. */
void sl_cli_plan_print_reads(const Sluice__PlannerInputs *in);

#endif
