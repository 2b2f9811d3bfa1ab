/* manpage: the prose of sluice-worker(1), printed on --help-man by
 * sl_conf_man_main; the options come from the config table (config.c). */
#include "worker/config.h"

#include <stdio.h>

#include "common/base/conf_man.h"

static const sl_man_section_t SECTIONS[] = {
    {"SIGNALS",
     "SIGTERM, SIGINT: drain, then exit 0: the worker takes no new splits, lets the ones it "
     "has started reach their clients for at most drain_ms, tells the dispatcher it is "
     "leaving, and exits.\n"
     "\n"
     "SIGHUP: re-read the --config file (only log_level changes) and the tenants_file: "
     "tokens added are admitted and tokens removed refused from the next RPC on."},
    {"FILES",
     "/etc/sluice/worker.conf: the configuration the systemd unit sluice-worker reads; "
     "/etc/sluice/worker-NAME.conf the one of sluice-worker@NAME, for several workers on "
     "one host (each with its own listen and http ports)."},
};

const sl_man_page_t wk_man_page = {
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
        "The status endpoint's fixed default port lets Prometheus scrape every worker at "
        "HOST:7501.",
    .sections = SECTIONS,
    .nsections = sizeof(SECTIONS) / sizeof(SECTIONS[0]),
    .see_also = "sluice(1), sluice-dispatcher(1)",
};
