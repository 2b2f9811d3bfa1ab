/* cli_opts: the one option table of the `sluice` subcommands.
 *
 * Flags several subcommands take (--dispatcher, --local, --data-root,
 * --threads, --epochs, --first-epoch, --seed, --offload, --consumer-rate,
 * --json, the rank flags of
 * cli_ranks.c and the connection flags of cli_conn.c) are declared, parsed
 * and range-checked here, once, so `run`, `bench`, `plan` and `status` cannot
 * drift apart. A command names the shared flags it takes and handles only its
 * own. The --help texts stay with the commands: their wording is per command
 * and users rely on it (docs/design.md "Interfaces"). */
#ifndef SL_CLI_OPTS_H
#define SL_CLI_OPTS_H

#include <getopt.h>
#include <stdio.h>

#include "client/cli/cli.h"
#include "client/cli/cli_conn.h"

/* Which shared flags a command takes. */
enum {
    SL_CLI_F_DISPATCHER = 1u << 0,    /* --dispatcher ADDR */
    SL_CLI_F_LOCAL = 1u << 1,         /* --local (then exactly one of it and --dispatcher) */
    SL_CLI_F_DATA_ROOT = 1u << 2,     /* --data-root DIR (default ".") */
    SL_CLI_F_THREADS = 1u << 3,       /* --threads 1..256 */
    SL_CLI_F_EPOCHS = 1u << 4,        /* --epochs 1..1000000, --first-epoch, --seed */
    SL_CLI_F_OFFLOAD = 1u << 5,       /* --offload MODE (the library or command checks it),
                                       * --always-profile */
    SL_CLI_F_CONSUMER_RATE = 1u << 6, /* --consumer-rate 0..1e9 samples/s */
    SL_CLI_F_JSON = 1u << 7,          /* --json */
    SL_CLI_F_RANKS = 1u << 8,         /* --rank --world-size --job-name */
    SL_CLI_F_CONN = 1u << 9,          /* --tls-* --token-file --dispatcher-timeout */
};

/* The --help lines of --first-epoch and --seed (SL_CLI_F_EPOCHS). */
#define SL_CLI_EPOCH_USAGE                                                                     \
    "  --first-epoch E      number the job's epochs from E: each is that epoch of one\n"      \
    "                       longer job (same order, same random crops)\n"                     \
    "  --seed S             replace the spec's source seed (0..2^63-1)\n"

/* Every shared flag: what the commands that run a job (run, bench) take. */
#define SL_CLI_F_JOB                                                                           \
    (SL_CLI_F_DISPATCHER | SL_CLI_F_LOCAL | SL_CLI_F_DATA_ROOT | SL_CLI_F_THREADS |             \
     SL_CLI_F_EPOCHS | SL_CLI_F_OFFLOAD | SL_CLI_F_CONSUMER_RATE | SL_CLI_F_JSON |               \
     SL_CLI_F_RANKS | SL_CLI_F_CONN)

/* --help lines of the URL-source flags (with --data-root). */
#define SL_CLI_REMOTE_USAGE                                                                        \
    "  --remote-roots LIST  comma-separated URL prefixes (http://, https://, s3://bucket/)\n"      \
    "                       the source may read (default: $SLUICE_REMOTE_ROOTS, else none)\n"      \
    "  --cache-dir DIR      shard cache for URL sources (default: $SLUICE_CACHE_DIR, else\n"       \
    "                       ~/.cache/sluice); when given (or $SLUICE_CACHE_DIR), also the\n"       \
    "                       prefix cache of the samples this host runs (docs/cache.md)\n"          \
    "  --cache-bytes N      bound of both caches together (default: $SLUICE_CACHE_BYTES,\n"        \
    "                       else 10 GiB)\n"

/* The --help lines of --always-profile (SL_CLI_F_OFFLOAD). */
#define SL_CLI_ALWAYS_PROFILE_USAGE                                                                \
    "  --always-profile     an auto/fastflow job profiles however short it is (default:\n"         \
    "                       $SLUICE_ALWAYS_PROFILE=1, else a job too short to repay\n"             \
    "                       profiling starts on off or all, whichever is estimated faster)\n"

/* --help lines of the flags every job command (run, bench) takes alike. */
#define SL_CLI_JOB_USAGE                                                                           \
    "  --local              run every stage on this host\n"                                        \
    "  --dispatcher ADDR    submit to a dispatcher; workers run the offloaded stages\n"            \
    "  --data-root DIR      directory the spec's source path is relative to (default .)\n"         \
    "  --plugin-dir DIR     stage plugins for the spec's \"plugin\" stages (default:\n"            \
    "                       $SLUICE_PLUGIN_DIR)\n" SL_CLI_REMOTE_USAGE                             \
    "  --epochs N           override the spec's epochs\n" SL_CLI_EPOCH_USAGE                       \
    "  --threads N          local decode threads (default: online CPUs)\n"                         \
    "  --offload MODE       off | all | auto | fastflow | K:F (override the "                      \
    "spec)\n" SL_CLI_ALWAYS_PROFILE_USAGE

#define SL_CLI_MAX_RATE 1e9       /* samples/s; more is a typo */
#define SL_CLI_MAX_THREADS 256
#define SL_CLI_MAX_EPOCHS 1000000
#define SL_CLI_MAX_FIRST_EPOCH 4294967295L /* the library checks first + epochs too */
#define SL_CLI_MAX_OWN_OPTIONS 16 /* a command's own flags, at most */
/* Room for what opening a job says: a bad spec's errors, one a line (up to
 * 20 and a count of the rest). */
#define SL_CLI_ERR_MAX 8192

typedef struct sl_cli_opts_s {
    const char *spec;         /* the SPEC argument (commands that take one) */
    const char *dispatcher;
    int local;
    const char *data_root;  /* NULL = not given: the library uses "." */
    const char *plugin_dir; /* NULL: $SLUICE_PLUGIN_DIR */
    const char *remote_roots; /* NULL: $SLUICE_REMOTE_ROOTS (client/lib/remote_opts.h) */
    const char *cache_dir;    /* NULL: $SLUICE_CACHE_DIR */
    uint64_t cache_bytes;     /* 0: $SLUICE_CACHE_BYTES */
    const char *offload;
    unsigned threads;         /* 0 = not given */
    unsigned epochs;          /* 0 = not given (the spec's) */
    uint64_t first_epoch;     /* 0 = from the start */
    long seed;                /* -1 = not given (the spec's) */
    double consumer_rate;     /* -1 = not given */
    int json;
    int always_profile; /* --always-profile */
    sl_cli_ranks_t ranks;
    sl_cli_conn_t conn;
} sl_cli_opts_t;

typedef struct sl_cli_cmd_s {
    const char *name;   /* "run": error messages say "sluice run: ..." */
    unsigned shared;    /* SL_CLI_F_* */
    int takes_spec;     /* 1: exactly one SPEC argument; 0: none */
    /* The command's own flags (NULL-terminated, at most SL_CLI_MAX_OWN_OPTIONS;
     * vals are printable characters other than 'h' and '?'), and the
     * handler they are given to: 0, or -EINVAL after printing why. */
    const struct option *own;
    int (*own_opt)(void *ctx, int c, const char *arg);
    void *ctx;
    void (*usage)(FILE *f);
} sl_cli_cmd_t;

/* Parses argv (argv[0] is the command). --help prints the usage on stdout
 * and exits 0. Returns 0, or -EINVAL after printing a message naming the
 * flag and the accepted values (the caller exits SL_EXIT_USAGE). */
int sl_cli_opts_parse(const sl_cli_cmd_t *cmd, int argc, char **argv, sl_cli_opts_t *o);

/* The library's options of a job from the parsed flags (run, bench). */
void sl_cli_job_options(const sl_cli_opts_t *o, sluice_options_t *so);

/* Helpers for a command's own flags, with the same messages as the shared
 * ones: "sluice CMD: --FLAG: 'ARG' is not ...". 0 or -EINVAL (printed). */
int sl_cli_parse_long(const char *cmd, const char *flag, const char *arg, long lo, long hi,
                      long *ret);
/* lo_open: lo itself is refused, "(lo, hi]"; else "[lo, hi]". */
int sl_cli_parse_double(const char *cmd, const char *flag, const char *arg, double lo,
                        int lo_open, double hi, const char *unit, double *ret);

#endif
