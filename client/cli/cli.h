/* cli: the `sluice` command: subcommand dispatch and what subcommands share
 * (exit codes, digests, the summary).
 *
 * client/cli sees the library only through its headers: client/lib/sluice.h,
 * the public API (run, bench); and the internal ones the static library
 * declares for the CLI and not for applications (not exported from
 * libsluice.so): client/lib/stats.h (what the run summaries print beyond
 * sluice_stats_t), client/lib/profile.h (the planner's profiling, for `sluice
 * plan`) and common/base/sha256.h (digests). Never client/lib/client_impl.h. */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <stdio.h>

#include "client/lib/sluice.h"

/* Exit status contract (docs/design.md "Interfaces"). */
enum { SL_EXIT_OK = 0, SL_EXIT_RUNTIME = 1, SL_EXIT_USAGE = 2 };

/* A subcommand, as cli.c's table lists it. */
typedef struct sl_cli_command_s {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the command's name */
    const char *synopsis;               /* what follows "sluice "; may span lines */
    const char *summary;                /* one line */
} sl_cli_command_t;

int sl_cli_run(int argc, char **argv);
int sl_cli_bench(int argc, char **argv);
int sl_cli_status(int argc, char **argv); /* cli_status.c */
int sl_cli_plan(int argc, char **argv);   /* cli_plan.c */

/* One "EPOCH INDEX LABEL SHA256" line per sample of the batch. */
/* 'EPOCH INDEX LABEL SHA256' per sample; KEY instead of LABEL for records. */
int sl_cli_write_digests(FILE *f, sluice_job_t *job, sluice_batch_t *batch);
/* One JSON line per sample of a record batch (sluice run --dump). */
int sl_cli_write_dump(FILE *f, sluice_job_t *job, sluice_batch_t *batch);
/* cli_state.c: --resume FILE... read into buffers (freed with
 * sl_cli_free_states); --save-state written atomically. Errors are printed.
 * Return 0 or a negative errno / -1. */
int sl_cli_read_states(const char *const *paths, unsigned n, char ***ret_bufs,
                       size_t **ret_lens);
void sl_cli_free_states(char **bufs, size_t *lens, unsigned n);
int sl_cli_save_state(sluice_job_t *job, const char *path);

/* The --json object (stdout) and the human summary (stderr) of a run. */
/* by_source: a mixed job's delivered samples per source (sluice_mix_*),
 * SL_CLI_MIX_MAX entries, or NULL. */
#define SL_CLI_MIX_MAX 16
void sl_cli_print_json(const sluice_job_t *job, double seconds, const uint64_t *by_source);
void sl_cli_print_text(const sluice_job_t *job, double seconds);
/* Once per job (*warned, 0 at first): when the dispatcher gives the job's
 * remote work to this host (every worker refused it), says so and why on
 * stderr. */
void sl_cli_warn_fallback(const char *cmd, const sluice_job_t *job, int *warned);

/* cli_ranks.c: --rank R --world-size W --job-name NAME (multi-rank jobs,
 * docs/protocol.md), shared by run and bench. cli_opts.c puts them in the
 * option table and hands every option to sl_cli_ranks_opt. */
typedef struct sl_cli_ranks_s {
    long rank;       /* -1 = not given */
    long world_size; /* 0 = not given (the spec's) */
    const char *job_name;
} sl_cli_ranks_t;

#define SL_CLI_OPT_RANK 0x1001
#define SL_CLI_OPT_WORLD 0x1002
#define SL_CLI_OPT_JOB_NAME 0x1003
#define SL_CLI_RANK_USAGE                                                                      \
    "  --world-size W       multi-rank job: W consumers (one per GPU) share every epoch\n"    \
    "  --rank R             this consumer's rank, 0..W-1: its equal share of each epoch\n"    \
    "  --job-name NAME      the job the W ranks share (default: derived from the spec)\n"

void sl_cli_ranks_init(sl_cli_ranks_t *r);
/* 1: c was a rank option (parsed), 0: not one, -EINVAL: bad value (printed). */
int sl_cli_ranks_opt(const char *cmd, int c, const char *arg, sl_cli_ranks_t *r);
/* After parsing: consistent? 0 or -EINVAL (printed). */
int sl_cli_ranks_check(const char *cmd, const sl_cli_ranks_t *r);
/* Into the library's options. */
void sl_cli_ranks_apply(const sl_cli_ranks_t *r, sluice_options_t *so);

#endif
