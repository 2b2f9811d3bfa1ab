/* config: the dispatcher's settings as one sl_conf table (common/base/conf.h).
 * Every key is also a flag (--worker-timeout-ms) and a line of
 * conf/dispatcher.conf. Only log_level is reloadable (SIGHUP). */
#ifndef DISP_CONFIG_H
#define DISP_CONFIG_H

#include <stddef.h>

#include "common/base/version.h"
#include "common/base/conf.h"
#include "common/base/conf_man.h"


typedef struct disp_config_s {
    char listen[SL_CONF_STR_MAX];  /* gRPC HOST:PORT */
    char http[SL_CONF_STR_MAX];    /* status HOST:PORT */
    /* "auto" (the default), "none"/"off"/"" or a directory; main resolves
     * it with disp_config_journal_dir, after which "" = no journal. */
    char journal[SL_CONF_STR_MAX];
    long long worker_timeout_ms;
    long long heartbeat_ms;
    long long client_timeout_ms;
    long long split_size; /* 0 = auto */
    long long cost_splits; /* 1: cut by the client's per-sample costs */
    long long steal;       /* 1: steal queued splits from the last finisher */
    long long max_splits_per_worker;
    long long max_client_splits;
    long long max_jobs;
    long long max_jobs_per_client;
    long long max_workers;
    long long rpc_threads;
    int log_level; /* syslog level */
    /* Transport security (docs/reference/config.md "Security"): PEM paths, "" = off. */
    char tls_cert[SL_CONF_STR_MAX];
    char tls_key[SL_CONF_STR_MAX];
    char tls_ca[SL_CONF_STR_MAX];        /* set: clients need a certificate it signed */
    char token_file[SL_CONF_STR_MAX];    /* gRPC bearer token, read at start */
    char http_token_file[SL_CONF_STR_MAX]; /* status HTTP bearer token, read at start */
    /* Tenants (docs/protocol.md "Tenants"): the file of named tokens, read
     * at start and again on SIGHUP; "" = none. */
    char tenants_file[SL_CONF_STR_MAX];
    long long tenant_max_jobs; /* open jobs per tenant unless its line says; 0 = max_jobs */
} disp_config_t;

extern const sl_conf_table_t disp_conf_table;

/* Checks what one key's bounds cannot: heartbeat_ms < worker_timeout_ms,
 * addresses of the form HOST:PORT. */
int disp_config_check(const disp_config_t *c, char *err, size_t errlen);
/* The journal directory the journal key names: "" for "none", "off" or "";
 * for "auto" the per-user state directory $XDG_STATE_HOME/sluice/journal,
 * else $HOME/.local/state/sluice/journal, else the passwd home's (its
 * parents created 0700); else the path as given. Writes buf (len bytes);
 * 0, or a negative errno with err filled. */
int disp_config_journal_dir(const char *journal, char *buf, size_t len, char *err, size_t errlen);
/* manpage.c: the prose of sluice-dispatcher(1) (common/base/conf_man.h). */
extern const sl_man_page_t disp_man_page;

#endif
