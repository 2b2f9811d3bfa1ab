/* manpage: the prose of sluice-dispatcher(1), printed on --help-man by
 * sl_conf_man_main; the options come from the config table (config.c). */
#include "dispatcher/config.h"

#include <stdio.h>

#include "common/base/conf_man.h"

static const sl_man_section_t SECTIONS[] = {
    {"SIGNALS",
     "SIGTERM, SIGINT: stop serving (calls in progress get 2 s) and exit 0. With a journal "
     "(the default; not with journal = none), a dispatcher started again on the same "
     "address and directory continues every job; workers register again within about 2 s "
     "and clients ride out the gap (sluice run --dispatcher-timeout).\n"
     "\n"
     "SIGHUP: re-read the --config file (only log_level changes) and the tenants_file: "
     "tokens added are admitted and tokens removed refused from the next RPC on."},
    {"FILES",
     "/etc/sluice/dispatcher.conf: the configuration the systemd unit reads. The shipped "
     "one sets journal = /var/lib/sluice-dispatcher, the unit's StateDirectory=.\n"
     "\n"
     "$XDG_STATE_HOME/sluice/journal, else ~/.local/state/sluice/journal: the journal of a "
     "dispatcher started without one configured (journal = auto, the default); the start "
     "logs the directory in use. One dispatcher per directory: a second exits 1.\n"
     "\n"
     "In the journal directory: journal.log (records appended and fsync'd before each "
     "answer) and snapshot (the log compacted). A torn tail is truncated with a notice; a corrupt "
     "record in the middle stops the start with exit status 1.\n"
     "\n"
     "tenants_file (when set): one tenant per line, NAME TOKEN [max_jobs=N] "
     "[max_buffered_mb=N]; blank lines and # comments are skipped. Keep it readable by the "
     "daemon only, like token_file; give the workers the same file."},
};

const sl_man_page_t disp_man_page = {
    .description =
        "sluice-dispatcher coordinates a Sluice cluster. Workers register with it and "
        "heartbeat; clients (the sluice command, libsluice, the Python binding) submit jobs "
        "to it. For every job it holds the plan -- which pipeline units run on the workers "
        "and which share of the samples the client processes itself, chosen by the planner "
        "from measured profiles -- and cuts every epoch's shuffled sample order into splits "
        "that it assigns to workers and to the client. A split is done when the client "
        "acknowledges it; the splits of a worker that dies or stays silent past "
        "worker_timeout_ms are assigned again, so every sample reaches the training loop "
        "exactly once.\n"
        "\n"
        "Its status endpoint also serves a dashboard at /, and under systemd it keeps a "
        "STATUS= line with its workers, jobs and rate.",
    .sections = SECTIONS,
    .nsections = sizeof(SECTIONS) / sizeof(SECTIONS[0]),
    .see_also = "sluice(1), sluice-worker(1)",
};
