/* `sluice run`: one spec, every epoch, locally or through a dispatcher. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/cli/cli.h"
#include "client/cli/cli_opts.h"
#include "client/lib/sluice.h"
#include "common/base/clock.h"

#define RUN_MAX_RESUME 4096 /* states of one run: its world size at most */

typedef struct {
    sl_cli_opts_t c; /* the shared flags (cli_opts.c) */
    const char *digests;
    const char *dump;
    int quiet;
    double max_rate; /* samples per second the consumer takes at most; 0 = no limit */
    const char *save_state;
    long save_every;   /* batches between saves (1) */
    long stop_after;   /* batches; 0 = run to the end */
    const char *resume[RUN_MAX_RESUME];
    unsigned nresume;
} run_opts_t;

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: sluice run SPEC (--local | --dispatcher HOST:PORT) [options]\n"
            "\n"
            SL_CLI_JOB_USAGE
            "  --digests FILE       write 'EPOCH INDEX LABEL SHA256' per delivered sample\n"
            "                       (KEY instead of LABEL for a multimodal spec)\n"
            "  --dump FILE          multimodal specs: one JSON line per delivered sample\n"
            "                       (epoch, index, key, label, tokens, images, tiles, seq_len)\n"
            "  --max-rate IMG_PER_S take batches no faster than this many samples per second,\n"
            "                       like a training loop of that speed (default: no limit)\n"
            "  --save-state FILE    after every batch (or --save-every N batches) and at the\n"
            "                       end, write this rank's position there atomically: what\n"
            "                       the batches so far consumed (resume with --resume)\n"
            "  --save-every N       batches between two saves (default 1)\n"
            "  --stop-after-batches N\n"
            "                       stop after N batches (saving the state first), like a\n"
            "                       preempted training job\n"
            "  --resume FILE        continue where a saved run stopped: its remaining samples,\n"
            "                       exactly once, with the same bytes; repeat for the state of\n"
            "                       every rank of that run (this run's world size may differ)\n"
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

static int run_opt(void *ctx, int c, const char *arg)
{
    run_opts_t *o = ctx;
    switch (c) {
    case 'g':
        o->digests = arg;
        return 0;
    case 'D':
        o->dump = arg;
        return 0;
    case 'q':
        o->quiet = 1;
        return 0;
    case 'm':
        return sl_cli_parse_double("run", "max-rate", arg, 0, 1, SL_CLI_MAX_RATE, "samples/s",
                                   &o->max_rate);
    case 'S':
        o->save_state = arg;
        return 0;
    case 'E':
        return sl_cli_parse_long("run", "save-every", arg, 1, 1L << 40, &o->save_every);
    case 'A':
        return sl_cli_parse_long("run", "stop-after-batches", arg, 1, 1L << 40, &o->stop_after);
    case 'R':
        if (o->nresume == RUN_MAX_RESUME) {
            fprintf(stderr, "sluice run: --resume: more than %d states\n", RUN_MAX_RESUME);
            return -EINVAL;
        }
        o->resume[o->nresume++] = arg;
        return 0;
    default:
        return -EINVAL;
    }
}

static int parse_opts(int argc, char **argv, run_opts_t *o)
{
    static const struct option OWN[] = {
        {"digests", required_argument, NULL, 'g'},
        {"dump", required_argument, NULL, 'D'},
        {"quiet", no_argument, NULL, 'q'},
        {"max-rate", required_argument, NULL, 'm'},
        {"save-state", required_argument, NULL, 'S'},
        {"save-every", required_argument, NULL, 'E'},
        {"stop-after-batches", required_argument, NULL, 'A'},
        {"resume", required_argument, NULL, 'R'},
        {NULL, 0, NULL, 0},
    };
    const sl_cli_cmd_t cmd = {
        .name = "run",
        .shared = SL_CLI_F_JOB,
        .takes_spec = 1,
        .own = OWN,
        .own_opt = run_opt,
        .ctx = o,
        .usage = run_usage,
    };
    memset(o, 0, sizeof(*o));
    o->save_every = 1;
    return sl_cli_opts_parse(&cmd, argc, argv, &o->c);
}

/* An output file of `run` (NULL path: none). */
static int open_out(const char *what, const char *path, FILE **ret)
{
    *ret = NULL;
    if (path == NULL) {
        return 0;
    }
    *ret = fopen(path, "we");
    if (*ret == NULL) {
        fprintf(stderr, "sluice run: --%s: cannot write '%s': %s\n", what, path, strerror(errno));
        return -1;
    }
    return 0;
}

static int close_out(const char *path, FILE *f)
{
    if (f != NULL && fclose(f) != 0) {
        fprintf(stderr, "sluice run: writing '%s' failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* One run: its options, the open job and its output files, and the
 * counts the loop keeps. */
typedef struct {
    run_opts_t o;
    sluice_job_t *job;
    FILE *digests, *dump;
    double t0, last; /* start; the last progress line */
    int progress;    /* a progress line on stderr */
    int warned;      /* the fallback warning was printed (sl_cli_warn_fallback) */
    int status;      /* SL_EXIT_* */
    uint64_t delivered, batches;
    uint64_t by_source[SL_CLI_MIX_MAX]; /* a mixed job's samples per source */
} run_t;

/* Opens the job, with the states to resume from. Returns SL_EXIT_OK, or the
 * exit status after printing why not. */
static int open_job(run_t *r)
{
    char err[SL_CLI_ERR_MAX]; /* a bad spec lists every error, one a line */
    sluice_options_t so;
    sl_cli_job_options(&r->o.c, &so);
    char **states = NULL;
    size_t *state_lens = NULL;
    if (r->o.nresume > 0 &&
        sl_cli_read_states(r->o.resume, r->o.nresume, &states, &state_lens) < 0) {
        return SL_EXIT_USAGE;
    }
    so.resume_states = (const char *const *)states;
    so.resume_state_lens = state_lens;
    so.n_resume_states = r->o.nresume;
    int rc = sluice_open(r->o.c.spec, &so, &r->job, err, sizeof(err));
    sl_cli_free_states(states, state_lens, r->o.nresume);
    if (rc < 0) {
        fprintf(stderr, "sluice run: %s\n", err);
        return rc == -EINVAL ? SL_EXIT_USAGE : SL_EXIT_RUNTIME;
    }
    const char *no_secret = sluice_secret_warning(r->job);
    if (no_secret != NULL) {
        fprintf(stderr, "sluice run: warning: %s\n", no_secret);
    }
    return SL_EXIT_OK;
}

/* A consumer of max_rate samples/s: the next batch is taken no sooner than
 * delivered / max_rate after the start. Meanwhile nothing is read, so
 * back-pressure reaches the workers. */
static void pace(const run_t *r)
{
    if (r->o.max_rate <= 0) {
        return;
    }
    double wait = r->t0 + (double)r->delivered / r->o.max_rate - sl_mono_sec();
    if (wait > 0) {
        struct timespec ts = {.tv_sec = (time_t)wait,
                              .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
}

/* b's lines into --digests and --dump. Returns 0, or -1 after printing why. */
static int write_batch(run_t *r, sluice_batch_t *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        int j = sluice_sample_source(r->job, b->indices[i]);
        r->by_source[j >= 0 && j < SL_CLI_MIX_MAX ? j : 0] += j >= 0;
    }
    /* Multi-rank: flushed per batch, so the file matches what the rank
     * delivered even when it is killed (and restarted: it resumes). */
    int flush = r->o.c.ranks.world_size > 1;
    if (r->digests != NULL &&
        (sl_cli_write_digests(r->digests, r->job, b) < 0 || (flush && fflush(r->digests) != 0))) {
        fprintf(stderr, "sluice run: writing '%s' failed: %s\n", r->o.digests, strerror(errno));
        return -1;
    }
    if (r->dump != NULL &&
        (sl_cli_write_dump(r->dump, r->job, b) < 0 || (flush && fflush(r->dump) != 0))) {
        fprintf(stderr, "sluice run: --dump '%s': %s\n", r->o.dump,
                b->dtype != SLUICE_DT_RECORD ? "the spec's samples are not records "
                                               "(a webdataset or jsonl source)"
                                             : strerror(errno));
        return -1;
    }
    return 0;
}

/* After a batch of epoch was taken: the state saved when due, and the
 * progress line. Returns 0 to go on, 1 to stop (--stop-after-batches), -1
 * when saving failed. */
static int after_batch(run_t *r, uint64_t epoch)
{
    r->batches++;
    int stop = r->o.stop_after > 0 && r->batches >= (uint64_t)r->o.stop_after;
    if (r->o.save_state != NULL && (stop || r->batches % (uint64_t)r->o.save_every == 0) &&
        sl_cli_save_state(r->job, r->o.save_state) < 0) {
        return -1;
    }
    if (stop) {
        return 1;
    }
    double t = sl_mono_sec();
    if (r->progress && t - r->last >= 0.5) {
        r->last = t;
        fprintf(stderr, "\repoch %llu  %llu samples  %.1f samples/s  ",
                (unsigned long long)epoch + 1, (unsigned long long)r->delivered,
                (double)r->delivered / (t - r->t0));
        fflush(stderr);
    }
    return 0;
}

/* Takes batches until the job ends (returns 1), fails (its error printed,
 * r->status set) or the run stops early. Returns sluice_next_batch's last
 * answer. */
static int loop(run_t *r)
{
    for (;;) {
        pace(r);
        sluice_batch_t *b = NULL;
        int rc = sluice_next_batch(r->job, &b);
        if (rc == 1) {
            return rc;
        }
        if (rc < 0) {
            fprintf(stderr, "%ssluice run: %s\n", r->progress ? "\n" : "",
                    sluice_last_error(r->job));
            r->status = SL_EXIT_RUNTIME;
            return rc;
        }
        r->delivered += b->n;
        sl_cli_warn_fallback("run", r->job, &r->warned);
        if (write_batch(r, b) < 0) {
            r->status = SL_EXIT_RUNTIME;
            sluice_release_batch(r->job, b);
            return rc;
        }
        uint64_t epoch = b->epoch;
        sluice_release_batch(r->job, b);
        int next = after_batch(r, epoch);
        if (next < 0) {
            r->status = SL_EXIT_RUNTIME;
        }
        if (next != 0) {
            return rc;
        }
    }
}

/* The run's end: the last state (rc 1: the job ended), the files closed,
 * the summary printed. */
static void finish(run_t *r, int rc)
{
    if (r->progress) {
        fprintf(stderr, "\n");
    }
    sl_cli_warn_fallback("run", r->job, &r->warned);
    if (r->status == SL_EXIT_OK && rc == 1 && r->o.save_state != NULL &&
        sl_cli_save_state(r->job, r->o.save_state) < 0) {
        r->status = SL_EXIT_RUNTIME; /* the run's end: a state with nothing left */
    }
    if (close_out(r->o.digests, r->digests) < 0 || close_out(r->o.dump, r->dump) < 0) {
        r->status = SL_EXIT_RUNTIME;
    }
    double seconds = sl_mono_sec() - r->t0;
    if (r->o.c.json) {
        sl_cli_print_json(r->job, seconds, r->by_source);
    }
    if (!r->o.quiet) {
        sl_cli_print_text(r->job, seconds);
    }
}

int sl_cli_run(int argc, char **argv)
{
    run_t r = {.status = SL_EXIT_OK};
    if (parse_opts(argc, argv, &r.o) < 0) {
        return SL_EXIT_USAGE;
    }
    r.t0 = sl_mono_sec();
    r.last = r.t0;
    int status = open_job(&r);
    if (status != SL_EXIT_OK) {
        return status;
    }
    if (open_out("digests", r.o.digests, &r.digests) < 0 ||
        open_out("dump", r.o.dump, &r.dump) < 0) {
        close_out(r.o.digests, r.digests);
        sluice_close(r.job);
        return SL_EXIT_RUNTIME;
    }
    r.progress = !r.o.quiet && isatty(STDERR_FILENO);
    r.warned = r.o.c.dispatcher == NULL; /* only a dispatcher hands work back */
    finish(&r, loop(&r));
    sluice_close(r.job);
    return r.status;
}
