/* manpage: sluice-worker(1), printed on --help-man. The options come from
 * the config table (config.c); only the prose around them is here. */
#include "worker/config.h"

#include <errno.h>
#include <stdio.h>

#include "common/base/conf_man.h"

static const sl_man_section_t SECTIONS[] = {
    {"SIGNALS",
     "SIGTERM, SIGINT: drain, then exit 0: the worker takes no new splits, lets the ones it "
     "has started reach their clients for at most drain_ms, tells the dispatcher it is "
     "leaving, and exits.\n"
     "\n"
     "SIGHUP: re-read the --config file; only log_level changes."},
    {"FILES",
     "/etc/sluice/worker.conf: the configuration the systemd unit sluice-worker reads; "
     "/etc/sluice/worker-NAME.conf the one of sluice-worker@NAME, for several workers on "
     "one host (each with its own listen and http ports)."},
};

static const sl_man_page_t PAGE = {
    .description =
        "sluice-worker runs the offloaded part of Sluice's input pipelines. It registers "
        "with the dispatcher and heartbeats with its load and progress; it reads the samples "
        "of the splits assigned to it from under data_root, runs the pipeline units before "
        "the job's split point (JPEG decode, crops, flips, normalization), keeps at most "
        "buffer_bytes of finished batches per job, and streams them to the job's client over "
        "a Fetch stream with credit-based flow control. It keeps no state worth saving: a "
        "worker may die at any time, and the dispatcher assigns what it had not delivered "
        "again.\n"
        "\n"
        "While the dispatcher is unreachable the worker keeps serving its clients and "
        "retries every 100 ms, doubling to 1 s, each wait a random part of its step; it is "
        "registered again within about 2 s of a dispatcher that comes back.\n"
        "\n"
        "The first line on standard output names the bound addresses (port 0 picks a free "
        "one):\n"
        "\n"
        "  listening grpc=HOST:PORT http=HOST:PORT\n"
        "\n"
        "The HTTP address serves /status (JSON), /metrics (Prometheus text) and /healthz; "
        "its fixed default port lets Prometheus scrape every worker at HOST:7501. Logs go "
        "to standard error. Under systemd (Type=notify) the worker reports READY=1 once it "
        "listens.",
    .sections = SECTIONS,
    .nsections = sizeof(SECTIONS) / sizeof(SECTIONS[0]),
    .see_also = "sluice(1), sluice-dispatcher(1), /usr/local/share/doc/sluice/README.md",
};

int wk_manpage(int argc, char **argv)
{
    if (!sl_man_requested(argc, argv)) {
        return 0;
    }
    return sl_conf_print_man(&wk_conf_table, &PAGE, stdout) < 0 ? -EIO : 1;
}
