/* config: the worker's settings, one sl_conf table (common/base/conf.h) that
 * fills defaults, reads --config FILE, parses flags and prints --help. */
#ifndef WK_CONFIG_H
#define WK_CONFIG_H

#include <stddef.h>

#include "common/base/conf.h"
#include "common/base/conf_man.h"

typedef struct wk_config_s {
    char dispatcher[SL_CONF_STR_MAX]; /* HOST:PORT of the dispatcher (required) */
    char listen[SL_CONF_STR_MAX];     /* gRPC listen address */
    char advertise[SL_CONF_STR_MAX];  /* address clients dial; "" = bound listen address */
    char http[SL_CONF_STR_MAX];       /* /status and /healthz; "" or "none" = off */
    char data_root[SL_CONF_STR_MAX];  /* sources are opened under it (required) */
    long long threads;                /* pool threads per job; 0 = online CPUs */
    long long buffer_bytes;           /* bound of one job's output buffer */
    long long max_message_bytes;      /* bound of one Batch message */
    long long drain_ms;               /* SIGTERM: longest wait for in-flight work */
    char plugin_dir[SL_CONF_STR_MAX]; /* stage plugins; "" = none (common/plugin/plugin.h) */
    long long plugin_timeout_ms;      /* per sample, then the plugin's process is killed */
    int log_level;                    /* syslog level; reloadable on SIGHUP */
    /* Transport security (docs/reference/config.md "Security"): PEM paths, "" = off. */
    char tls_cert[SL_CONF_STR_MAX];       /* server cert; also the client cert to the dispatcher */
    char tls_key[SL_CONF_STR_MAX];
    char tls_ca[SL_CONF_STR_MAX];         /* roots for the dispatcher; peers' certs must chain */
    char token_file[SL_CONF_STR_MAX];     /* the cluster's bearer token, read at start */
    char http_token_file[SL_CONF_STR_MAX];
    /* Tenants (docs/protocol.md "Tenants"): their clients Fetch with their
     * own tokens; the dispatcher's file, re-read on SIGHUP. "" = none. */
    char tenants_file[SL_CONF_STR_MAX];
    /* URL sources (docs/sources.md "Remote sources"): the URL prefixes this
     * host may fetch ("" = none), the shard cache and its bound. */
    char remote_roots[SL_CONF_STR_MAX];
    char cache_dir[SL_CONF_STR_MAX];
    long long cache_bytes;
} wk_config_t;

extern const sl_conf_table_t wk_conf_table;

/* Parses the command line into cfg and checks what the table cannot (data
 * root is a directory, addresses look like HOST:PORT). Returns 0 to run, 1
 * when --help/--version was printed, -EINVAL with err filled (exit 2).
 * ret_config_path receives the --config path ("" when none). */
int wk_config_parse(wk_config_t *cfg, int argc, char **argv, char *ret_config_path,
                    size_t pathlen, char *err, size_t errlen);
/* manpage.c: the prose of sluice-worker(1) (common/base/conf_man.h). */
extern const sl_man_page_t wk_man_page;

#endif
