/* `sluice`: the user's command. main() only dispatches. */
#include "client/cli/cli.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "common/base/version.h"
#include "common/base/log.h"


static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice COMMAND [OPTIONS]\n"
            "\n"
            "commands:\n"
            "  run SPEC (--local | --dispatcher HOST:PORT) [--data-root DIR] [--epochs N]\n"
            "      [--threads N] [--offload off|all|auto|fastflow|K:F] [--digests FILE] [--json]\n"
            "      [--max-rate IMG_PER_S]\n"
            "                 run a pipeline spec and deliver every sample of every epoch\n"
            "  plan SPEC --dispatcher HOST:PORT [--data-root DIR] [--explain] [--json]\n"
            "                 profile and show the plan auto/fastflow would choose\n"
            "  bench SPEC (--dispatcher HOST:PORT | --local) --consumer-rate IMG_PER_S [--seconds N]\n"
            "                 a synthetic training loop: samples/s, stall %%, client CPU, plan\n"
            "  status (--dispatcher HOST:PORT | --http HOST:PORT) [--json] [--watch SEC]\n"
            "                 workers, jobs, plans and rates of a running dispatcher\n"
            "\n"
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
    if (strcmp(cmd, "run") == 0) {
        return sl_cli_run(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "status") == 0) {
        return sl_cli_status(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "bench") == 0) {
        return sl_cli_bench(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "plan") == 0) {
        return sl_cli_plan(argc - 1, argv + 1);
    }
    fprintf(stderr, "sluice: unknown command '%s'\n", cmd);
    usage(stderr);
    return SL_EXIT_USAGE;
}
