/* config: the table. Bounds keep every derived allocation bounded: split
 * tables, per-worker assignment arrays, the job and worker tables. */
#include "dispatcher/config.h"

#include <errno.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/addr.h"
#include "common/base/err.h"
#include "common/http/httpd.h"

#define OPT_STR(key, def, help) SL_CONF_STR_ROW(disp_config_t, key, def, help)
#define OPT_INT(key, lo, hi, def, help) SL_CONF_INT_ROW(disp_config_t, key, lo, hi, def, help)

static const sl_conf_opt_t OPTS[] = {
    OPT_STR(listen, "127.0.0.1:7400", "gRPC address HOST:PORT (port 0 picks a free one)"),
    OPT_STR(http, "127.0.0.1:7401", "status HTTP address HOST:PORT (/status, /metrics, /healthz)"),
    OPT_STR(journal, "auto",
            "journal directory: job state survives a restart; auto = "
            "$XDG_STATE_HOME/sluice/journal (else ~/.local/state/sluice/journal), "
            "none (or \"\") = no journal"),
    OPT_INT(worker_timeout_ms, 100, 3600000, "5000",
            "a worker silent this long is lost and its splits re-assigned"),
    OPT_INT(heartbeat_ms, 10, 600000, "500", "heartbeat interval told to workers"),
    OPT_INT(client_timeout_ms, 100, 86400000, "30000",
            "a job whose client is silent this long is closed"),
    OPT_INT(split_size, 0, 1048576, "0",
            "positions per split; 0 = auto: two splits per worker slot per epoch, "
            "16..256 positions"),
    OPT_INT(cost_splits, 0, 1, "1",
            "cut splits at equal predicted cost when the client sends per-sample costs "
            "(0 = by count)"),
    OPT_INT(steal, 0, 1, "1",
            "move a queued split from the worker predicted to finish last to an idle one"),
    OPT_INT(max_splits_per_worker, 1, 1024, "4", "unacknowledged splits of one job per worker"),
    OPT_INT(max_client_splits, 1, 65536, "64",
            "unacknowledged splits of one job handed to its client at a time"),
    OPT_INT(max_jobs, 1, 4096, "64", "open jobs (beyond: RESOURCE_EXHAUSTED)"),
    OPT_INT(max_jobs_per_client, 0, 4096, "16",
            "open jobs of one client_id (0 = no limit but max_jobs)"),
    OPT_INT(max_workers, 1, 65536, "1024", "registered workers (beyond: RESOURCE_EXHAUSTED)"),
    OPT_INT(rpc_threads, 1, 64, "4", "threads running RPC handlers"),
    SL_CONF_LOGLEVEL_ROW(disp_config_t, log_level, "notice",
                         "error, warning, notice, info or debug"),
    SL_CONF_SECURITY_ROWS(disp_config_t,
                          "PEM server certificate; with tls_key turns TLS on (\"\" = plaintext)",
                          "PEM CA: clients and workers must present a certificate it signed "
                          "(mutual TLS)",
                          "file holding the bearer token every RPC must carry (\"\" = none)"),
    OPT_STR(tenants_file, "",
            "file of tenants, one \"NAME TOKEN [max_jobs=N]\" per line: each team's "
            "token, re-read on SIGHUP (needs token_file; \"\" = none)"),
    OPT_INT(tenant_max_jobs, 0, 4096, "0",
            "open jobs of one tenant unless its line says (0 = only max_jobs)"),
};

const sl_conf_table_t disp_conf_table = {
    .progname = "sluice-dispatcher",
    .summary = "Sluice dispatcher: worker registry, jobs, split assignment",
    .version = SL_VERSION,
    .opts = OPTS,
    .nopts = sizeof(OPTS) / sizeof(OPTS[0]),
};

int disp_config_check(const disp_config_t *c, char *err, size_t errlen)
{
    char host[256];
    unsigned port = 0;
    char why[300];
    if (sl_addr_split(c->listen, host, sizeof(host), &port, why, sizeof(why)) != 0) {
        return sl_err(err, errlen, -EINVAL, "listen: %s", why);
    }
    if (sl_addr_split(c->http, host, sizeof(host), &port, why, sizeof(why)) != 0) {
        return sl_err(err, errlen, -EINVAL, "http: %s", why);
    }
    if ((c->tls_cert[0] != '\0') != (c->tls_key[0] != '\0')) {
        return sl_err(err, errlen, -EINVAL, "tls_cert and tls_key go together");
    }
    if (c->tls_ca[0] != '\0' && c->tls_cert[0] == '\0') {
        return sl_err(err, errlen, -EINVAL, "tls_ca needs tls_cert and tls_key");
    }
    if (c->tenants_file[0] != '\0' && c->token_file[0] == '\0') {
        /* Workers and operators authenticate with the cluster token; with
         * tenants and without it they could not (and nobody could act
         * as the cluster). */
        return sl_err(err, errlen, -EINVAL, "tenants_file needs token_file");
    }
    if (c->heartbeat_ms >= c->worker_timeout_ms) {
        return sl_err(err, errlen, -EINVAL,
                      "heartbeat_ms (%lld) must be below worker_timeout_ms (%lld)",
                      c->heartbeat_ms, c->worker_timeout_ms);
    }
    return 0;
}

/* The per-user base of "auto": $XDG_STATE_HOME (the XDG spec ignores a
 * relative one), else $HOME/.local/state, else the passwd entry's home (root
 * started with an empty environment gets /root/.local/state). */
static int state_home(char *buf, size_t len, char *err, size_t errlen)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    if (xdg != NULL && xdg[0] == '/') {
        return snprintf(buf, len, "%s", xdg) < (int)len ? 0 : -ENAMETOOLONG;
    }
    const char *home = getenv("HOME");
    char pwbuf[4096];
    struct passwd pw, *pwp = NULL;
    if ((home == NULL || home[0] != '/') &&
        getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp != NULL &&
        pwp->pw_dir != NULL && pwp->pw_dir[0] == '/') {
        home = pwp->pw_dir;
    }
    if (home == NULL || home[0] != '/') {
        return sl_err(err, errlen, -ENOENT,
                      "journal auto: no $XDG_STATE_HOME, $HOME or home directory to keep it "
                      "in: give --journal DIR (or --journal none)");
    }
    return snprintf(buf, len, "%s/.local/state", home) < (int)len ? 0 : -ENAMETOOLONG;
}

/* mkdir -p of path's parents (not path itself: the journal creates it). */
static int make_parents(char *path)
{
    for (char *p = strchr(path + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
        *p = '\0';
        int rc = mkdir(path, 0700) < 0 && errno != EEXIST ? -errno : 0;
        *p = '/';
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

int disp_config_journal_dir(const char *journal, char *buf, size_t len, char *err, size_t errlen)
{
    if (journal[0] == '\0' || strcmp(journal, "none") == 0 || strcmp(journal, "off") == 0) {
        buf[0] = '\0';
        return 0;
    }
    if (strcmp(journal, "auto") != 0) {
        if (snprintf(buf, len, "%s", journal) >= (int)len) {
            return sl_err(err, errlen, -ENAMETOOLONG, "journal: path too long");
        }
        return 0;
    }
    char base[SL_CONF_STR_MAX];
    int rc = state_home(base, sizeof(base), err, errlen);
    if (rc == -ENAMETOOLONG ||
        (rc == 0 && snprintf(buf, len, "%s/sluice/journal", base) >= (int)len)) {
        return sl_err(err, errlen, -ENAMETOOLONG, "journal auto: state directory path too long");
    }
    if (rc < 0) {
        return rc;
    }
    rc = make_parents(buf);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "journal auto: cannot create the parents of '%s': %s", buf,
                      strerror(-rc));
    }
    return 0;
}
