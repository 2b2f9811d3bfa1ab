/* cli_plan_mix: `sluice plan --explain`'s lines for a mixed job
 * (docs/mixing.md "Costs per source"): each source's costs as the
 * dispatcher's planner took them, the weights it used and the job's
 * per-unit costs they make. */
#ifndef SL_CLI_PLAN_MIX_H
#define SL_CLI_PLAN_MIX_H

/* From the explain document's "mix" (the dispatcher's JSON); nothing when
 * it has none (an unmixed job, or an older client or dispatcher). */
void cli_plan_print_mix(const char *doc);

#endif
