/* `sluice status`: the dispatcher's /status document for a terminal.
 *
 * --dispatcher HOST:PORT asks the dispatcher over gRPC (GetStatus), so the
 * address is the one every other command takes; --http HOST:PORT reads GET
 * /status from a status endpoint instead (a worker's, or a dispatcher whose
 * gRPC port is not reachable from here). --json prints the document as is. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "client/cli/cli.h"
#include "client/cli/cli_opts.h"
#include "client/lib/status_rpc.h"
#include "common/base/addr.h"

#define STATUS_MAX_BYTES (64u << 20) /* a status document larger than this is refused */
#define DEFAULT_TIMEOUT_MS 5000

typedef struct {
    const char *dispatcher;
    const char *http;
    int json;
    int timeout_ms;
    double watch_sec; /* 0 = print once */
    sl_cli_conn_t conn; /* --dispatcher only */
} status_opts_t;

static void status_usage(FILE *f)
{
    fprintf(f,
            "usage: sluice status (--dispatcher HOST:PORT | --http HOST:PORT) [--json]\n"
            "\n"
            "  --dispatcher ADDR    the dispatcher's gRPC address (as for sluice run)\n"
            "  --http ADDR          read GET /status from a status endpoint instead\n"
            "                       (a dispatcher's http= address, or a worker's)\n"
            "  --json               print the status document as JSON\n"
            "  --watch SEC          print again every SEC seconds until interrupted\n"
            "  --timeout-ms N       give up on an unresponsive peer after N ms (default %d)\n"
            SL_CLI_CONN_USAGE
            "\n"
            "exit status: 0 success, 1 unreachable or bad answer, 2 usage error\n",
            DEFAULT_TIMEOUT_MS);
}

static int status_opt(void *ctx, int c, const char *arg)
{
    status_opts_t *o = ctx;
    long v;
    switch (c) {
    case 'H':
        o->http = arg;
        return 0;
    case 'w':
        return sl_cli_parse_double("status", "watch", arg, 0.1, 0, 86400, "seconds",
                                   &o->watch_sec);
    case 't':
        if (sl_cli_parse_long("status", "timeout-ms", arg, 1, 600000, &v) < 0) {
            return -EINVAL;
        }
        o->timeout_ms = (int)v;
        return 0;
    default:
        return -EINVAL;
    }
}

static int parse_opts(int argc, char **argv, status_opts_t *o)
{
    static const struct option OWN[] = {
        {"http", required_argument, NULL, 'H'},
        {"watch", required_argument, NULL, 'w'},
        {"timeout-ms", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    const sl_cli_cmd_t cmd = {
        .name = "status",
        .shared = SL_CLI_F_DISPATCHER | SL_CLI_F_JSON | SL_CLI_F_CONN,
        .takes_spec = 0,
        .own = OWN,
        .own_opt = status_opt,
        .ctx = o,
        .usage = status_usage,
    };
    memset(o, 0, sizeof(*o));
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    sl_cli_opts_t c;
    if (sl_cli_opts_parse(&cmd, argc, argv, &c) < 0) {
        return -EINVAL;
    }
    o->dispatcher = c.dispatcher;
    o->json = c.json;
    o->conn = c.conn;
    if ((o->dispatcher != NULL) == (o->http != NULL)) {
        fprintf(stderr, "sluice status: give exactly one of --dispatcher and --http\n");
        status_usage(stderr);
        return -EINVAL;
    }
    if (sl_cli_conn_security("status", &o->conn) < 0) {
        return -EINVAL;
    }
    char host[256];
    unsigned port = 0;
    const char *addr = o->dispatcher != NULL ? o->dispatcher : o->http;
    char why[300];
    if (sl_addr_split(addr, host, sizeof(host), &port, why, sizeof(why)) != 0 || port == 0) {
        fprintf(stderr, "sluice status: '%s' is not HOST:PORT\n", addr);
        return -EINVAL;
    }
    return 0;
}

/* ------------------------------------------------------------ fetching */

static int fetch_grpc(const status_opts_t *o, char **ret, char *err, size_t errlen)
{
    return cl_status_fetch(o->dispatcher, &o->conn.sec, STATUS_MAX_BYTES, o->timeout_ms, ret, err,
                           errlen);
}

/* A TCP connection to o->http, both directions bounded by o->timeout_ms.
 * Returns the socket, or a negative errno with err filled. */
static int http_connect(const status_opts_t *o, char *err, size_t errlen)
{
    char host[256];
    unsigned port = 0;
    (void)sl_addr_split(o->http, host, sizeof(host), &port, NULL, 0);
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host, portstr, &hints, &ai);
    if (g != 0) {
        snprintf(err, errlen, "%s: %s", o->http, gai_strerror(g));
        return -EHOSTUNREACH;
    }
    int fd = -1;
    int rc = -ECONNREFUSED;
    struct timeval tv = {.tv_sec = o->timeout_ms / 1000, .tv_usec = (o->timeout_ms % 1000) * 1000};
    for (struct addrinfo *a = ai; a != NULL && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            continue;
        }
        /* SO_SNDTIMEO bounds connect() too on Linux. */
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            rc = -errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", o->http, strerror(-rc));
        return rc;
    }
    return fd;
}

/* Everything the peer sends until it closes (at most STATUS_MAX_BYTES), NUL
 * terminated, into *ret (caller frees) and its length into *ret_len. */
static int read_all(int fd, const status_opts_t *o, char **ret, size_t *ret_len, char *err,
                    size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (len + 65536 + 1 > cap) {
            cap = cap > 0 ? cap * 2 : 131072;
            char *nb = realloc(buf, cap);
            if (nb == NULL) {
                rc = -ENOMEM;
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            buf = nb;
        }
        ssize_t got = recv(fd, buf + len, 65536, 0);
        if (got < 0) {
            rc = -errno;
            snprintf(err, errlen, "%s: reading the answer: %s", o->http,
                     errno == EAGAIN ? "timed out" : strerror(errno));
            goto out;
        }
        if (got == 0) {
            break;
        }
        len += (size_t)got;
        if (len > STATUS_MAX_BYTES) {
            rc = -E2BIG;
            snprintf(err, errlen, "%s: answer larger than %u bytes", o->http, STATUS_MAX_BYTES);
            goto out;
        }
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    buf = NULL;
out:
    free(buf);
    return rc;
}

/* HTTP/1.0 GET with Connection: close, so the body is everything after the
 * header block and never chunked. */
static int fetch_http(const status_opts_t *o, char **ret, char *err, size_t errlen)
{
    int fd = http_connect(o, err, errlen);
    if (fd < 0) {
        return fd;
    }
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "GET /status HTTP/1.0\r\nHost: %s\r\nAccept: application/json\r\n"
                     "Connection: close\r\n\r\n",
                     o->http);
    char *buf = NULL;
    size_t len = 0;
    int rc = 0;
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        rc = -errno;
        snprintf(err, errlen, "%s: sending the request: %s", o->http, strerror(errno));
        goto out;
    }
    rc = read_all(fd, o, &buf, &len, err, errlen);
    if (rc < 0) {
        goto out;
    }
    int code = 0;
    if (sscanf(buf, "HTTP/%*d.%*d %d", &code) != 1) {
        rc = -EBADMSG;
        snprintf(err, errlen, "%s: not an HTTP answer", o->http);
        goto out;
    }
    char *body = strstr(buf, "\r\n\r\n");
    if (code != 200 || body == NULL) {
        rc = -EBADMSG;
        snprintf(err, errlen, "%s: GET /status answered %d", o->http, code);
        goto out;
    }
    body += 4;
    memmove(buf, body, len - (size_t)(body - buf) + 1);
    *ret = buf;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------ rendering */

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Ids are integers below 2^53, printed as they are (no grouping). */
static long long id(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "-";
}

/* "1,234,567" into buf. */
static const char *grouped(char *buf, size_t len, double v)
{
    if (isnan(v)) {
        snprintf(buf, len, "-");
        return buf;
    }
    char raw[32];
    snprintf(raw, sizeof(raw), "%.0f", v);
    size_t n = strlen(raw);
    size_t o = 0;
    for (size_t i = 0; i < n && o + 2 < len; i++) {
        if (i > 0 && raw[i - 1] != '-' && (n - i) % 3 == 0) {
            buf[o++] = ',';
        }
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
    return buf;
}

static const char *rate(char *buf, size_t len, double v)
{
    if (isnan(v)) {
        snprintf(buf, len, "-");
    } else if (v >= 100) {
        snprintf(buf, len, "%.0f", v);
    } else {
        snprintf(buf, len, "%.1f", v);
    }
    return buf;
}

static const char *human_bytes(char *buf, size_t len, double b)
{
    static const char *const UNITS[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    while (b >= 1024 && u + 1 < sizeof(UNITS) / sizeof(UNITS[0])) {
        b /= 1024;
        u++;
    }
    snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", isnan(b) ? 0 : b, UNITS[u]);
    return buf;
}

static const char *duration(char *buf, size_t len, double sec)
{
    long s = isnan(sec) || sec < 0 ? 0 : (long)sec;
    if (s >= 86400) {
        snprintf(buf, len, "%ldd %ldh", s / 86400, s % 86400 / 3600);
    } else if (s >= 3600) {
        snprintf(buf, len, "%ldh %ldm", s / 3600, s % 3600 / 60);
    } else if (s >= 60) {
        snprintf(buf, len, "%ldm %lds", s / 60, s % 60);
    } else {
        snprintf(buf, len, "%lds", s);
    }
    return buf;
}

/* "corrupt 2, too_large 1" or "none". */
static void print_skips(FILE *f, const json_t *skipped)
{
    const char *k;
    const json_t *v;
    int any = 0;
    json_object_foreach((json_t *)skipped, k, v)
    {
        fprintf(f, "%s%s %" JSON_INTEGER_FORMAT, any ? ", " : "", k, json_integer_value(v));
        any = 1;
    }
    if (!any) {
        fprintf(f, "none");
    }
}

static void print_worker_row(FILE *f, const json_t *w)
{
    char a[32], b[32];
    fprintf(f, "  %-22s %-16.16s %-5s %8.1fs %7.0f %5.0f%% %10s %11s %6.0f\n", str(w, "address"),
            str(w, "hostname"), str(w, "state"), num(w, "last_heartbeat_ms_ago") / 1000.0,
            num(w, "threads"), 100.0 * num(w, "load"),
            rate(a, sizeof(a), num(w, "samples_per_sec")),
            human_bytes(b, sizeof(b), num(w, "buffered_bytes")), num(w, "outstanding_splits"));
    const json_t *stages = json_object_get(w, "stages");
    if (json_array_size(stages) > 0) {
        fprintf(f, "    units:");
        size_t i;
        const json_t *u;
        json_array_foreach(stages, i, u)
        {
            /* A unit fused into the next one's pass shares its capacity. */
            int fused = json_is_string(json_object_get(u, "fused_into"));
            fprintf(f, "%s %s %s/s (%s%s%scapacity %s/s)", i > 0 ? "," : "", str(u, "name"),
                    rate(a, sizeof(a), num(u, "samples_per_sec")), fused ? "fused into " : "",
                    fused ? str(u, "fused_into") : "", fused ? ": " : "",
                    rate(b, sizeof(b), num(u, "capacity_per_sec")));
        }
        fprintf(f, "\n");
    }
}

static void print_job(FILE *f, const json_t *j)
{
    char a[32], b[32], c[32];
    const json_t *prog = json_object_get(j, "progress");
    const json_t *spec = json_object_get(j, "spec");
    const json_t *src = json_object_get(spec, "source");
    const json_t *plan = json_object_get(j, "plan");
    const json_t *splits = json_object_get(j, "splits");
    /* "name": the spec's own (dispatchers before it: the spec file's path). */
    const char *name = str(j, json_is_string(json_object_get(j, "name")) ? "name" : "spec_name");
    fprintf(f, "\njob %lld  %s  %s  epoch %.0f/%.0f  %.1f%% (%s of %s samples)\n", id(j, "id"),
            name, str(j, "state"),
            num(prog, "epochs_done"), num(prog, "epochs"), 100.0 * num(prog, "fraction"),
            grouped(b, sizeof(b), num(prog, "samples_done")),
            grouped(c, sizeof(c), num(prog, "samples_total")));
    if (!isnan(num(prog, "elapsed_sec"))) {
        double eta = num(prog, "eta_sec");
        fprintf(f, "  time     elapsed %s, ETA %s\n",
                duration(a, sizeof(a), num(prog, "elapsed_sec")),
                isnan(eta) ? "-" : duration(b, sizeof(b), eta));
    }
    fprintf(f, "  source   %s:%s, batch %.0f, stages", str(src, "type"), str(src, "path"),
            num(spec, "batch_size"));
    size_t i;
    const json_t *s;
    json_array_foreach(json_object_get(spec, "stages"), i, s)
    {
        fprintf(f, "%s%s", i > 0 ? " -> " : " ", json_string_value(s));
    }
    fprintf(f, "\n");
    fprintf(f, "  plan     %s v%.0f: %.0f of %.0f units remote, local share %.2f",
            str(plan, "mode"), num(plan, "version"), num(plan, "split"), num(plan, "units"),
            num(plan, "local_share"));
    double pred = num(plan, "predicted_samples_per_sec");
    double meas = num(plan, "measured_samples_per_sec");
    fprintf(f, "; predicted %s/s, measured %s/s", rate(a, sizeof(a), pred),
            rate(b, sizeof(b), meas));
    if (json_is_string(json_object_get(plan, "binding"))) {
        fprintf(f, "; bound by %s", str(plan, "binding"));
    }
    double need = num(plan, "workers_needed");
    if (!isnan(need) && need > 0) {
        fprintf(f, "; %.0f more worker%s would help", need, need == 1 ? "" : "s");
    }
    if (json_is_string(json_object_get(plan, "local_reason"))) {
        fprintf(f, "\n  all local: %s", str(plan, "local_reason"));
    }
    if (json_is_string(json_object_get(plan, "no_prediction"))) {
        /* Say why rather than leave "-" unexplained. */
        fprintf(f, "\n  no prediction: %s", str(plan, "no_prediction"));
    }
    fprintf(f, "\n");
    double stall = num(j, "stall_percent");
    fprintf(f, "  stall    %s   skipped %s (", isnan(stall) ? "-" : rate(a, sizeof(a), stall),
            grouped(b, sizeof(b), num(j, "skipped_total")));
    print_skips(f, json_object_get(j, "skipped"));
    fprintf(f, ")");
    double resumed = num(j, "resumed_past");
    if (!isnan(resumed) && resumed > 0) {
        /* Delivered by the job this one resumed: not skips. */
        fprintf(f, "   resumed past %s", grouped(b, sizeof(b), resumed));
    }
    fprintf(f, "%s\n", isnan(stall) ? "" : "   (stall: % of time the loop waited)");
    fprintf(f, "  splits   %.0f assigned, %.0f pending, %.0f acked, %.0f re-assigned\n",
            num(splits, "assigned"), num(splits, "pending"), num(splits, "acked"),
            num(splits, "reassigned"));
    if (json_is_string(json_object_get(j, "worker_failure"))) {
        fprintf(f, "  refused  %s\n", str(j, "worker_failure"));
    }
}

static void print_dispatcher(FILE *f, const json_t *doc, const char *addr)
{
    char a[32], b[32], c[32];
    const json_t *tot = json_object_get(doc, "totals");
    fprintf(f, "sluice-dispatcher %s at %s, up %s\n", str(doc, "version"), addr,
            duration(a, sizeof(a), num(doc, "uptime_sec")));
    fprintf(f, "workers %.0f live, %.0f lost   jobs %.0f open   delivered %s (skipped %s)   %s "
               "samples/s\n",
            num(tot, "workers_live"), num(tot, "workers_lost"), num(tot, "jobs_open"),
            grouped(a, sizeof(a), num(tot, "samples_delivered_total")),
            grouped(b, sizeof(b), num(tot, "samples_skipped_total")),
            rate(c, sizeof(c), num(tot, "samples_per_sec")));
    const json_t *workers = json_object_get(doc, "workers");
    fprintf(f, "\n  %-22s %-16s %-5s %9s %7s %6s %10s %11s %6s\n", "WORKER", "HOST", "STATE",
            "HEARTBEAT", "THREADS", "LOAD", "SAMPLES/S", "BUFFERED", "SPLITS");
    size_t i;
    const json_t *w;
    json_array_foreach(workers, i, w)
    {
        print_worker_row(f, w);
    }
    if (json_array_size(workers) == 0) {
        fprintf(f, "  (no workers)\n");
    }
    /* Thousands of workers come as a page and a summary of all of them. */
    const json_t *page = json_object_get(doc, "workers_page");
    const json_t *sum = json_object_get(doc, "workers_summary");
    if (json_is_integer(json_object_get(page, "next"))) {
        fprintf(f, "  ... %.0f workers shown of %.0f: %.0f threads live, load mean %.2f max %.2f, "
                   "%.0f leaving, %.0f lost\n",
                num(page, "shown"), num(page, "total"), num(sum, "threads"),
                num(sum, "load_mean"), num(sum, "load_max"), num(sum, "leaving"),
                num(sum, "lost"));
    }
    const json_t *j;
    json_array_foreach(json_object_get(doc, "jobs"), i, j)
    {
        print_job(f, j);
    }
    if (json_array_size(json_object_get(doc, "jobs")) == 0) {
        fprintf(f, "\n(no open jobs)\n");
    }
    /* A tenant's view (docs/protocol.md "Tenants"): other teams' jobs are
     * only counted. */
    const json_t *viewer = json_object_get(doc, "viewer");
    const char *view = str(viewer, "view");
    if (strcmp(view, "tenant") == 0 || strcmp(view, "aggregate") == 0) {
        int mine = strcmp(view, "tenant") == 0;
        fprintf(f, "\n%s; %.0f open job(s) of other tenants not shown\n",
                mine ? "your tenant's jobs only" : "no token: no job details",
                num(viewer, "other_jobs_open"));
    }
    const json_t *closed = json_object_get(doc, "closed_jobs");
    if (json_array_size(closed) > 0) {
        fprintf(f, "\nrecently closed:");
        json_array_foreach(closed, i, j)
        {
            fprintf(f, "%s job %lld (%s)", i > 0 ? "," : "", id(j, "id"), str(j, "close_reason"));
        }
        fprintf(f, "\n");
    }
}

static void print_worker_doc(FILE *f, const json_t *doc, const char *addr)
{
    char a[32], b[32];
    fprintf(f, "sluice-worker %s at %s, up %s, %s (id %lld) with %s\n", str(doc, "version"),
            addr, duration(a, sizeof(a), num(doc, "uptime_sec")), str(doc, "state"),
            id(doc, "worker_id"), str(doc, "dispatcher"));
    fprintf(f, "threads %.0f  load %.0f%%  data root %s  samples %s done, %s skipped\n",
            num(doc, "threads"), 100.0 * num(doc, "load"), str(doc, "data_root"),
            grouped(a, sizeof(a), num(doc, "samples_done")),
            grouped(b, sizeof(b), num(doc, "samples_skipped")));
    const char *last = str(doc, "last_error");
    if (strcmp(last, "-") != 0 && last[0] != '\0') {
        fprintf(f, "last error: %s\n", last);
    }
    size_t i;
    const json_t *j;
    json_array_foreach(json_object_get(doc, "jobs"), i, j)
    {
        fprintf(f, "job %lld  %s  %s  splits %.0f queued, %.0f running, %.0f done  buffered %s\n",
                id(j, "job_id"), str(j, "state"), str(j, "source"),
                num(j, "splits_queued"), num(j, "splits_running"), num(j, "splits_done"),
                human_bytes(b, sizeof(b), num(j, "buffered_bytes")));
    }
}

static int show_once(const status_opts_t *o)
{
    char err[1024] = "";
    char *text = NULL;
    int rc = o->dispatcher != NULL ? fetch_grpc(o, &text, err, sizeof(err))
                                   : fetch_http(o, &text, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "sluice status: %s\n", err);
        return SL_EXIT_RUNTIME;
    }
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    if (doc == NULL || !json_is_object(doc)) {
        fprintf(stderr, "sluice status: the answer is not a JSON object (%s)\n", jerr.text);
        json_decref(doc);
        free(text);
        return SL_EXIT_RUNTIME;
    }
    const char *addr = o->dispatcher != NULL ? o->dispatcher : o->http;
    if (o->json) {
        fputs(text, stdout);
        if (text[0] != '\0' && text[strlen(text) - 1] != '\n') {
            fputc('\n', stdout);
        }
    } else if (strcmp(str(doc, "component"), "worker") == 0) {
        print_worker_doc(stdout, doc, addr);
    } else {
        print_dispatcher(stdout, doc, addr);
    }
    fflush(stdout);
    json_decref(doc);
    free(text);
    return SL_EXIT_OK;
}

int sl_cli_status(int argc, char **argv)
{
    status_opts_t o;
    if (parse_opts(argc, argv, &o) < 0) {
        return SL_EXIT_USAGE;
    }
    if (o.dispatcher != NULL) {
        sl_rpc_init();
    }
    int rc = SL_EXIT_OK;
    for (;;) {
        if (o.watch_sec > 0 && !o.json && isatty(STDOUT_FILENO)) {
            fputs("\033[H\033[2J", stdout); /* clear the screen between refreshes */
        }
        rc = show_once(&o);
        if (o.watch_sec <= 0) {
            break;
        }
        struct timespec ts = {.tv_sec = (time_t)o.watch_sec,
                              .tv_nsec = (long)((o.watch_sec - (double)(time_t)o.watch_sec) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (o.dispatcher != NULL) {
        sl_rpc_shutdown();
    }
    return rc;
}
