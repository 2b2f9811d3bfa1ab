/* `sluice`: the user's command. main() only dispatches. */
#include "client/cli/cli.h"
#include "client/cli/cli_man.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "common/base/conf_man.h"
#include "common/base/log.h"
#include "common/base/version.h"


/* The subcommands: main() dispatches through this table, --help lists it and
 * --help-man writes the manual page from it (cli_man.c). */
static const sl_cli_command_t CMDS[] = {
    {"run", sl_cli_run,
     "run SPEC (--local | --dispatcher HOST:PORT) [--data-root DIR] [--epochs N]\n"
     "      [--threads N] [--offload off|all|auto|fastflow|K:F] [--digests FILE] [--json]\n"
     "      [--max-rate IMG_PER_S]",
     "run a pipeline spec and deliver every sample of every epoch"},
    {"plan", sl_cli_plan, "plan SPEC --dispatcher HOST:PORT [--data-root DIR] [--explain] [--json]",
     "profile and show the plan auto/fastflow would choose"},
    {"bench", sl_cli_bench,
     "bench SPEC (--dispatcher HOST:PORT | --local) --consumer-rate IMG_PER_S [--seconds N]",
     "a synthetic training loop: samples/s, stall %, client CPU, plan"},
    {"status", sl_cli_status,
     "status (--dispatcher HOST:PORT | --http HOST:PORT) [--json] [--watch SEC]",
     "workers, jobs, plans and rates of a running dispatcher"},
};
#define N_CMDS (sizeof(CMDS) / sizeof(CMDS[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < N_CMDS; i++) {
        fprintf(f, "  %s\n                 %s\n", CMDS[i].synopsis, CMDS[i].summary);
    }
    fprintf(f, "\n"
               "  sluice COMMAND --help   options of one command\n"
               "  sluice --version\n");
}

int main(int argc, char **argv)
{
    sl_log_set_name("sluice");
    /* Batches and received samples are megabytes each: keep them on the heap
     * instead of a fresh mmap (and page faults) per allocation. A process-wide
     * choice, so the program makes it, not the library. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
    if (argc < 2) {
        usage(stderr);
        return SL_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return SL_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("sluice %s\n", SL_VERSION);
        return SL_EXIT_OK;
    }
    if (argc == 2 && strcmp(cmd, SL_MAN_FLAG) == 0) {
        return sl_cli_man(CMDS, N_CMDS, stdout) == 0 ? SL_EXIT_OK : SL_EXIT_RUNTIME;
    }
    for (size_t i = 0; i < N_CMDS; i++) {
        if (strcmp(cmd, CMDS[i].name) == 0) {
            return CMDS[i].main(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "sluice: unknown command '%s'\n", cmd);
    usage(stderr);
    return SL_EXIT_USAGE;
}
