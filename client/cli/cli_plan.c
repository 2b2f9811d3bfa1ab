/* `sluice plan`: profile like an auto/fastflow job would, ask the
 * dispatcher to plan without creating a job (PlanJob), print the choice,
 * the candidate table (--explain) or everything as JSON (--json). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cli/cli.h"
#include "client/cli/cli_opts.h"
#include "client/lib/profile.h"
#include "common/cost/profiler.h"
#include "common/engine/pipeline.h"
#include "common/rpc/rpc.h"
#include "common/data/source.h"
#include "common/spec/spec.h"
#include "proto/sluice.pb-c.h"

typedef struct {
    sl_cli_opts_t c; /* the shared flags (cli_opts.c) */
    long samples;
    int explain;
} plan_opts_t;

static void plan_usage(FILE *f)
{
    fprintf(f,
            "usage: sluice plan SPEC --dispatcher HOST:PORT [options]\n"
            "\n"
            "Profiles the pipeline here and on the workers (as an auto job would) and shows\n"
            "the plan the dispatcher would choose, without running anything.\n"
            "\n"
            "  --dispatcher ADDR      the dispatcher\n"
            "  --data-root DIR        directory the spec's source path is relative to (default .)\n"
            "  --offload auto|fastflow  which policy chooses (default: the spec's, else auto)\n"
            "  --threads N            this host's pipeline threads (default: online CPUs)\n"
            "  --consumer-rate IMG_PER_S  the training loop's rate (default: unlimited)\n"
            "  --samples N            samples per profile (default %d)\n"
            "  --explain              print every candidate (split K, local share, predicted\n"
            "                         samples/s, binding resource) and FastFlow's choice\n"
            "  --json                 print the planner's inputs and outputs as one JSON object\n"
            SL_CLI_CONN_USAGE
            "\n"
            "exit status: 0 success, 1 runtime failure, 2 usage or spec error\n",
            SL_PROFILE_DEFAULT_SAMPLES);
}

static int plan_opt(void *ctx, int c, const char *arg)
{
    plan_opts_t *o = ctx;
    switch (c) {
    case 's':
        return sl_cli_parse_long("plan", "samples", arg, 1, SL_PROFILE_MAX_SAMPLES, &o->samples);
    case 'x':
        o->explain = 1;
        return 0;
    default:
        return -EINVAL;
    }
}

static int parse_opts(int argc, char **argv, plan_opts_t *o)
{
    static const struct option OWN[] = {
        {"samples", required_argument, NULL, 's'},
        {"explain", no_argument, NULL, 'x'},
        {NULL, 0, NULL, 0},
    };
    const sl_cli_cmd_t cmd = {
        .name = "plan",
        .shared = SL_CLI_F_DISPATCHER | SL_CLI_F_DATA_ROOT | SL_CLI_F_THREADS |
                  SL_CLI_F_OFFLOAD | SL_CLI_F_CONSUMER_RATE | SL_CLI_F_JSON | SL_CLI_F_CONN,
        .takes_spec = 1,
        .own = OWN,
        .own_opt = plan_opt,
        .ctx = o,
        .usage = plan_usage,
    };
    memset(o, 0, sizeof(*o));
    if (sl_cli_opts_parse(&cmd, argc, argv, &o->c) < 0) {
        return -EINVAL;
    }
    const char *off = o->c.offload;
    if (off != NULL && strcmp(off, "auto") != 0 && strcmp(off, "fastflow") != 0) {
        fprintf(stderr, "sluice plan: --offload: '%s' is not auto or fastflow\n", off);
        return -EINVAL;
    }
    if (o->c.dispatcher == NULL) {
        fprintf(stderr, "sluice plan: --dispatcher HOST:PORT is required\n");
        return -EINVAL;
    }
    return 0;
}

/* "12.3", or "-" for 0 (no limit on the wire). */
static const char *num(char *buf, size_t len, double v)
{
    if (v <= 0.0 || !isfinite(v)) {
        snprintf(buf, len, "-");
    } else {
        snprintf(buf, len, "%.1f", v);
    }
    return buf;
}

static void print_table(const Sluice__PlanExplain *e, const char *spec_path, double consumer)
{
    printf("sluice plan: %s, policy %s, %zu units; client alone %.1f samples/s; consumer %s\n",
           spec_path, e->policy, e->n_unit_names, e->local_samples_per_sec,
           consumer > 0 ? "given" : "unlimited");
    printf("%4s  %-34s %6s %10s  %-10s %9s %9s %9s\n", "K", "last remote unit", "share",
           "samples/s", "binding", "client", "workers", "network");
    for (size_t i = 0; i < e->n_candidates; i++) {
        const Sluice__PlanCandidate *c = e->candidates[i];
        char k[16];
        char last[48];
        if (c->off) {
            snprintf(k, sizeof(k), "off");
            snprintf(last, sizeof(last), "(everything local)");
        } else {
            snprintf(k, sizeof(k), "%u", c->split);
            snprintf(last, sizeof(last), "%.34s",
                     c->split == 0 ? "(encoded bytes)"
                     : c->split <= e->n_unit_names ? e->unit_names[c->split - 1]
                                                   : "?");
        }
        char a[32];
        char b[32];
        char d[32];
        printf("%s%3s  %-34s %6.3f %10.1f  %-10s %9s %9s %9s\n", i == e->chosen ? "*" : " ", k,
               last, c->local_share, c->predicted_samples_per_sec, c->binding,
               num(a, sizeof(a), c->client_limit), num(b, sizeof(b), c->worker_limit),
               num(d, sizeof(d), c->network_limit));
    }
    printf("choice: %s\n", e->reason);
    if (e->workers_needed > 0) {
        printf("hint: %u more worker%s %s would lift it to %.1f samples/s\n", e->workers_needed,
               e->workers_needed == 1 ? "" : "s",
               e->hint_estimated ? "(assumed as fast as this host)" : "of the measured speed",
               e->lifted_samples_per_sec);
    }
    const Sluice__FastFlowExplain *f = e->fastflow;
    if (f != NULL) {
        char g[32];
        printf("fastflow: gthp %s, lthp %.1f, %s -> split %u, local share %.3f: %.1f samples/s "
               "predicted (bound by %s)\n",
               num(g, sizeof(g), f->gthp), f->lthp,
               f->chosen != NULL && f->chosen[0] != '\0' ? f->chosen : "no offloading", f->split,
               f->local_share, f->predicted_samples_per_sec, f->binding);
    }
}

int sl_cli_plan(int argc, char **argv)
{
    plan_opts_t o;
    if (parse_opts(argc, argv, &o) < 0) {
        return SL_EXIT_USAGE;
    }
    char err[1024];
    int status = SL_EXIT_RUNTIME;
    sl_spec_t *spec = calloc(1, sizeof(*spec));
    sl_source_t *src = NULL;
    sl_pipeline_t *pipe = NULL;
    sl_rpc_channel_t *ch = NULL;
    cl_planner_t *pl = NULL;
    char *json = NULL;
    ProtobufCMessage *resp = NULL;
    int rpc = 0;
    if (spec == NULL) {
        fprintf(stderr, "sluice plan: out of memory\n");
        return SL_EXIT_RUNTIME;
    }
    if (sl_spec_parse_file(o.c.spec, spec, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice plan: %s\n", err);
        status = SL_EXIT_USAGE;
        goto out;
    }
    if (o.c.offload != NULL) {
        spec->offload =
            strcmp(o.c.offload, "fastflow") == 0 ? SL_OFFLOAD_FASTFLOW : SL_OFFLOAD_AUTO;
    } else if (spec->offload != SL_OFFLOAD_FASTFLOW) {
        spec->offload = SL_OFFLOAD_AUTO;
    }
    /* --consumer-rate 0 or absent: unlimited. */
    double plan_rate = o.c.consumer_rate > 0 ? o.c.consumer_rate : 0;
    unsigned threads = o.c.threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    if (sl_source_open(o.c.data_root, spec->source_type, spec->source_path, &src, err,
                       sizeof(err)) < 0 ||
        sl_pipeline_new(spec, 0, &pipe, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice plan: %s\n", err);
        goto out;
    }
    if (sl_cli_conn_security("plan", &o.c.conn) < 0) {
        status = SL_EXIT_USAGE;
        goto out;
    }
    sl_rpc_init();
    rpc = 1;
    ch = sl_rpc_channel_new(o.c.dispatcher, SL_RPC_DEFAULT_MAX_MSG, &o.c.conn.sec, 0, err,
                            sizeof(err));
    pl = cl_planner_new();
    if (ch == NULL || pl == NULL) {
        fprintf(stderr, "sluice plan: %s\n", ch == NULL ? err : "out of memory");
        status = ch == NULL ? SL_EXIT_USAGE : SL_EXIT_RUNTIME;
        goto out;
    }
    cl_plan_args_t pa = {.spec = spec, .src = src, .pipe = pipe, .disp = ch, .threads = threads,
                         .consumer_rate = plan_rate, .timeout_ms = 10000,
                         .samples = (size_t)o.samples, .security = &o.c.conn.sec};
    if (cl_planner_profile(pl, &pa, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice plan: dispatcher %s: %s\n", o.c.dispatcher, err);
        goto out;
    }
    json = sl_spec_to_json(spec);
    if (json == NULL) {
        fprintf(stderr, "sluice plan: out of memory\n");
        goto out;
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = json;
    req.spec_name = (char *)o.c.spec;
    req.num_samples = sl_source_count(src);
    req.source_fingerprint = sl_source_fingerprint(src);
    req.client_threads = threads;
    req.client_id = host;
    req.world_size = 1;
    req.planner = cl_planner_inputs(pl);
    sl_rpc_status_t st;
    int rc = sl_rpc_unary(ch, "/sluice.Dispatcher/PlanJob", &req.base,
                          &sluice__submit_job_response__descriptor, 30000, 1, &resp, &st);
    if (rc < 0) {
        fprintf(stderr, "sluice plan: dispatcher %s: PlanJob failed: %s (%s)\n", o.c.dispatcher,
                rc == -ECOMM ? st.details : "bad reply",
                rc == -ECOMM ? sl_rpc_code_name(st.code) : "");
        status = rc == -ECOMM && st.code == SL_RPC_INVALID_ARGUMENT ? SL_EXIT_USAGE
                                                                     : SL_EXIT_RUNTIME;
        goto out;
    }
    const Sluice__SubmitJobResponse *r = (const Sluice__SubmitJobResponse *)resp;
    const Sluice__PlanExplain *e = r->explain;
    if (r->plan == NULL || e == NULL || e->chosen >= e->n_candidates) {
        fprintf(stderr, "sluice plan: the dispatcher answered without a plan\n");
        goto out;
    }
    if (o.c.json) {
        printf("%s\n", e->json != NULL ? e->json : "{}");
    } else if (o.explain) {
        print_table(e, o.c.spec, plan_rate);
        printf("profiled in %.2f s\n", cl_planner_profile_seconds(pl));
    } else {
        printf("plan: %s, split %u, local share %.3f, %.1f samples/s predicted, bound by %s\n",
               r->plan->mode, r->plan->split, r->plan->local_share,
               r->plan->predicted_samples_per_sec, r->plan->binding);
    }
    status = SL_EXIT_OK;
out:
    if (resp != NULL) {
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    free(json);
    cl_planner_free(pl);
    sl_rpc_channel_free(ch);
    if (rpc) {
        sl_rpc_shutdown();
    }
    sl_pipeline_free(pipe);
    sl_source_free(src);
    free(spec);
    return status;
}
