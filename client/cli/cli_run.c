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

int sl_cli_run(int argc, char **argv)
{
    run_opts_t o;
    if (parse_opts(argc, argv, &o) < 0) {
        return SL_EXIT_USAGE;
    }
    double t0 = sl_mono_sec();
    char err[1024];
    sluice_options_t so;
    sl_cli_job_options(&o.c, &so);
    char **states = NULL;
    size_t *state_lens = NULL;
    if (o.nresume > 0 && sl_cli_read_states(o.resume, o.nresume, &states, &state_lens) < 0) {
        return SL_EXIT_USAGE;
    }
    so.resume_states = (const char *const *)states;
    so.resume_state_lens = state_lens;
    so.n_resume_states = o.nresume;
    sluice_job_t *job = NULL;
    int rc = sluice_open(o.c.spec, &so, &job, err, sizeof(err));
    sl_cli_free_states(states, state_lens, o.nresume);
    if (rc < 0) {
        fprintf(stderr, "sluice run: %s\n", err);
        return rc == -EINVAL ? SL_EXIT_USAGE : SL_EXIT_RUNTIME;
    }
    FILE *digests = NULL, *dump = NULL;
    if (open_out("digests", o.digests, &digests) < 0 || open_out("dump", o.dump, &dump) < 0) {
        close_out(o.digests, digests);
        sluice_close(job);
        return SL_EXIT_RUNTIME;
    }
    int progress = !o.quiet && isatty(STDERR_FILENO);
    int status = SL_EXIT_OK;
    double last = t0;
    uint64_t delivered = 0, batches = 0;
    int warned = o.c.dispatcher == NULL; /* only a dispatcher hands work back */
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
        sl_cli_warn_fallback("run", job, &warned);
        /* Multi-rank: flushed per batch, so the file matches what the rank
         * delivered even when it is killed (and restarted: it resumes). */
        if (digests != NULL && (sl_cli_write_digests(digests, job, b) < 0 ||
                                (o.c.ranks.world_size > 1 && fflush(digests) != 0))) {
            fprintf(stderr, "sluice run: writing '%s' failed: %s\n", o.digests, strerror(errno));
            status = SL_EXIT_RUNTIME;
            sluice_release_batch(job, b);
            break;
        }
        if (dump != NULL && (sl_cli_write_dump(dump, job, b) < 0 ||
                             (o.c.ranks.world_size > 1 && fflush(dump) != 0))) {
            fprintf(stderr, "sluice run: --dump '%s': %s\n", o.dump,
                    b->dtype != SLUICE_DT_RECORD ? "the spec's samples are not records "
                                                   "(a webdataset or jsonl source)"
                                                 : strerror(errno));
            status = SL_EXIT_RUNTIME;
            sluice_release_batch(job, b);
            break;
        }
        uint64_t epoch = b->epoch;
        sluice_release_batch(job, b);
        batches++;
        int stop = o.stop_after > 0 && batches >= (uint64_t)o.stop_after;
        if (o.save_state != NULL && (stop || batches % (uint64_t)o.save_every == 0) &&
            sl_cli_save_state(job, o.save_state) < 0) {
            status = SL_EXIT_RUNTIME;
            break;
        }
        if (stop) {
            break;
        }
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
    sl_cli_warn_fallback("run", job, &warned);
    if (status == SL_EXIT_OK && rc == 1 && o.save_state != NULL &&
        sl_cli_save_state(job, o.save_state) < 0) {
        status = SL_EXIT_RUNTIME; /* the run's end: a state with nothing left */
    }
    if (close_out(o.digests, digests) < 0 || close_out(o.dump, dump) < 0) {
        status = SL_EXIT_RUNTIME;
    }
    double seconds = sl_mono_sec() - t0;
    if (o.c.json) {
        sl_cli_print_json(job, seconds);
    }
    if (!o.quiet) {
        sl_cli_print_text(job, seconds);
    }
    sluice_close(job);
    return status;
}
