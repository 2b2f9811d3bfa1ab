#include "worker/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/base/addr.h"
#include "common/base/version.h"
#include "common/base/err.h"
#include "common/remote/url.h"

/* One row per key: the same rows print --help, read the file and the flags. */
#define WK_STR(key, def, help) SL_CONF_STR_ROW(wk_config_t, key, def, help)
#define WK_INT(key, lo, hi, def, help) SL_CONF_INT_ROW(wk_config_t, key, lo, hi, def, help)

static const sl_conf_opt_t WK_OPTS[] = {
    SL_CONF_REQUIRED_STR_ROW(wk_config_t, dispatcher, "dispatcher address HOST:PORT"),
    WK_STR(listen, "127.0.0.1:7500", "gRPC listen address HOST:PORT (port 0 picks a free one)"),
    WK_STR(advertise, "", "address clients dial for Fetch (default: the bound listen address)"),
    WK_STR(http, "127.0.0.1:7501",
           "HTTP address for /status, /metrics and /healthz (\"none\" = off; port 0 picks a "
           "free one)"),
    SL_CONF_REQUIRED_STR_ROW(wk_config_t, data_root, "directory job sources are resolved under"),
    WK_INT(threads, 0, 256, "0", "pipeline threads (0 = online CPUs)"),
    WK_INT(buffer_bytes, 1 << 20, (double)(1LL << 40), "268435456",
           "bound of each job's buffer of finished batches"),
    WK_INT(max_message_bytes, 64 << 10, (double)(1LL << 30), "8388608",
           "largest Batch message sent to a client"),
    WK_INT(drain_ms, 0, 600000, "5000",
           "on SIGTERM, longest wait (ms) for started splits to reach their clients"),
    WK_STR(plugin_dir, "",
           "directory of stage plugins (*.so) this worker may run; only its files are ever "
           "loaded, each in a process of its own (\"\" = none)"),
    WK_INT(plugin_timeout_ms, 100, 600000, "10000",
           "longest a plugin may take on one sample before its process is killed"),
    SL_CONF_LOGLEVEL_ROW(wk_config_t, log_level, "notice",
                         "error|warning|notice|info|debug (reloaded on SIGHUP)"),
    SL_CONF_SECURITY_ROWS(wk_config_t,
                          "PEM certificate: with tls_key serves TLS and is the client "
                          "certificate to the dispatcher (\"\" = plaintext)",
                          "PEM CA: turns on TLS to the dispatcher, verifying it; with tls_cert "
                          "clients must also present a certificate it signed",
                          "file holding the bearer token: sent to the dispatcher, required "
                          "from clients"),
    WK_STR(tenants_file, "",
           "file of tenants (\"NAME TOKEN ...\" per line, as the dispatcher's): their clients "
           "Fetch with their own tokens; re-read on SIGHUP (needs token_file; \"\" = none)"),
    WK_STR(remote_roots, "",
           "comma-separated URL prefixes (http://, https://, s3://bucket/) job sources may "
           "read; a URL outside all of them is refused (\"\" = none: URL sources refused)"),
    WK_STR(cache_dir, "",
           "directory of the shard cache for URL sources, shards under <cache_dir>/shards "
           "(\"\" = $XDG_CACHE_HOME/sluice, ~/.cache/sluice or /var/cache/sluice); when set, "
           "also the prefix cache of jobs' deterministic stages, under <cache_dir>/samples"),
    WK_INT(cache_bytes, 1 << 20, (double)(1LL << 50), "10737418240",
           "bound of the shard cache and the prefix cache together (shards first; least "
           "recently used entries are evicted)"),
};

const sl_conf_table_t wk_conf_table = {
    .progname = "sluice-worker",
    .summary = "runs pipeline stages for the dispatcher's jobs and streams batches to clients",
    .version = SL_VERSION,
    .opts = WK_OPTS,
    .nopts = sizeof(WK_OPTS) / sizeof(WK_OPTS[0]),
};

/* HOST:PORT as every daemon reads it (common/base/addr.h). */
static int check_hostport(const char *key, const char *v, char *err, size_t errlen)
{
    char host[256];
    unsigned port = 0;
    char why[300];
    if (sl_addr_split(v, host, sizeof(host), &port, why, sizeof(why)) != 0) {
        return sl_err(err, errlen, -EINVAL, "%s: %s", key, why);
    }
    return 0;
}

int wk_config_parse(wk_config_t *cfg, int argc, char **argv, char *ret_config_path,
                    size_t pathlen, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof(*cfg));
    if (ret_config_path != NULL && pathlen > 0) {
        ret_config_path[0] = '\0';
    }
    int rc = sl_conf_parse_args(&wk_conf_table, cfg, argc, argv, ret_config_path, pathlen, err,
                                errlen);
    if (rc != 0) {
        return rc;
    }
    rc = check_hostport("--dispatcher", cfg->dispatcher, err, errlen);
    if (rc == 0) {
        rc = check_hostport("--listen", cfg->listen, err, errlen);
    }
    if (rc == 0 && cfg->advertise[0] != '\0') {
        rc = check_hostport("--advertise", cfg->advertise, err, errlen);
    }
    if (rc == 0 && cfg->http[0] != '\0' && strcmp(cfg->http, "none") != 0) {
        rc = check_hostport("--http", cfg->http, err, errlen);
    }
    if (rc < 0) {
        return rc;
    }
    if ((cfg->tls_cert[0] != '\0') != (cfg->tls_key[0] != '\0')) {
        return sl_err(err, errlen, -EINVAL, "tls_cert and tls_key go together");
    }
    if (cfg->tenants_file[0] != '\0' && cfg->token_file[0] == '\0') {
        return sl_err(err, errlen, -EINVAL, "tenants_file needs token_file");
    }
    sl_roots_t roots;
    rc = sl_roots_parse(cfg->remote_roots, &roots, err, errlen);
    if (rc < 0) {
        return rc;
    }
    sl_roots_free(&roots);
    struct stat st;
    if (stat(cfg->data_root, &st) < 0) {
        return sl_err(err, errlen, -EINVAL, "--data-root: '%s': %s", cfg->data_root,
                      strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        return sl_err(err, errlen, -EINVAL, "--data-root: '%s' is not a directory",
                      cfg->data_root);
    }
    return 0;
}
