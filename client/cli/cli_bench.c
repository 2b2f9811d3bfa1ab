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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/cli/cli.h"
#include "client/cli/cli_opts.h"
#include "client/cli/cli_watchdog.h"
#include "client/lib/diagnose.h"
#include "client/lib/sluice.h"
#include "common/spec/spec.h"
#include "common/base/clock.h"

/* --seconds S ends a run by S + BENCH_GRACE_SEC even when no batch comes;
 * opening (indexing, profiling, submitting) and closing may each take
 * BENCH_OPEN_GRACE_SEC. Generous: a late batch is normal, only a stuck run
 * should hit them. */
#define BENCH_GRACE_SEC 5.0
#define BENCH_OPEN_GRACE_SEC 30.0

typedef struct {
    sl_cli_opts_t c; /* the shared flags (cli_opts.c); c.consumer_rate is required */
    double seconds;  /* stop after this long; 0 = the whole job */
} bench_opts_t;

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: sluice bench SPEC (--dispatcher HOST:PORT | --local) --consumer-rate IMG_PER_S\n"
            "                    [--seconds N] [--data-root DIR] [--threads N] [--epochs N]\n"
            "                    [--offload off|all|auto|fastflow|K:F] [--json]\n"
            "\n"
            SL_CLI_JOB_USAGE
            "  --consumer-rate R  the emulated training step takes batch_size/R seconds;\n"
            "                     0 = take batches as fast as they come\n"
            "  --seconds N        stop after N seconds (default: the whole job)\n"
            SL_CLI_RANK_USAGE
            "                     --world-size W without --rank runs all W ranks, one\n"
            "                     process each (their reports are prefixed \"rank R:\")\n"
            SL_CLI_CONN_USAGE
            "  --json               print the report as one JSON object on stdout\n"
            "\n"
            "prints delivered samples/s, stall %% (consumer waiting for data), client CPU %%,\n"
            "samples from local and remote processing, and the plan used\n");
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

static int bench_opt(void *ctx, int c, const char *arg)
{
    bench_opts_t *o = ctx;
    if (c != 's') {
        return -EINVAL;
    }
    return sl_cli_parse_double("bench", "seconds", arg, 0, 1, 1e6, "seconds", &o->seconds);
}

static int parse(int argc, char **argv, bench_opts_t *o)
{
    static const struct option OWN[] = {
        {"seconds", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    const sl_cli_cmd_t cmd = {
        .name = "bench",
        .shared = SL_CLI_F_JOB,
        .takes_spec = 1,
        .own = OWN,
        .own_opt = bench_opt,
        .ctx = o,
        .usage = bench_usage,
    };
    memset(o, 0, sizeof(*o));
    int rc = sl_cli_opts_parse(&cmd, argc, argv, &o->c);
    if (rc == 0 && o->c.consumer_rate < 0) {
        fprintf(stderr, "sluice bench: --consumer-rate is required (0 = as fast as possible)\n");
        return -EINVAL;
    }
    return rc;
}

/* --world-size W without --rank: one consumer process per rank, as W GPUs'
 * training processes would be. Forks before any gRPC state exists (the
 * library starts gRPC in sluice_open). Returns in the parent with the worst
 * exit status, or in a child (*ret_child = 1) with o->ranks.rank set. */
static int fork_ranks(bench_opts_t *o, int *ret_child)
{
    long w = o->c.ranks.world_size;
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
            o->c.ranks.rank = r;
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

/* What the run measured. */
typedef struct {
    uint64_t samples, batches;
    double seconds; /* from the first next_batch to the end */
    double wait;    /* inside next_batch */
    double cpu;     /* this process */
} bench_result_t;

/* The watchdog that enforces --seconds from outside the library, or NULL
 * without --seconds: sluice_next_batch cannot be interrupted and waits as
 * long as nothing comes (no workers; a dispatcher gone for less than its
 * timeout). Returns -1 when it cannot start (printed). */
static int start_watchdog(const bench_opts_t *o, const char *tag, sl_cli_watchdog_t **ret)
{
    *ret = NULL;
    if (o->seconds <= 0) {
        return 0;
    }
    char what[256];
    snprintf(what, sizeof(what),
             "bench: %sstuck: still running past --seconds %g and its grace (no batches "
             "or no answers: dispatcher unreachable or no workers?)",
             tag, o->seconds);
    *ret = sl_cli_watchdog_new(what, sl_mono_sec() + o->seconds + BENCH_OPEN_GRACE_SEC);
    if (*ret == NULL) {
        fprintf(stderr, "sluice bench: %swatchdog thread: %s\n", tag, strerror(errno));
        return -1;
    }
    return 0;
}

/* sl_cli_watchdog_describe_fn over a job (client/lib/diagnose.h). */
static int describe_job(void *arg, char *buf, size_t len)
{
    return cl_job_diagnose(arg, buf, len);
}

/* The emulated training loop: takes batches until the job ends or --seconds
 * pass. Returns an exit status. */
static int consume(const bench_opts_t *o, sluice_job_t *job, sl_cli_watchdog_t *wd,
                   const char *tag, bench_result_t *r)
{
    int progress = !o->c.json && tag[0] == '\0' && isatty(STDERR_FILENO);
    double t0 = sl_mono_sec(), cpu0 = sl_process_cpu_sec(), last = t0, next_step = t0;
    int status = SL_EXIT_OK;
    memset(r, 0, sizeof(*r));
    if (wd != NULL) {
        sl_cli_watchdog_set(wd, t0 + o->seconds + BENCH_GRACE_SEC);
    }
    for (;;) {
        double tw = sl_mono_sec();
        if (o->seconds > 0 && tw - t0 >= o->seconds) {
            break;
        }
        sluice_batch_t *b = NULL;
        int rc = sluice_next_batch(job, &b);
        double got = sl_mono_sec();
        r->wait += got - tw;
        if (rc == 1) {
            break;
        }
        if (rc < 0) {
            fprintf(stderr, "%ssluice bench: %s%s\n", progress ? "\n" : "", tag,
                    sluice_last_error(job));
            status = SL_EXIT_RUNTIME;
            break;
        }
        r->samples += b->n;
        r->batches++;
        if (wd != NULL) {
            sl_cli_watchdog_progress(wd, r->samples);
        }
        /* The emulated GPU step: busy for n / rate seconds from when it got
         * the batch (or from the end of the previous step, if it was late). */
        double step = o->c.consumer_rate > 0 ? (double)b->n / o->c.consumer_rate : 0;
        sluice_release_batch(job, b);
        next_step = (got > next_step ? got : next_step) + step;
        /* A slow emulated step must not carry the run past --seconds. */
        sleep_until(o->seconds > 0 && next_step > t0 + o->seconds ? t0 + o->seconds : next_step);
        double t = sl_mono_sec();
        if (progress && t - last >= 1.0) {
            last = t;
            fprintf(stderr, "\r%.0f s  %llu samples  %.1f samples/s  stall %.1f %%   ", t - t0,
                    (unsigned long long)r->samples, (double)r->samples / (t - t0),
                    100.0 * r->wait / (t - t0));
            fflush(stderr);
        }
    }
    r->seconds = sl_mono_sec() - t0;
    r->cpu = sl_process_cpu_sec() - cpu0;
    if (progress) {
        fprintf(stderr, "\n");
    }
    return status;
}

static void print_json(const bench_opts_t *o, const sluice_stats_t *st, const bench_result_t *r)
{
    double secs = r->seconds;
    json_t *j = json_object();
    json_object_set_new(j, "samples", json_integer((json_int_t)r->samples));
    json_object_set_new(j, "batches", json_integer((json_int_t)r->batches));
    json_object_set_new(j, "seconds", json_real(secs));
    json_object_set_new(j, "samples_per_sec",
                        json_real(secs > 0 ? (double)r->samples / secs : 0));
    json_object_set_new(j, "consumer_rate", json_real(o->c.consumer_rate));
    json_object_set_new(j, "stall_fraction", json_real(secs > 0 ? r->wait / secs : 0));
    json_object_set_new(j, "client_cpu_fraction", json_real(secs > 0 ? r->cpu / secs : 0));
    json_object_set_new(j, "skipped", json_integer((json_int_t)st->skipped));
    json_t *src = json_object();
    json_object_set_new(src, "local", json_integer((json_int_t)st->from_local));
    json_object_set_new(src, "remote", json_integer((json_int_t)st->from_remote));
    json_object_set_new(j, "sources", src);
    json_t *plan = json_object();
    json_object_set_new(plan, "mode", json_string(st->plan_mode));
    json_object_set_new(plan, "split", json_integer(st->plan_split));
    json_object_set_new(plan, "local_share", json_real(st->plan_local_share));
    json_object_set_new(plan, "compress", json_boolean(st->plan_compress));
    if (st->plan_version > 0 &&
        (strcmp(st->plan_mode, "auto") == 0 || strcmp(st->plan_mode, "fastflow") == 0)) {
        /* The planner's prediction for the plan in force at the end (the last
         * re-plan), next to the measured rate, as `sluice run --json` has it. */
        json_object_set_new(plan, "version", json_integer(st->plan_version));
        json_object_set_new(plan, "predicted_samples_per_sec", json_real(st->plan_predicted));
        json_object_set_new(plan, "binding", json_string(st->plan_binding));
        json_object_set_new(plan, "profile_seconds", json_real(st->profile_seconds));
    }
    json_object_set_new(j, "plan", plan);
    if (o->c.ranks.world_size > 1) {
        json_object_set_new(j, "rank", json_integer(o->c.ranks.rank));
        json_object_set_new(j, "world_size", json_integer(o->c.ranks.world_size));
    }
    char *s = json_dumps(j, JSON_COMPACT);
    if (s != NULL) {
        printf("%s\n", s);
        free(s);
    }
    json_decref(j);
}

static void print_text(const char *tag, const sluice_stats_t *st, const bench_result_t *r)
{
    double secs = r->seconds;
    printf("%ssamples/s %.1f  stall %.1f %%  client CPU %.0f %%  local %llu / remote %llu  "
           "plan %s split=%u share=%.2f\n",
           tag, secs > 0 ? (double)r->samples / secs : 0, 100 * (secs > 0 ? r->wait / secs : 0),
           100 * r->cpu / (secs > 0 ? secs : 1), (unsigned long long)st->from_local,
           (unsigned long long)st->from_remote, st->plan_mode, st->plan_split,
           st->plan_local_share);
}

int sl_cli_bench(int argc, char **argv)
{
    bench_opts_t o;
    if (parse(argc, argv, &o) < 0) {
        return SL_EXIT_USAGE;
    }
    char tag[32] = "";
    if (o.c.ranks.world_size > 1 && o.c.ranks.rank < 0) {
        int child = 0;
        int st = fork_ranks(&o, &child);
        if (!child) {
            return st;
        }
    }
    if (o.c.ranks.world_size > 1) {
        snprintf(tag, sizeof(tag), "rank %ld: ", o.c.ranks.rank);
    }
    /* The emulated consumer's rate is exactly what the planner should aim for. */
    sluice_options_t so;
    sl_cli_job_options(&o.c, &so);
    sl_cli_watchdog_t *wd = NULL;
    if (start_watchdog(&o, tag, &wd) < 0) {
        return SL_EXIT_RUNTIME;
    }
    char err[SL_CLI_ERR_MAX];
    sluice_job_t *job = NULL;
    int rc = sluice_open(o.c.spec, &so, &job, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "sluice bench: %s%s\n", tag, err);
        sl_cli_watchdog_free(wd);
        return rc == -EINVAL ? SL_EXIT_USAGE : SL_EXIT_RUNTIME;
    }
    if (wd != NULL) {
        sl_cli_watchdog_describe(wd, describe_job, job);
    }
    bench_result_t r;
    int status = consume(&o, job, wd, tag, &r);
    int warned = 0;
    sl_cli_warn_fallback("bench", job, &warned);
    if (wd != NULL) {
        /* Closing tells the dispatcher (bounded by RPC deadlines, which a
         * frozen dispatcher may each use up): the open allowance again. */
        sl_cli_watchdog_set(wd, sl_mono_sec() + BENCH_OPEN_GRACE_SEC);
    }
    sluice_stats_t st;
    sluice_get_stats(job, &st);
    if (o.c.json) {
        print_json(&o, &st, &r);
    } else {
        print_text(tag, &st, &r);
    }
    if (wd != NULL) {
        sl_cli_watchdog_describe(wd, NULL, NULL); /* the job goes away */
    }
    sluice_close(job);
    sl_cli_watchdog_free(wd);
    return status;
}
