/* The shared option table of the `sluice` subcommands and the one getopt
 * loop they all run (see cli_opts.h). */
#include "client/cli/cli_opts.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/spec/spec.h"
#include "client/cli/cli_man.h"
#include "common/base/conf_man.h"

/* Values of the shared flags; rank and connection flags keep theirs
 * (cli.h, cli_conn.h). All above any printable character a command's own
 * flag may use. */
enum {
    OPT_DISPATCHER = 0x1201,
    OPT_LOCAL,
    OPT_DATA_ROOT,
    OPT_PLUGIN_DIR,
    OPT_THREADS,
    OPT_EPOCHS,
    OPT_OFFLOAD,
    OPT_CONSUMER_RATE,
    OPT_JSON,
    OPT_FIRST_EPOCH,
    OPT_SEED,
    OPT_REMOTE_ROOTS,
    OPT_CACHE_DIR,
    OPT_CACHE_BYTES,
    OPT_ALWAYS_PROFILE,
    OPT_HELP_MAN, /* hidden: this command's part of sluice(1), cli_man.c */
};

typedef struct {
    struct option opt;
    unsigned flag; /* SL_CLI_F_* */
} shared_opt_t;

static const shared_opt_t SHARED[] = {
    {{"dispatcher", required_argument, NULL, OPT_DISPATCHER}, SL_CLI_F_DISPATCHER},
    {{"local", no_argument, NULL, OPT_LOCAL}, SL_CLI_F_LOCAL},
    {{"data-root", required_argument, NULL, OPT_DATA_ROOT}, SL_CLI_F_DATA_ROOT},
    {{"plugin-dir", required_argument, NULL, OPT_PLUGIN_DIR}, SL_CLI_F_DATA_ROOT},
    {{"remote-roots", required_argument, NULL, OPT_REMOTE_ROOTS}, SL_CLI_F_DATA_ROOT},
    {{"cache-dir", required_argument, NULL, OPT_CACHE_DIR}, SL_CLI_F_DATA_ROOT},
    {{"cache-bytes", required_argument, NULL, OPT_CACHE_BYTES}, SL_CLI_F_DATA_ROOT},
    {{"threads", required_argument, NULL, OPT_THREADS}, SL_CLI_F_THREADS},
    {{"epochs", required_argument, NULL, OPT_EPOCHS}, SL_CLI_F_EPOCHS},
    {{"first-epoch", required_argument, NULL, OPT_FIRST_EPOCH}, SL_CLI_F_EPOCHS},
    {{"seed", required_argument, NULL, OPT_SEED}, SL_CLI_F_EPOCHS},
    {{"offload", required_argument, NULL, OPT_OFFLOAD}, SL_CLI_F_OFFLOAD},
    {{"always-profile", no_argument, NULL, OPT_ALWAYS_PROFILE}, SL_CLI_F_OFFLOAD},
    {{"consumer-rate", required_argument, NULL, OPT_CONSUMER_RATE}, SL_CLI_F_CONSUMER_RATE},
    {{"json", no_argument, NULL, OPT_JSON}, SL_CLI_F_JSON},
    {{"rank", required_argument, NULL, SL_CLI_OPT_RANK}, SL_CLI_F_RANKS},
    {{"world-size", required_argument, NULL, SL_CLI_OPT_WORLD}, SL_CLI_F_RANKS},
    {{"job-name", required_argument, NULL, SL_CLI_OPT_JOB_NAME}, SL_CLI_F_RANKS},
    {{"tls-ca", required_argument, NULL, SL_CLI_OPT_TLS_CA}, SL_CLI_F_CONN},
    {{"tls-cert", required_argument, NULL, SL_CLI_OPT_TLS_CERT}, SL_CLI_F_CONN},
    {{"tls-key", required_argument, NULL, SL_CLI_OPT_TLS_KEY}, SL_CLI_F_CONN},
    {{"token-file", required_argument, NULL, SL_CLI_OPT_TOKEN_FILE}, SL_CLI_F_CONN},
    {{"dispatcher-timeout", required_argument, NULL, SL_CLI_OPT_DISP_TIMEOUT}, SL_CLI_F_CONN},
};
#define N_SHARED (sizeof(SHARED) / sizeof(SHARED[0]))

int sl_cli_parse_long(const char *cmd, const char *flag, const char *arg, long lo, long hi,
                      long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "sluice %s: --%s: '%s' is not an integer in %ld..%ld\n", cmd, flag, arg,
                lo, hi);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int sl_cli_parse_double(const char *cmd, const char *flag, const char *arg, double lo,
                        int lo_open, double hi, const char *unit, double *ret)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    /* !(v >= lo) also refuses NaN. */
    if (errno != 0 || end == arg || *end != '\0' || !(v >= lo) || (lo_open && v == lo) ||
        v > hi) {
        fprintf(stderr, "sluice %s: --%s: '%s' is not a number in %c%g, %g] %s\n", cmd, flag,
                arg, lo_open ? '(' : '[', lo, hi, unit);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

/* 1: c was a shared flag (parsed), 0: not one, -EINVAL: bad value (printed). */
static int shared_opt(const char *cmd, int c, const char *arg, sl_cli_opts_t *o)
{
    long v;
    switch (c) {
    case OPT_DISPATCHER:
        o->dispatcher = arg;
        return 1;
    case OPT_LOCAL:
        o->local = 1;
        return 1;
    case OPT_PLUGIN_DIR:
        o->plugin_dir = arg;
        return 1;
    case OPT_DATA_ROOT:
        o->data_root = arg;
        return 1;
    case OPT_REMOTE_ROOTS:
        o->remote_roots = arg;
        return 1;
    case OPT_CACHE_DIR:
        o->cache_dir = arg;
        return 1;
    case OPT_CACHE_BYTES:
        if (sl_cli_parse_long(cmd, "cache-bytes", arg, 1L << 20, LONG_MAX, &v) < 0) {
            return -EINVAL;
        }
        o->cache_bytes = (uint64_t)v;
        return 1;
    case OPT_THREADS:
        if (sl_cli_parse_long(cmd, "threads", arg, 1, SL_CLI_MAX_THREADS, &v) < 0) {
            return -EINVAL;
        }
        o->threads = (unsigned)v;
        return 1;
    case OPT_EPOCHS:
        if (sl_cli_parse_long(cmd, "epochs", arg, 1, SL_CLI_MAX_EPOCHS, &v) < 0) {
            return -EINVAL;
        }
        o->epochs = (unsigned)v;
        return 1;
    case OPT_FIRST_EPOCH:
        if (sl_cli_parse_long(cmd, "first-epoch", arg, 0, SL_CLI_MAX_FIRST_EPOCH, &v) < 0) {
            return -EINVAL;
        }
        o->first_epoch = (uint64_t)v;
        return 1;
    case OPT_SEED:
        if (sl_cli_parse_long(cmd, "seed", arg, 0, LONG_MAX, &v) < 0) {
            return -EINVAL;
        }
        o->seed = v;
        return 1;
    case OPT_OFFLOAD: {
        sl_offload_e mode;
        uint32_t split;
        double share;
        if (sl_offload_parse(arg, &mode, &split, &share, NULL, 0) < 0) {
            fprintf(stderr,
                    "sluice %s: --offload: '%s' is not off, all, auto, fastflow or K:F "
                    "(K stages run remotely, F the local share in 0..1)\n",
                    cmd, arg);
            return -EINVAL;
        }
        o->offload = arg;
        return 1;
    }
    case OPT_CONSUMER_RATE:
        return sl_cli_parse_double(cmd, "consumer-rate", arg, 0, 0, SL_CLI_MAX_RATE,
                                   "samples/s", &o->consumer_rate) < 0
                   ? -EINVAL
                   : 1;
    case OPT_JSON:
        o->json = 1;
        return 1;
    case OPT_ALWAYS_PROFILE:
        o->always_profile = 1;
        return 1;
    default:
        break;
    }
    int rc = sl_cli_ranks_opt(cmd, c, arg, &o->ranks);
    return rc != 0 ? rc : sl_cli_conn_opt(cmd, c, arg, &o->conn);
}

int sl_cli_opts_parse(const sl_cli_cmd_t *cmd, int argc, char **argv, sl_cli_opts_t *o)
{
    struct option table[N_SHARED + SL_CLI_MAX_OWN_OPTIONS + 3];
    size_t n = 0;
    for (size_t i = 0; i < N_SHARED; i++) {
        if (cmd->shared & SHARED[i].flag) {
            table[n++] = SHARED[i].opt;
        }
    }
    for (size_t i = 0; cmd->own != NULL && cmd->own[i].name != NULL; i++) {
        if (i == SL_CLI_MAX_OWN_OPTIONS) {
            fprintf(stderr, "sluice %s: more than %d own options\n", cmd->name,
                    SL_CLI_MAX_OWN_OPTIONS);
            return -EINVAL;
        }
        table[n++] = cmd->own[i];
    }
    table[n++] = (struct option){"help", no_argument, NULL, 'h'};
    table[n++] = (struct option){SL_MAN_FLAG + 2, no_argument, NULL, OPT_HELP_MAN};
    table[n] = (struct option){NULL, 0, NULL, 0};

    memset(o, 0, sizeof(*o));
    o->data_root = NULL; /* the library's default, ".", and its hint when the source is missing */
    o->consumer_rate = -1;
    o->seed = -1;
    sl_cli_ranks_init(&o->ranks);
    sl_cli_conn_init(&o->conn);
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", table, NULL)) != -1) {
        int rc = shared_opt(cmd->name, c, optarg, o);
        if (rc < 0) {
            return rc;
        }
        if (rc > 0) {
            continue;
        }
        if (c == 'h') {
            cmd->usage(stdout);
            exit(SL_EXIT_OK);
        }
        if (c == OPT_HELP_MAN) {
            exit(sl_cli_man_command(cmd, table, stdout) == 0 ? SL_EXIT_OK : SL_EXIT_RUNTIME);
        }
        /* '?': getopt already named the unknown flag or the missing value. */
        if (c == '?' || cmd->own_opt == NULL) {
            cmd->usage(stderr);
            return -EINVAL;
        }
        if (cmd->own_opt(cmd->ctx, c, optarg) < 0) {
            return -EINVAL;
        }
    }
    if (cmd->takes_spec) {
        if (optind != argc - 1) {
            fprintf(stderr, "sluice %s: expected exactly one SPEC argument\n", cmd->name);
            cmd->usage(stderr);
            return -EINVAL;
        }
        o->spec = argv[optind];
    } else if (optind != argc) {
        fprintf(stderr, "sluice %s: unexpected argument '%s'\n", cmd->name, argv[optind]);
        return -EINVAL;
    }
    if ((cmd->shared & SL_CLI_F_LOCAL) && o->local == (o->dispatcher != NULL)) {
        fprintf(stderr, "sluice %s: give exactly one of --local and --dispatcher\n", cmd->name);
        return -EINVAL;
    }
    if (cmd->shared & SL_CLI_F_RANKS) {
        return sl_cli_ranks_check(cmd->name, &o->ranks);
    }
    return 0;
}

void sl_cli_job_options(const sl_cli_opts_t *o, sluice_options_t *so)
{
    *so = (sluice_options_t){.dispatcher = o->dispatcher,
                             .data_root = o->data_root,
                             .threads = o->threads,
                             .offload = o->offload,
                             .epochs = o->epochs,
                             .first_epoch = o->first_epoch,
                             .has_seed = o->seed >= 0,
                             .seed = o->seed >= 0 ? (uint64_t)o->seed : 0,
                             /* not given or 0: measured while running */
                             .consumer_rate = o->consumer_rate > 0 ? o->consumer_rate : 0,
                             .plugin_dir = o->plugin_dir,
                             .remote_roots = o->remote_roots,
                             .cache_dir = o->cache_dir,
                             .cache_bytes = o->cache_bytes,
                             .always_profile = o->always_profile};
    sl_cli_ranks_apply(&o->ranks, so);
    sl_cli_conn_apply(&o->conn, so);
}
