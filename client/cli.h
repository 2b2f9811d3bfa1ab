/* cli: the `sluice` command: subcommand dispatch and what subcommands share
 * (exit codes, digests, the summary). */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <stdio.h>

#include "client/sluice.h"

/* Exit status contract (DESIGN.md "Interfaces"). */
enum { SL_EXIT_OK = 0, SL_EXIT_RUNTIME = 1, SL_EXIT_USAGE = 2 };

int sl_cli_run(int argc, char **argv);
int sl_cli_bench(int argc, char **argv);
int sl_cli_status(int argc, char **argv); /* cli_status.c */
int sl_cli_plan(int argc, char **argv);   /* cli_plan.c */

/* One "EPOCH INDEX LABEL SHA256" line per sample of the batch. */
int sl_cli_write_digests(FILE *f, const sluice_batch_t *batch);

/* The --json object (stdout) and the human summary (stderr) of a run. */
void sl_cli_print_json(const sluice_job_t *job, double seconds);
void sl_cli_print_text(const sluice_job_t *job, double seconds);

#endif
