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

#include <jansson.h>

#include "client/cli/cli.h"
#include "client/cli/cli_opts.h"
#include "client/cli/cli_plan_mix.h"
#include "client/cli/cli_plan_read.h"
#include "client/lib/plan_job.h"

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
            "                         $SLUICE_PLUGIN_DIR)\n" SL_CLI_REMOTE_USAGE
            "  --offload auto|fastflow  which policy chooses (default: the spec's, else auto);\n"
            "  --offload off|all|K:F  a fixed plan: its prediction, binding resource and\n"
            "                         workers needed instead of a choice\n"
            "  --always-profile       as a job with it would: no short-job guard (default:\n"
            "                         $SLUICE_ALWAYS_PROFILE=1, else the guard's verdict)\n"
            "  --threads N            this host's pipeline threads (default: online CPUs)\n"
            "  --consumer-rate IMG_PER_S  the training loop's rate (default: unlimited)\n"
            "  --samples N            samples per profile (default %d)\n"
            "  --explain              print every candidate (split K, local share, predicted\n"
            "                         samples/s, binding resource) and FastFlow's choice\n"
            "  --json                 print the planner's inputs and outputs as one JSON "
            "object\n" SL_CLI_CONN_USAGE "\n"
            "exit status: 0 success, 1 runtime failure, 2 usage or spec error\n",
            (int)cl_plan_job_default_samples());
}

static int plan_opt(void *ctx, int c, const char *arg)
{
    plan_opts_t *o = ctx;
    switch (c) {
    case 's':
        return sl_cli_parse_long("plan", "samples", arg, 1, (long)cl_plan_job_max_samples(),
                                 &o->samples);
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
    /* --offload is checked by the shared parser (off, all, auto, fastflow,
     * K:F): a fixed plan is diagnosed rather than chosen. */
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
    int fixed = e->policy != NULL && strcmp(e->policy, "fixed") == 0;
    printf("%s: %s\n", fixed ? "diagnosis" : "choice", e->reason);
    if (e->workers_needed > 0) {
        printf("hint: %u more worker%s %s would lift it to %.1f samples/s\n", e->workers_needed,
               e->workers_needed == 1 ? "" : "s",
               e->hint_estimated ? "(assumed as fast as this host)" : "of the measured speed",
               e->lifted_samples_per_sec);
    }
    const Sluice__FastFlowExplain *f = e->fastflow;
    if (f != NULL && !fixed) {
        char g[32];
        printf("fastflow: gthp %s, lthp %.1f, %s -> split %u, local share %.3f: %.1f samples/s "
               "predicted (bound by %s)\n",
               num(g, sizeof(g), f->gthp), f->lthp,
               f->chosen != NULL && f->chosen[0] != '\0' ? f->chosen : "no offloading", f->split,
               f->local_share, f->predicted_samples_per_sec, f->binding);
    }
}

/* The client's per-sample overhead the plan charged and where it came from
 * (docs/planner.md "A right first plan"), from the explain document's
 * "inputs": a running job measures it on Sluice's own threads and the
 * dispatcher keeps it with the cached client profile ("cached"); a spec new
 * to this host takes what a job of another spec measured here ("prior"),
 * else what this client measured under its quota while profiling
 * ("profiled"); else nothing is charged. The prior is printed either way.
 * An older dispatcher's document has no source: the cached profile's. */
static const struct {
    const char *src;
    const char *why;
} OVH_SOURCES[] = {
    {"cached", "measured on Sluice's own threads by an earlier job of this spec on this host, "
               "cached by the dispatcher"},
    {"prior", "prior: measured on Sluice's own threads by a job of another spec on this host"},
    {"profiled", "measured on Sluice's own threads under this client's CPU quota while "
                 "profiling (sample-sized probe)"},
    {"measured", "measured on Sluice's own threads by this job"},
};

static double ms_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

/* The client's per-second cost (docs/planner.md "A right first plan"):
 * what the plan takes off the budget and the host's figure, which a running
 * job measured on its control thread, gRPC's threads and the consumer's
 * waits inside sluice_next_batch. An older
 * dispatcher's document has neither: nothing printed. */
static void print_persec(const json_t *ji)
{
    const json_t *charged = json_object_get(ji, "client_persec_cpu");
    if (!json_is_number(charged)) {
        return;
    }
    double host = ms_of(ji, "client_persec_host");
    double c = json_number_value(charged);
    if (c > 0.0) {
        printf("client per-second cost: %.4f CPU taken off the budget (source: measured on the "
               "control thread, gRPC's threads and the consumer's waits by a job on this host)\n",
               c);
    } else if (host > 0.0) {
        printf("client per-second cost: none charged (the host's %.4f CPU is in the per-sample "
               "overhead a running job measured)\n",
               host);
    } else {
        printf("client per-second cost: none charged (source: no job has measured it on this "
               "host yet)\n");
    }
}

static void print_overhead(const Sluice__PlannerInputs *in, const char *doc)
{
    json_t *root = json_loads(doc != NULL ? doc : "{}", 0, NULL);
    const json_t *ji = json_object_get(root, "inputs");
    const char *src = json_string_value(json_object_get(ji, "sample_overhead_source"));
    double ms = ms_of(ji, "sample_overhead_ms");
    if (src == NULL) {
        src = "cached";
        ms = in->client != NULL ? in->client->sample_overhead_sec * 1e3 : 0.0;
    }
    const char *why = NULL;
    for (size_t i = 0; i < sizeof(OVH_SOURCES) / sizeof(OVH_SOURCES[0]); i++) {
        if (strcmp(OVH_SOURCES[i].src, src) == 0) {
            why = OVH_SOURCES[i].why;
        }
    }
    if (ms > 0.0 && why != NULL) {
        printf("client overhead: %.3f ms per sample beyond the modelled read and receive costs "
               "(source: %s)\n",
               ms, why);
    } else {
        printf("client overhead: none charged (source: no job of this spec has run on this host "
               "yet, no other spec's job measured one here and profiling measured none: the "
               "idle-core profile's; a running job measures it on Sluice's own threads)\n");
    }
    double prior = ms_of(ji, "sample_overhead_prior_ms");
    double prof = ms_of(ji, "sample_overhead_profiled_ms");
    char a[32] = "none";
    char b[32] = "none";
    if (prior > 0.0) {
        snprintf(a, sizeof(a), "%.3f ms", prior);
    }
    if (prof > 0.0) {
        snprintf(b, sizeof(b), "%.3f ms", prof);
    }
    printf("client overhead prior: %s (another spec's job on this host); profiled under the "
           "quota: %s\n",
           a, b);
    print_persec(ji);
    json_decref(root);
}

/* The what-if curve per worker class (docs/planner.md "Workers wanted"),
 * from the explain document's "whatif": the predicted rate with k more or
 * fewer workers of the class, what binds then, and how many the job wants. */
static const char *str_of(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v != NULL ? v : "?";
}

static void print_whatif(const char *doc)
{
    json_t *root = json_loads(doc != NULL ? doc : "{}", 0, NULL);
    json_t *classes = json_object_get(root, "whatif");
    size_t i;
    json_t *c;
    json_array_foreach(classes, i, c)
    {
        printf("workers wanted: %lld of class \"%s\" (has %lld): %.1f samples/s, then bound by "
               "%s\n",
               json_integer_value(json_object_get(c, "wanted")), str_of(c, "class"),
               json_integer_value(json_object_get(c, "workers")),
               json_number_value(json_object_get(c, "wanted_samples_per_sec")),
               str_of(c, "wanted_binding"));
        if (json_is_true(json_object_get(c, "ingress_assumed"))) {
            printf("  the client's ingress taken as one worker's path, %.1f MB/s (not measured "
                   "with one worker)\n",
                   ms_of(c, "ingress_bytes_per_sec") / 1e6);
        }
        printf("  %6s %8s %10s  %s\n", "change", "workers", "samples/s", "bound by");
        size_t k;
        json_t *p;
        json_array_foreach(json_object_get(c, "curve"), k, p)
        {
            printf("  %+6lld %8lld %10.1f  %s\n", json_integer_value(json_object_get(p, "delta")),
                   json_integer_value(json_object_get(p, "workers")),
                   json_number_value(json_object_get(p, "predicted_samples_per_sec")),
                   str_of(p, "binding"));
        }
    }
    json_decref(root);
}

/* The prefix cache decision (docs/cache.md "When"), from the explain
 * document's "cache": on or off and why, with the numbers. An older
 * dispatcher's document has none: nothing is printed. */
static void print_cache(const char *doc)
{
    json_t *root = json_loads(doc != NULL ? doc : "{}", 0, NULL);
    const json_t *c = json_object_get(root, "cache");
    if (json_is_object(c)) {
        printf("prefix cache: %s\n", str_of(c, "reason"));
        const json_t *h = json_object_get(c, "hit_rate");
        if (json_is_number(h)) {
            printf("prefix cache hit rate: %.0f%% measured, %.0f%% priced\n",
                   json_number_value(h) * 100.0, ms_of(c, "priced_hit_rate") * 100.0);
        }
    }
    json_decref(root);
}

/* The short-job guard's verdict (docs/planner.md "A right first plan"): a
 * job of this spec too short to repay profiling starts on the better fixed
 * policy instead. */
static void print_short(const cl_plan_job_t *pj)
{
    cl_plan_short_t r;
    cl_plan_job_short(pj, &r);
    if (!r.assessed) {
        printf("short-job guard: not assessed (%s)\n", r.why[0] != '\0' ? r.why : "?");
        return;
    }
    if (r.fixed_sec <= 0.0) {
        printf("short-job guard: %.0f samples, nothing to estimate from (no live workers, or "
               "no rate): a job profiles\n",
               r.samples);
        return;
    }
    char link[96];
    if (r.bandwidth > 0.0) {
        snprintf(link, sizeof(link), "link %.1f MB/s, %s", r.bandwidth / 1e6,
                 r.link_probed ? "probed" : "cached");
    } else {
        snprintf(link, sizeof(link), "link unknown");
    }
    const char *best = r.rate_off >= r.rate_all ? "off" : "all";
    printf("short-job guard: %.0f samples, %.1f s on `%s` (estimated off %.1f, all %.1f, both "
           "at once %.1f samples/s; %s); profiling ~%.2f s (charged %.2f s) could gain ~%.2f "
           "s: ",
           r.samples, r.fixed_sec, best, r.rate_off, r.rate_all, r.rate_both, link, r.profile_sec,
           r.cost_factor * r.profile_sec, r.saving_sec);
    if (strcmp(r.choice, "profile") != 0) {
        printf("a job starts on `%s` without profiling\n", r.choice);
    } else if (strcmp(r.reason, "long") == 0) {
        printf("a job profiles (profiling, charged, is under %.0f %% of the job)\n",
               100.0 * r.free_share);
    } else if (strcmp(r.reason, "link") == 0) {
        printf("a job profiles (the link is unknown: `all` cannot be priced)\n");
    } else {
        printf("a job profiles\n");
    }
}

/* The library's error as this command's, and its exit status. */
static int failed(int rc, const char *err)
{
    fprintf(stderr, "sluice plan: %s\n", err);
    return rc == -EINVAL ? SL_EXIT_USAGE : SL_EXIT_RUNTIME;
}

/* The answer as --json, --explain or one line. Returns an exit status. */
/* --json: the dispatcher's explain JSON; a mixed job's also with what
 * each source costs here ("mix_costs", docs/mixing.md). */
static void print_json(const plan_opts_t *o, const Sluice__PlanExplain *e, const cl_plan_job_t *pj)
{
    json_t *root = json_loads(e->json != NULL ? e->json : "{}", 0, NULL);
    json_t *costs = NULL;
    char err[SL_CLI_ERR_MAX];
    size_t n = o->samples > 0 ? (size_t)o->samples : cl_plan_job_default_samples();
    if (root != NULL && cl_plan_job_mix_costs(pj, n, &costs, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice plan: per-source costs: %s\n", err);
    }
    char *out = NULL;
    if (costs != NULL && json_object_set_new(root, "mix_costs", costs) == 0) {
        out = json_dumps(root, JSON_COMPACT);
    }
    printf("%s\n", out != NULL ? out : (e->json != NULL ? e->json : "{}"));
    free(out);
    json_decref(root);
}

static int print_plan(const plan_opts_t *o, double plan_rate, const cl_plan_job_t *pj)
{
    const Sluice__SubmitJobResponse *a = cl_plan_job_answer(pj);
    const Sluice__PlanExplain *e = a->explain;
    if (a->plan == NULL || e == NULL || e->chosen >= e->n_candidates) {
        fprintf(stderr, "sluice plan: the dispatcher answered without a plan\n");
        return SL_EXIT_RUNTIME;
    }
    /* An auto plan that keeps everything here: why, in place of the empty
     * worker columns. */
    const char *why = a->plan->local_reason != NULL ? a->plan->local_reason : "";
    if (o->c.json) {
        print_json(o, e, pj);
    } else if (o->explain) {
        print_table(e, o->c.spec, plan_rate);
        if (why[0] != '\0') {
            printf("all local: %s\n", why);
        }
        printf("profiled in %.2f s\n", cl_plan_job_profile_seconds(pj));
        /* Where the client's budget came from: "unknown" means no cgroup
         * was readable and the number is measured, or assumed. */
        const Sluice__PlannerInputs *in = cl_plan_job_inputs(pj);
        const char *src = in->client_cpu_budget_source != NULL ? in->client_cpu_budget_source
                                                               : "";
        printf("client CPU budget: %.2f CPUs (source %s%s)\n", in->client_cpu_budget,
               src[0] != '\0' ? src : "?",
               strcmp(src, "unknown") != 0            ? ""
               : in->client_cpu_budget_measured > 0.0 ? ": no cgroup readable, measured"
                                                      : ": no cgroup readable, all CPUs assumed "
                                                        "until the job measures it");
        print_overhead(in, e->json);
        sl_cli_plan_print_reads(in);
        print_short(pj);
        print_whatif(e->json);
        print_cache(e->json);
        cli_plan_print_mix(e->json); /* a mixed job's costs per source */
    } else {
        printf("plan: %s, split %u%s, local share %.3f, %.1f samples/s predicted, bound by %s\n",
               a->plan->mode, a->plan->split, a->plan->compress ? " +zstd" : "",
               a->plan->local_share,
               a->plan->predicted_samples_per_sec, a->plan->binding);
        if (why[0] != '\0') {
            printf("all local: %s\n", why);
        }
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
    cl_plan_job_args_t pa = {.spec_path = o.c.spec,
                             .data_root = o.c.data_root != NULL ? o.c.data_root : ".",
                             .plugin_dir = o.c.plugin_dir,
                             .offload = o.c.offload,
                             .remote_roots = o.c.remote_roots,
                             .cache_dir = o.c.cache_dir,
                             .cache_bytes = o.c.cache_bytes,
                             .always_profile = o.c.always_profile};
    cl_plan_job_t *pj = NULL;
    char err[SL_CLI_ERR_MAX];
    int rc = cl_plan_job_open(&pa, &pj, err, sizeof(err));
    if (rc < 0) {
        return failed(rc, err);
    }
    int status = SL_EXIT_OK;
    if (sl_cli_conn_security("plan", &o.c.conn) < 0) {
        status = SL_EXIT_USAGE;
    } else if ((rc = cl_plan_job_ask(pj, o.c.dispatcher, &o.c.conn.sec, threads, plan_rate,
                                     (size_t)o.samples, err, sizeof(err))) < 0) {
        status = failed(rc, err);
    } else {
        status = print_plan(&o, plan_rate, pj);
    }
    cl_plan_job_free(pj);
    return status;
}
