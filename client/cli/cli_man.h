/* cli_man: the sluice(1) manual page (`sluice --help-man`), written from the
 * command table (cli.c) and, for each command, from the option table its
 * flags are parsed with (cli_opts.c) and its --help text. The two are
 * checked against each other: a flag the table parses but --help does not
 * describe, or the reverse, fails the page (and so `make`). */
#ifndef SL_CLI_MAN_H
#define SL_CLI_MAN_H

#include <getopt.h>
#include <stdio.h>

#include "client/cli/cli.h"
#include "client/cli/cli_opts.h"

/* The whole page. Each command's part comes from the command itself, run
 * with --help-man in a child process (its option table exists only while
 * it parses). 0, or -EIO / -EINVAL after a message on stderr. */
int sl_cli_man(const sl_cli_command_t *cmds, size_t n, FILE *f);

/* One command's part: its synopsis, the prose of its --help and a tagged
 * paragraph per flag, in --help's order. table: the getopt table the
 * command parses with (help entries are skipped). 0 or -EINVAL / -EIO. */
int sl_cli_man_command(const sl_cli_cmd_t *cmd, const struct option *table, FILE *f);

#endif
