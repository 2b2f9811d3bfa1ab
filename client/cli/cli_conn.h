/* cli_conn: how the `sluice` subcommands reach the cluster: TLS, the bearer
 * token, and how long a dispatcher outage is ridden out. Shared by run,
 * bench, plan and status: cli_opts.c puts them in the option table and
 * hands every option to sl_cli_conn_opt. */
#ifndef SL_CLI_CONN_H
#define SL_CLI_CONN_H

#include "client/lib/sluice.h"
#include "common/rpc/rpc.h"
#include "common/base/secret.h"

typedef struct sl_cli_conn_s {
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    const char *token_file;
    long dispatcher_timeout_ms; /* 0 = the library's default */
    /* sl_cli_conn_security's result (points into this struct and argv). */
    sl_rpc_security_t sec;
    char token[SL_SECRET_MAX];
} sl_cli_conn_t;

#define SL_CLI_OPT_TLS_CA 0x1101
#define SL_CLI_OPT_TLS_CERT 0x1102
#define SL_CLI_OPT_TLS_KEY 0x1103
#define SL_CLI_OPT_TOKEN_FILE 0x1104
#define SL_CLI_OPT_DISP_TIMEOUT 0x1105
#define SL_CLI_CONN_USAGE                                                                      \
    "  --tls-ca FILE        TLS to the dispatcher and workers, trusting this PEM CA\n"          \
    "  --tls-cert FILE      PEM client certificate (mutual TLS; with --tls-key)\n"              \
    "  --tls-key FILE       PEM key of --tls-cert\n"                                            \
    "  --token-file FILE    file holding the cluster's bearer token\n"                          \
    "  --dispatcher-timeout MS\n"                                                               \
    "                       fail after the dispatcher is unreachable this long (default\n"      \
    "                       60000); meanwhile workers' batches keep flowing\n"

void sl_cli_conn_init(sl_cli_conn_t *r);
/* 1: c was a connection option (parsed), 0: not one, -EINVAL: bad value (printed). */
int sl_cli_conn_opt(const char *cmd, int c, const char *arg, sl_cli_conn_t *r);
/* Into the library's options (it reads the token file itself). */
void sl_cli_conn_apply(const sl_cli_conn_t *r, sluice_options_t *so);
/* For subcommands that open their own channel: fills r->sec (reads the
 * token file). 0 or -EINVAL (printed). */
int sl_cli_conn_security(const char *cmd, sl_cli_conn_t *r);

#endif
