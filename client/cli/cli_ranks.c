/* --rank / --world-size / --job-name for `sluice run` and `sluice bench`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli/cli.h"
#include "client/cli/cli_opts.h"
#include "common/spec/spec.h"

void sl_cli_ranks_init(sl_cli_ranks_t *r)
{
    memset(r, 0, sizeof(*r));
    r->rank = -1;
}

int sl_cli_ranks_opt(const char *cmd, int c, const char *arg, sl_cli_ranks_t *r)
{
    switch (c) {
    case SL_CLI_OPT_RANK:
        return sl_cli_parse_long(cmd, "rank", arg, 0, SL_SPEC_WORLD_MAX - 1, &r->rank) < 0
                   ? -EINVAL
                   : 1;
    case SL_CLI_OPT_WORLD:
        return sl_cli_parse_long(cmd, "world-size", arg, 1, SL_SPEC_WORLD_MAX,
                                 &r->world_size) < 0
                   ? -EINVAL
                   : 1;
    case SL_CLI_OPT_JOB_NAME:
        if (arg[0] == '\0' || strlen(arg) > 100) {
            fprintf(stderr, "sluice %s: --job-name: 1..100 characters\n", cmd);
            return -EINVAL;
        }
        r->job_name = arg;
        return 1;
    default:
        return 0;
    }
}

int sl_cli_ranks_check(const char *cmd, const sl_cli_ranks_t *r)
{
    if (r->rank >= 0 && r->world_size == 0) {
        fprintf(stderr, "sluice %s: --rank needs --world-size\n", cmd);
        return -EINVAL;
    }
    if (r->rank >= r->world_size && r->world_size > 0) {
        fprintf(stderr, "sluice %s: --rank %ld is not below --world-size %ld\n", cmd, r->rank,
                r->world_size);
        return -EINVAL;
    }
    return 0;
}

void sl_cli_ranks_apply(const sl_cli_ranks_t *r, sluice_options_t *so)
{
    so->world_size = (unsigned)r->world_size;
    so->rank = r->rank > 0 ? (unsigned)r->rank : 0;
    so->job_name = r->job_name;
}
