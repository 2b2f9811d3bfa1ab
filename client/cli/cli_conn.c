/* --tls-*, --token-file, --dispatcher-timeout of the `sluice` subcommands. */
#include "client/cli/cli_conn.h"

#include "client/cli/cli_opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_cli_conn_init(sl_cli_conn_t *r) { memset(r, 0, sizeof(*r)); }

int sl_cli_conn_opt(const char *cmd, int c, const char *arg, sl_cli_conn_t *r)
{
    switch (c) {
    case SL_CLI_OPT_TLS_CA:
        r->tls_ca = arg;
        return 1;
    case SL_CLI_OPT_TLS_CERT:
        r->tls_cert = arg;
        return 1;
    case SL_CLI_OPT_TLS_KEY:
        r->tls_key = arg;
        return 1;
    case SL_CLI_OPT_TOKEN_FILE:
        r->token_file = arg;
        return 1;
    case SL_CLI_OPT_DISP_TIMEOUT:
        return sl_cli_parse_long(cmd, "dispatcher-timeout", arg, 100, 86400000,
                                 &r->dispatcher_timeout_ms) < 0
                   ? -EINVAL
                   : 1;
    default:
        return 0;
    }
}

void sl_cli_conn_apply(const sl_cli_conn_t *r, sluice_options_t *so)
{
    so->tls_ca = r->tls_ca;
    so->tls_cert = r->tls_cert;
    so->tls_key = r->tls_key;
    so->token_file = r->token_file;
    so->dispatcher_timeout_ms = (int)r->dispatcher_timeout_ms;
}

int sl_cli_conn_security(const char *cmd, sl_cli_conn_t *r)
{
    char err[512];
    memset(&r->sec, 0, sizeof(r->sec));
    if ((r->tls_cert == NULL) != (r->tls_key == NULL)) {
        fprintf(stderr, "sluice %s: --tls-cert and --tls-key go together\n", cmd);
        return -EINVAL;
    }
    r->sec.tls_ca = r->tls_ca;
    r->sec.tls_cert = r->tls_cert;
    r->sec.tls_key = r->tls_key;
    if (r->token_file != NULL) {
        if (sl_secret_read(r->token_file, r->token, sizeof(r->token), err, sizeof(err)) != 0) {
            fprintf(stderr, "sluice %s: %s\n", cmd, err);
            return -EINVAL;
        }
        r->sec.token = r->token;
    }
    return 0;
}
