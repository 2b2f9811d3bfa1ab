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
#include "common/plugin/plugin.h"
#include "client/cli/cli_opts.h"
#include "client/lib/profile.h"
#include "common/profile/profiler.h"
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
            "  --plugin-dir DIR       stage plugins for the spec's \"plugin\" stages (default:\n"
            "                         $SLUICE_PLUGIN_DIR)\n"
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
            /* "+zstd": the candidate ships this boundary compressed. */
            snprintf(last, sizeof(last), "%.28s%s",
                     c->split == 0 ? "(encoded bytes)"
                     : c->split <= e->n_unit_names ? e->unit_names[c->split - 1]
                                                   : "?",
                     c->compress ? " +zstd" : "");
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

/* Everything sl_cli_plan opens, released by plan_free. */
typedef struct {
    sl_spec_t *spec;
    sl_source_t *src;
    sl_pipeline_t *pipe;
    sl_plugins_t *plugins; /* a spec with plugin stages: --plugin-dir's */
    sl_rpc_channel_t *ch;
    int rpc; /* sl_rpc_init called */
    cl_planner_t *pl;
    ProtobufCMessage *resp;
} plan_run_t;

static void plan_free(plan_run_t *r)
{
    if (r->resp != NULL) {
        protobuf_c_message_free_unpacked(r->resp, NULL);
    }
    cl_planner_free(r->pl);
    sl_rpc_channel_free(r->ch);
    if (r->rpc) {
        sl_rpc_shutdown();
    }
    sl_pipeline_free(r->pipe);
    sl_plugins_free(r->plugins);
    sl_source_free(r->src);
    sl_spec_clear(r->spec);
    free(r->spec);
}

/* The spec (as an auto or fastflow job), its source and pipeline. Returns an
 * exit status. */
static int open_spec(const plan_opts_t *o, plan_run_t *r)
{
    char err[1024];
    r->spec = calloc(1, sizeof(*r->spec));
    if (r->spec == NULL) {
        fprintf(stderr, "sluice plan: out of memory\n");
        return SL_EXIT_RUNTIME;
    }
    if (sl_spec_parse_file(o->c.spec, r->spec, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice plan: %s\n", err);
        return SL_EXIT_USAGE;
    }
    if (o->c.offload != NULL) {
        r->spec->offload =
            strcmp(o->c.offload, "fastflow") == 0 ? SL_OFFLOAD_FASTFLOW : SL_OFFLOAD_AUTO;
    } else if (r->spec->offload != SL_OFFLOAD_FASTFLOW) {
        r->spec->offload = SL_OFFLOAD_AUTO;
    }
    if (sl_source_open(o->c.data_root, r->spec->source_type, r->spec->source_path, &r->src, err,
                       sizeof(err)) < 0 ||
        sl_pipeline_new(r->spec, 0, &r->pipe, err, sizeof(err)) < 0 ||
        sl_pipeline_load(r->pipe, r->src, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice plan: %s\n", err);
        return SL_EXIT_RUNTIME;
    }
    /* Plugin units are profiled like the others, in their host process. */
    if (sl_spec_has_plugins(r->spec) &&
        (sl_plugins_scan_client(o->c.plugin_dir, &r->plugins, err, sizeof(err)) < 0 ||
         sl_pipeline_bind_plugins(r->pipe, r->plugins, err, sizeof(err)) < 0)) {
        fprintf(stderr, "sluice plan: %s\n", err);
        return SL_EXIT_USAGE;
    }
    return SL_EXIT_OK;
}

/* The dispatcher channel and the planner's profiles. Returns an exit status. */
static int profile(plan_opts_t *o, unsigned threads, double plan_rate, plan_run_t *r)
{
    char err[1024];
    if (sl_cli_conn_security("plan", &o->c.conn) < 0) {
        return SL_EXIT_USAGE;
    }
    sl_rpc_init();
    r->rpc = 1;
    r->ch = sl_rpc_channel_new(o->c.dispatcher, SL_RPC_DEFAULT_MAX_MSG, &o->c.conn.sec, 0, err,
                               sizeof(err));
    r->pl = cl_planner_new();
    if (r->ch == NULL || r->pl == NULL) {
        fprintf(stderr, "sluice plan: %s\n", r->ch == NULL ? err : "out of memory");
        return r->ch == NULL ? SL_EXIT_USAGE : SL_EXIT_RUNTIME;
    }
    cl_plan_args_t pa = {.spec = r->spec, .src = r->src, .pipe = r->pipe, .disp = r->ch,
                         .threads = threads, .consumer_rate = plan_rate, .timeout_ms = 10000,
                         .samples = (size_t)o->samples, .security = &o->c.conn.sec};
    if (cl_planner_profile(r->pl, &pa, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice plan: dispatcher %s: %s\n", o->c.dispatcher, err);
        return SL_EXIT_RUNTIME;
    }
    return SL_EXIT_OK;
}

/* PlanJob: the dispatcher plans the job without creating it. Returns an
 * exit status; r->resp holds the answer. */
static int ask(const plan_opts_t *o, unsigned threads, plan_run_t *r)
{
    char *json = sl_spec_to_json(r->spec);
    if (json == NULL) {
        fprintf(stderr, "sluice plan: out of memory\n");
        return SL_EXIT_RUNTIME;
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = json;
    req.spec_name = (char *)o->c.spec;
    req.num_samples = sl_source_count(r->src);
    req.source_fingerprint = sl_source_fingerprint(r->src);
    req.client_threads = threads;
    req.client_id = host;
    req.world_size = 1;
    req.planner = cl_planner_inputs(r->pl);
    sl_rpc_status_t st;
    int rc = sl_rpc_unary(r->ch, "/sluice.Dispatcher/PlanJob", &req.base,
                          &sluice__submit_job_response__descriptor, 30000, 1, &r->resp, &st);
    free(json);
    if (rc < 0) {
        fprintf(stderr, "sluice plan: dispatcher %s: PlanJob failed: %s (%s)\n", o->c.dispatcher,
                rc == -ECOMM ? st.details : "bad reply",
                rc == -ECOMM ? sl_rpc_code_name(st.code) : "");
        return rc == -ECOMM && st.code == SL_RPC_INVALID_ARGUMENT ? SL_EXIT_USAGE
                                                                   : SL_EXIT_RUNTIME;
    }
    return SL_EXIT_OK;
}

/* The answer as --json, --explain or one line. Returns an exit status. */
static int print_plan(const plan_opts_t *o, double plan_rate, const plan_run_t *r)
{
    const Sluice__SubmitJobResponse *a = (const Sluice__SubmitJobResponse *)r->resp;
    const Sluice__PlanExplain *e = a->explain;
    if (a->plan == NULL || e == NULL || e->chosen >= e->n_candidates) {
        fprintf(stderr, "sluice plan: the dispatcher answered without a plan\n");
        return SL_EXIT_RUNTIME;
    }
    if (o->c.json) {
        printf("%s\n", e->json != NULL ? e->json : "{}");
    } else if (o->explain) {
        print_table(e, o->c.spec, plan_rate);
        printf("profiled in %.2f s\n", cl_planner_profile_seconds(r->pl));
        /* Where the client's budget came from: "unknown" means no cgroup
         * was readable and the number is measured, or assumed. */
        const Sluice__PlannerInputs *in = cl_planner_inputs(r->pl);
        const char *src = in->client_cpu_budget_source != NULL ? in->client_cpu_budget_source
                                                               : "";
        printf("client CPU budget: %.2f CPUs (source %s%s)\n", in->client_cpu_budget,
               src[0] != '\0' ? src : "?",
               strcmp(src, "unknown") != 0            ? ""
               : in->client_cpu_budget_measured > 0.0 ? ": no cgroup readable, measured"
                                                      : ": no cgroup readable, all CPUs assumed "
                                                        "until the job measures it");
    } else {
        printf("plan: %s, split %u%s, local share %.3f, %.1f samples/s predicted, bound by %s\n",
               a->plan->mode, a->plan->split, a->plan->compress ? " +zstd" : "",
               a->plan->local_share,
               a->plan->predicted_samples_per_sec, a->plan->binding);
    }
    return SL_EXIT_OK;
}

int sl_cli_plan(int argc, char **argv)
{
    plan_opts_t o;
    if (parse_opts(argc, argv, &o) < 0) {
        return SL_EXIT_USAGE;
    }
    /* --consumer-rate 0 or absent: unlimited. */
    double plan_rate = o.c.consumer_rate > 0 ? o.c.consumer_rate : 0;
    unsigned threads = o.c.threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    plan_run_t r = {0};
    int status = open_spec(&o, &r);
    if (status == SL_EXIT_OK) {
        status = profile(&o, threads, plan_rate, &r);
    }
    if (status == SL_EXIT_OK) {
        status = ask(&o, threads, &r);
    }
    if (status == SL_EXIT_OK) {
        status = print_plan(&o, plan_rate, &r);
    }
    plan_free(&r);
    return status;
}
