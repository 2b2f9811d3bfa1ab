/* `sluice bench`: a synthetic consumer standing in for a GPU training step.
 * It takes a batch every batch_size / consumer_rate seconds (or as fast as it
 * can) and reports what a user sizing a cluster wants to know: delivered
 * samples/s, the stall fraction (time the consumer waited for data / total),
 * the client's CPU use, and the plan with its prediction. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/cli_conn.h"
#include "client/sluice.h"
#include "common/spec.h"
#include "common/clock.h"

typedef struct {
    const char *spec;
    const char *dispatcher;
    const char *data_root;
    const char *offload;
    double rate;    /* samples/s the consumer takes; 0 = as fast as possible */
    double seconds; /* stop after this long; 0 = the whole job */
    unsigned threads;
    unsigned epochs;
    int local;
    int json;
    sl_cli_ranks_t ranks;
    sl_cli_conn_t conn;
} bench_opts_t;

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: sluice bench SPEC (--dispatcher HOST:PORT | --local) --consumer-rate IMG_PER_S\n"
            "                    [--seconds N] [--data-root DIR] [--threads N] [--epochs N]\n"
            "                    [--offload off|all|auto|fastflow|K:F] [--json]\n"
            "\n"
            "  --consumer-rate R  the emulated training step takes batch_size/R seconds;\n"
            "                     0 = take batches as fast as they come\n"
            "  --seconds N        stop after N seconds (default: the whole job)\n"
            SL_CLI_RANK_USAGE
            "                     --world-size W without --rank runs all W ranks, one\n"
            "                     process each (their reports are prefixed \"rank R:\")\n"
            SL_CLI_CONN_USAGE
            "\n"
            "prints delivered samples/s, stall %% (consumer waiting for data), client CPU %%,\n"
            "samples from local and remote processing, and the plan used\n");
}

static double cpu_sec(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void sleep_until(double t)
{
    double d = t - sl_mono_sec();
    if (d <= 0) {
        return;
    }
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static int parse(int argc, char **argv, bench_opts_t *o)
{
    static const struct option LONG[] = {
        {"dispatcher", required_argument, NULL, 'd'}, {"local", no_argument, NULL, 'l'},
        {"consumer-rate", required_argument, NULL, 'r'}, {"seconds", required_argument, NULL, 's'},
        {"data-root", required_argument, NULL, 'D'}, {"threads", required_argument, NULL, 't'},
        {"epochs", required_argument, NULL, 'e'},   {"offload", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},           {"help", no_argument, NULL, 'h'},
        SL_CLI_RANK_OPTIONS,
        SL_CLI_CONN_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    sl_cli_ranks_init(&o->ranks);
    sl_cli_conn_init(&o->conn);
    o->rate = -1;
    o->data_root = ".";
    optind = 1;
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "h", LONG, NULL)) != -1) {
        int rr = sl_cli_ranks_opt("bench", c, optarg, &o->ranks);
        if (rr == 0) {
            rr = sl_cli_conn_opt("bench", c, optarg, &o->conn);
        }
        if (rr != 0) {
            if (rr < 0) {
                return rr;
            }
            continue;
        }
        switch (c) {
        case 'd':
            o->dispatcher = optarg;
            break;
        case 'l':
            o->local = 1;
            break;
        case 'r':
            o->rate = strtod(optarg, &end);
            if (*end != '\0' || o->rate < 0 || o->rate > 1e7) {
                fprintf(stderr, "sluice bench: --consumer-rate: '%s' is not in 0..1e7\n", optarg);
                return -EINVAL;
            }
            break;
        case 's':
            o->seconds = strtod(optarg, &end);
            if (*end != '\0' || o->seconds <= 0 || o->seconds > 1e6) {
                fprintf(stderr, "sluice bench: --seconds: '%s' is not a positive number\n",
                        optarg);
                return -EINVAL;
            }
            break;
        case 'D':
            o->data_root = optarg;
            break;
        case 't':
        case 'e': {
            long v = strtol(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > 1000000) {
                fprintf(stderr, "sluice bench: --%s: '%s' is not a positive integer\n",
                        c == 't' ? "threads" : "epochs", optarg);
                return -EINVAL;
            }
            if (c == 't') {
                o->threads = (unsigned)v;
            } else {
                o->epochs = (unsigned)v;
            }
            break;
        }
        case 'o':
            o->offload = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            bench_usage(stdout);
            exit(SL_EXIT_OK);
        default:
            bench_usage(stderr);
            return -EINVAL;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "sluice bench: expected exactly one SPEC argument\n");
        return -EINVAL;
    }
    o->spec = argv[optind];
    if (o->local == (o->dispatcher != NULL)) {
        fprintf(stderr, "sluice bench: give exactly one of --dispatcher and --local\n");
        return -EINVAL;
    }
    if (o->rate < 0) {
        fprintf(stderr, "sluice bench: --consumer-rate is required (0 = as fast as possible)\n");
        return -EINVAL;
    }
    return sl_cli_ranks_check("bench", &o->ranks);
}

/* --world-size W without --rank: one consumer process per rank, as W GPUs'
 * training processes would be. Forks before any gRPC state exists (the
 * library starts gRPC in sluice_open). Returns in the parent with the worst
 * exit status, or in a child (*ret_child = 1) with o->ranks.rank set. */
static int fork_ranks(bench_opts_t *o, int *ret_child)
{
    long w = o->ranks.world_size;
    pid_t pids[SL_SPEC_WORLD_MAX];
    long started = 0;
    int status = SL_EXIT_OK;
    *ret_child = 0;
    fflush(NULL);
    for (long r = 0; r < w; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "sluice bench: fork: %s\n", strerror(errno));
            status = SL_EXIT_RUNTIME;
            break;
        }
        if (pid == 0) {
            o->ranks.rank = r;
            *ret_child = 1;
            return SL_EXIT_OK;
        }
        pids[started++] = pid;
    }
    for (long i = 0; i < started; i++) {
        int ws = 0;
        while (waitpid(pids[i], &ws, 0) < 0 && errno == EINTR) {
        }
        int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : SL_EXIT_RUNTIME;
        status = code > status ? code : status;
    }
    return status;
}

int sl_cli_bench(int argc, char **argv)
{
    bench_opts_t o;
    if (parse(argc, argv, &o) < 0) {
        return SL_EXIT_USAGE;
    }
    char tag[32] = "";
    if (o.ranks.world_size > 1 && o.ranks.rank < 0) {
        int child = 0;
        int st = fork_ranks(&o, &child);
        if (!child) {
            return st;
        }
    }
    if (o.ranks.world_size > 1) {
        snprintf(tag, sizeof(tag), "rank %ld: ", o.ranks.rank);
    }
    char err[1024];
    /* The emulated consumer's rate is exactly what the planner should aim for. */
    sluice_options_t so = {.dispatcher = o.dispatcher, .data_root = o.data_root,
                           .threads = o.threads, .offload = o.offload, .epochs = o.epochs,
                           .consumer_rate = o.rate};
    sl_cli_ranks_apply(&o.ranks, &so);
    sl_cli_conn_apply(&o.conn, &so);
    sluice_job_t *job = NULL;
    int rc = sluice_open(o.spec, &so, &job, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "sluice bench: %s%s\n", tag, err);
        return rc == -EINVAL ? SL_EXIT_USAGE : SL_EXIT_RUNTIME;
    }
    int progress = !o.json && tag[0] == '\0' && isatty(STDERR_FILENO);
    double t0 = sl_mono_sec(), cpu0 = cpu_sec(), wait = 0, last = t0, next_step = t0;
    uint64_t samples = 0, batches = 0;
    int status = SL_EXIT_OK;
    for (;;) {
        double tw = sl_mono_sec();
        if (o.seconds > 0 && tw - t0 >= o.seconds) {
            break;
        }
        sluice_batch_t *b = NULL;
        rc = sluice_next_batch(job, &b);
        double got = sl_mono_sec();
        wait += got - tw;
        if (rc == 1) {
            break;
        }
        if (rc < 0) {
            fprintf(stderr, "%ssluice bench: %s%s\n", progress ? "\n" : "", tag,
                    sluice_last_error(job));
            status = SL_EXIT_RUNTIME;
            break;
        }
        samples += b->n;
        batches++;
        /* The emulated GPU step: busy for n / rate seconds from when it got
         * the batch (or from the end of the previous step, if it was late). */
        double step = o.rate > 0 ? (double)b->n / o.rate : 0;
        sluice_release_batch(job, b);
        next_step = (got > next_step ? got : next_step) + step;
        sleep_until(next_step);
        double t = sl_mono_sec();
        if (progress && t - last >= 1.0) {
            last = t;
            fprintf(stderr, "\r%.0f s  %llu samples  %.1f samples/s  stall %.1f %%   ", t - t0,
                    (unsigned long long)samples, (double)samples / (t - t0),
                    100.0 * wait / (t - t0));
            fflush(stderr);
        }
    }
    double secs = sl_mono_sec() - t0;
    double cpu = cpu_sec() - cpu0;
    if (progress) {
        fprintf(stderr, "\n");
    }
    sluice_stats_t st;
    sluice_get_stats(job, &st);
    double rate = secs > 0 ? (double)samples / secs : 0;
    double stall = secs > 0 ? wait / secs : 0;
    if (o.json) {
        json_t *j = json_object();
        json_object_set_new(j, "samples", json_integer((json_int_t)samples));
        json_object_set_new(j, "batches", json_integer((json_int_t)batches));
        json_object_set_new(j, "seconds", json_real(secs));
        json_object_set_new(j, "samples_per_sec", json_real(rate));
        json_object_set_new(j, "consumer_rate", json_real(o.rate));
        json_object_set_new(j, "stall_fraction", json_real(stall));
        json_object_set_new(j, "client_cpu_fraction", json_real(secs > 0 ? cpu / secs : 0));
        json_object_set_new(j, "skipped", json_integer((json_int_t)st.skipped));
        json_t *src = json_object();
        json_object_set_new(src, "local", json_integer((json_int_t)st.from_local));
        json_object_set_new(src, "remote", json_integer((json_int_t)st.from_remote));
        json_object_set_new(j, "sources", src);
        json_t *plan = json_object();
        json_object_set_new(plan, "mode", json_string(st.plan_mode));
        json_object_set_new(plan, "split", json_integer(st.plan_split));
        json_object_set_new(plan, "local_share", json_real(st.plan_local_share));
        json_object_set_new(j, "plan", plan);
        if (o.ranks.world_size > 1) {
            json_object_set_new(j, "rank", json_integer(o.ranks.rank));
            json_object_set_new(j, "world_size", json_integer(o.ranks.world_size));
        }
        char *s = json_dumps(j, JSON_COMPACT);
        if (s != NULL) {
            printf("%s\n", s);
            free(s);
        }
        json_decref(j);
    } else {
        printf("%ssamples/s %.1f  stall %.1f %%  client CPU %.0f %%  local %llu / remote %llu  "
               "plan %s split=%u share=%.2f\n",
               tag, rate, 100 * stall, 100 * cpu / (secs > 0 ? secs : 1),
               (unsigned long long)st.from_local, (unsigned long long)st.from_remote,
               st.plan_mode, st.plan_split, st.plan_local_share);
    }
    sluice_close(job);
    return status;
}
