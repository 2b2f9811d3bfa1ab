/* --rank / --world-size / --job-name for `sluice run` and `sluice bench`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "common/spec.h"

void sl_cli_ranks_init(sl_cli_ranks_t *r)
{
    memset(r, 0, sizeof(*r));
    r->rank = -1;
}

static int parse_long(const char *s, long lo, long hi, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int sl_cli_ranks_opt(const char *cmd, int c, const char *arg, sl_cli_ranks_t *r)
{
    switch (c) {
    case SL_CLI_OPT_RANK:
        if (parse_long(arg, 0, SL_SPEC_WORLD_MAX - 1, &r->rank) < 0) {
            fprintf(stderr, "sluice %s: --rank: '%s' is not an integer in 0..%d\n", cmd, arg,
                    SL_SPEC_WORLD_MAX - 1);
            return -EINVAL;
        }
        return 1;
    case SL_CLI_OPT_WORLD:
        if (parse_long(arg, 1, SL_SPEC_WORLD_MAX, &r->world_size) < 0) {
            fprintf(stderr, "sluice %s: --world-size: '%s' is not an integer in 1..%d\n", cmd,
                    arg, SL_SPEC_WORLD_MAX);
            return -EINVAL;
        }
        return 1;
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
