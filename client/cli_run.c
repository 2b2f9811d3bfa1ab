/* `sluice run`: one spec, every epoch, locally or through a dispatcher. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/cli_conn.h"
#include "client/sluice.h"
#include "common/clock.h"

typedef struct {
    const char *spec_path;
    const char *dispatcher;
    const char *data_root;
    const char *digests;
    const char *offload;
    int local;
    int json;
    int quiet;
    unsigned threads;
    long epochs;     /* 0 = spec's */
    double max_rate; /* samples per second the consumer takes at most; 0 = no limit */
    double consumer_rate; /* planner target, samples/s; 0 = measured while running */
    sl_cli_ranks_t ranks;
    sl_cli_conn_t conn;
} run_opts_t;

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: sluice run SPEC (--local | --dispatcher HOST:PORT) [options]\n"
            "\n"
            "  --local              run every stage on this host\n"
            "  --dispatcher ADDR    submit to a dispatcher; workers run the offloaded stages\n"
            "  --data-root DIR      directory the spec's source path is relative to (default .)\n"
            "  --epochs N           override the spec's epochs\n"
            "  --threads N          local decode threads (default: online CPUs)\n"
            "  --offload MODE       off | all | auto | fastflow | K:F (override the spec)\n"
            "  --digests FILE       write 'EPOCH INDEX LABEL SHA256' per delivered sample\n"
            "  --max-rate IMG_PER_S take batches no faster than this many samples per second,\n"
            "                       like a training loop of that speed (default: no limit)\n"
            "  --consumer-rate IMG_PER_S\n"
            "                       the training loop's rate the planner plans for (auto,\n"
            "                       fastflow); default: unlimited, then measured\n"
            SL_CLI_RANK_USAGE
            SL_CLI_CONN_USAGE
            "  --json               print one JSON summary object on stdout at the end\n"
            "  --quiet              no progress line\n"
            "\n"
            "exit status: 0 success, 1 runtime failure, 2 usage or spec error\n");
}

static int parse_uint(const char *s, long lo, long hi, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int parse_opts(int argc, char **argv, run_opts_t *o)
{
    static const struct option LONG[] = {
        {"local", no_argument, NULL, 'l'},        {"dispatcher", required_argument, NULL, 'd'},
        {"data-root", required_argument, NULL, 'r'}, {"epochs", required_argument, NULL, 'e'},
        {"threads", required_argument, NULL, 't'},   {"offload", required_argument, NULL, 'o'},
        {"digests", required_argument, NULL, 'g'},   {"json", no_argument, NULL, 'j'},
        {"quiet", no_argument, NULL, 'q'},           {"help", no_argument, NULL, 'h'},
        {"max-rate", required_argument, NULL, 'm'},
        {"consumer-rate", required_argument, NULL, 'c'},
        SL_CLI_RANK_OPTIONS,
        SL_CLI_CONN_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->data_root = ".";
    sl_cli_ranks_init(&o->ranks);
    sl_cli_conn_init(&o->conn);
    int c;
    long v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", LONG, NULL)) != -1) {
        int rr = sl_cli_ranks_opt("run", c, optarg, &o->ranks);
        if (rr == 0) {
            rr = sl_cli_conn_opt("run", c, optarg, &o->conn);
        }
        if (rr != 0) {
            if (rr < 0) {
                return rr;
            }
            continue;
        }
        switch (c) {
        case 'l':
            o->local = 1;
            break;
        case 'd':
            o->dispatcher = optarg;
            break;
        case 'r':
            o->data_root = optarg;
            break;
        case 'e':
            if (parse_uint(optarg, 1, 1000000, &v) < 0) {
                fprintf(stderr, "sluice run: --epochs: '%s' is not an integer in 1..1000000\n",
                        optarg);
                return -EINVAL;
            }
            o->epochs = v;
            break;
        case 't':
            if (parse_uint(optarg, 1, 256, &v) < 0) {
                fprintf(stderr, "sluice run: --threads: '%s' is not an integer in 1..256\n",
                        optarg);
                return -EINVAL;
            }
            o->threads = (unsigned)v;
            break;
        case 'o':
            o->offload = optarg;
            break;
        case 'g':
            o->digests = optarg;
            break;
        case 'm': {
            char *end;
            errno = 0;
            double r = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(r > 0) || r > 1e9) {
                fprintf(stderr, "sluice run: --max-rate: '%s' is not a rate in (0, 1e9] "
                                "samples/s\n",
                        optarg);
                return -EINVAL;
            }
            o->max_rate = r;
            break;
        }
        case 'c': {
            char *end;
            errno = 0;
            double r = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(r > 0) || r > 1e9) {
                fprintf(stderr, "sluice run: --consumer-rate: '%s' is not a rate in (0, 1e9] "
                                "samples/s\n",
                        optarg);
                return -EINVAL;
            }
            o->consumer_rate = r;
            break;
        }
        case 'j':
            o->json = 1;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case 'h':
            run_usage(stdout);
            exit(SL_EXIT_OK);
        default:
            run_usage(stderr);
            return -EINVAL;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "sluice run: expected exactly one SPEC argument\n");
        run_usage(stderr);
        return -EINVAL;
    }
    o->spec_path = argv[optind];
    if (o->local == (o->dispatcher != NULL)) {
        fprintf(stderr, "sluice run: give exactly one of --local and --dispatcher\n");
        return -EINVAL;
    }
    return sl_cli_ranks_check("run", &o->ranks);
}

int sl_cli_run(int argc, char **argv)
{
    run_opts_t o;
    if (parse_opts(argc, argv, &o) < 0) {
        return SL_EXIT_USAGE;
    }
    double t0 = sl_mono_sec();
    char err[1024];
    sluice_options_t so = {.dispatcher = o.dispatcher, .data_root = o.data_root,
                           .threads = o.threads, .offload = o.offload,
                           .epochs = (unsigned)o.epochs, .consumer_rate = o.consumer_rate};
    sl_cli_ranks_apply(&o.ranks, &so);
    sl_cli_conn_apply(&o.conn, &so);
    sluice_job_t *job = NULL;
    int rc = sluice_open(o.spec_path, &so, &job, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "sluice run: %s\n", err);
        return rc == -EINVAL ? SL_EXIT_USAGE : SL_EXIT_RUNTIME;
    }
    FILE *digests = NULL;
    if (o.digests != NULL) {
        digests = fopen(o.digests, "we");
        if (digests == NULL) {
            fprintf(stderr, "sluice run: cannot write '%s': %s\n", o.digests, strerror(errno));
            sluice_close(job);
            return SL_EXIT_RUNTIME;
        }
    }
    int progress = !o.quiet && isatty(STDERR_FILENO);
    int status = SL_EXIT_OK;
    double last = t0;
    uint64_t delivered = 0;
    for (;;) {
        if (o.max_rate > 0) {
            /* A consumer of max_rate samples/s: the next batch is taken no
             * sooner than delivered / max_rate after the start. Meanwhile
             * nothing is read, so back-pressure reaches the workers. */
            double wait = t0 + (double)delivered / o.max_rate - sl_mono_sec();
            if (wait > 0) {
                struct timespec ts = {.tv_sec = (time_t)wait,
                                      .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
                }
            }
        }
        sluice_batch_t *b = NULL;
        rc = sluice_next_batch(job, &b);
        if (rc == 1) {
            break;
        }
        if (rc < 0) {
            fprintf(stderr, "%ssluice run: %s\n", progress ? "\n" : "", sluice_last_error(job));
            status = SL_EXIT_RUNTIME;
            break;
        }
        delivered += b->n;
        /* Multi-rank: flushed per batch, so the file matches what the rank
         * delivered even when it is killed (and restarted: it resumes). */
        if (digests != NULL && (sl_cli_write_digests(digests, b) < 0 ||
                                (o.ranks.world_size > 1 && fflush(digests) != 0))) {
            fprintf(stderr, "sluice run: writing '%s' failed: %s\n", o.digests, strerror(errno));
            status = SL_EXIT_RUNTIME;
            sluice_release_batch(job, b);
            break;
        }
        uint64_t epoch = b->epoch;
        sluice_release_batch(job, b);
        double t = sl_mono_sec();
        if (progress && t - last >= 0.5) {
            last = t;
            fprintf(stderr, "\repoch %llu  %llu samples  %.1f samples/s  ",
                    (unsigned long long)epoch + 1, (unsigned long long)delivered,
                    (double)delivered / (t - t0));
            fflush(stderr);
        }
    }
    if (progress) {
        fprintf(stderr, "\n");
    }
    if (digests != NULL && fclose(digests) != 0) {
        fprintf(stderr, "sluice run: writing '%s' failed: %s\n", o.digests, strerror(errno));
        status = SL_EXIT_RUNTIME;
    }
    double seconds = sl_mono_sec() - t0;
    if (o.json) {
        sl_cli_print_json(job, seconds);
    }
    if (!o.quiet) {
        sl_cli_print_text(job, seconds);
    }
    sluice_close(job);
    return status;
}
