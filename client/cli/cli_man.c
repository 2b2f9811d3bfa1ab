/* The sluice(1) manual page; see cli_man.h. */
#include "client/cli/cli_man.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/conf_man.h"
#include "common/base/version.h"

#define MAX_ITEMS 64 /* entries and paragraphs of one command's --help */

static const char DESCRIPTION[] =
    "sluice runs a Sluice input pipeline -- read, JPEG decode, crop, flip, normalize, batch "
    "-- described by a JSON spec (SPEC), either all in this process (--local) or through a "
    "dispatcher (--dispatcher HOST:PORT) whose workers run the offloaded stages while this "
    "process runs the rest, merges the streams into batches and delivers every sample of "
    "every epoch exactly once. The same client is the C library libsluice and the Python "
    "package sluice; this command is its command-line face: run a spec, ask the planner what "
    "it would do, benchmark a synthetic training loop, or show a cluster's status.\n"
    "\n"
    "Flags several commands take mean and check the same in each. A bad value exits 2 with "
    "\"sluice COMMAND: --FLAG: 'VALUE' is not ...\".";

static const char EXIT_STATUS[] =
    "0 success; 1 runtime failure (the dispatcher unreachable past --dispatcher-timeout, a "
    "job that failed, a bench run that got stuck); 2 usage or spec error (the message names "
    "the file, the line and the field).";

static const char SEE_ALSO[] = "sluice-dispatcher(1), sluice-worker(1), " SL_MAN_README;

/* The command's --help text, as it prints it. NULL on ENOMEM. */
static char *usage_text(const sl_cli_cmd_t *cmd)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (m == NULL) {
        return NULL;
    }
    cmd->usage(m);
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A piece of --help: a paragraph of prose (the first one is the synopsis),
 * or an entry, "  --flag ARG   text" and the lines indented under it. */
typedef struct {
    int is_entry;
    char tag[128]; /* entries: "--flag ARG" */
    char text[1024];
} item_t;

static void append(char *dst, size_t cap, const char *src, size_t len)
{
    size_t used = strlen(dst);
    snprintf(dst + used, cap - used, "%s%.*s", used > 0 ? " " : "", (int)len, src);
}

/* "--flag" and its value's placeholder, if the next word is one (IMG_PER_S,
 * auto|fastflow; not "take" or "print": the text). */
static size_t tag_length(const char *s, size_t len)
{
    size_t flag = strcspn(s, " ");
    if (flag >= len || s[flag + 1] == ' ') {
        return flag < len ? flag : len;
    }
    const char *arg = s + flag + 1;
    size_t alen = strcspn(arg, " ");
    alen = alen < len - flag - 1 ? alen : len - flag - 1;
    for (size_t i = 0; i < alen; i++) {
        if (islower((unsigned char)arg[i]) && memchr(arg, '|', alen) == NULL) {
            return flag;
        }
    }
    return flag + 1 + alen;
}

static int parse_usage(const char *u, item_t *it, size_t max, size_t *ret_n)
{
    size_t n = 0;
    item_t *cur = NULL; /* the item the next line continues */
    for (const char *p = u; *p != '\0';) {
        size_t len = strcspn(p, "\n");
        const char *line = p;
        p += len + (p[len] == '\n');
        size_t ind = strspn(line, " ");
        if (ind >= len) {
            cur = NULL;
            continue;
        }
        int starts_entry = n > 0 && ind == 2 && strncmp(line + 2, "--", 2) == 0;
        int continues = cur != NULL && !starts_entry && (ind > 2 || !cur->is_entry);
        if (!continues) {
            if (n == max) {
                return -E2BIG;
            }
            cur = &it[n++];
            memset(cur, 0, sizeof(*cur));
            cur->is_entry = starts_entry;
        }
        if (starts_entry) {
            size_t tlen = tag_length(line + 2, len - 2);
            snprintf(cur->tag, sizeof(cur->tag), "%.*s", (int)tlen, line + 2);
            ind = 2 + tlen + strspn(line + 2 + tlen, " ");
        } else if (n == 1 && !continues && strncmp(line, "usage: ", 7) == 0) {
            ind = 7;
        }
        if (ind < len) {
            append(cur->text, sizeof(cur->text), line + ind, len - ind);
        }
    }
    *ret_n = n;
    return 0;
}

static int in_table(const struct option *table, const char *flag, size_t len)
{
    for (size_t i = 0; table[i].name != NULL; i++) {
        if (strlen(table[i].name) == len && strncmp(table[i].name, flag, len) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The entry describing --name, or NULL. */
static const item_t *find_entry(const item_t *it, size_t n, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < n; i++) {
        const char *flag = it[i].tag + 2;
        if (it[i].is_entry && strncmp(flag, name, len) == 0 &&
            (flag[len] == '\0' || flag[len] == ' ')) {
            return &it[i];
        }
    }
    return NULL;
}

/* Every flag of the table (but the help flags) has an entry, and every
 * entry is a flag of the table. 0 or -EINVAL (printed). */
static int check_entries(const sl_cli_cmd_t *cmd, const struct option *table,
                         const item_t *it, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(it[i].tag + 2, " ");
        if (it[i].is_entry && !in_table(table, it[i].tag + 2, len)) {
            fprintf(stderr, "sluice %s --help describes %.*s, which it does not parse\n",
                    cmd->name, (int)len + 2, it[i].tag);
            rc = -EINVAL;
        }
    }
    for (size_t t = 0; table[t].name != NULL; t++) {
        const char *name = table[t].name;
        if (find_entry(it, n, name) == NULL && strcmp(name, "help") != 0 &&
            strcmp(name, SL_MAN_FLAG + 2) != 0) {
            fprintf(stderr, "sluice %s parses --%s but --help does not describe it\n",
                    cmd->name, name);
            rc = -EINVAL;
        }
    }
    return rc;
}

int sl_cli_man_command(const sl_cli_cmd_t *cmd, const struct option *table, FILE *f)
{
    item_t *it = calloc(MAX_ITEMS, sizeof(*it));
    char *u = usage_text(cmd);
    size_t n = 0;
    int rc = it != NULL && u != NULL ? 0 : -ENOMEM;
    if (rc == 0) {
        rc = parse_usage(u, it, MAX_ITEMS, &n);
    }
    if (rc == 0) {
        rc = check_entries(cmd, table, it, n);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (it[i].is_entry) {
            sl_man_tagged(f, it[i].tag, it[i].text);
        } else {
            fputs(".PP\n", f);
            sl_man_paragraphs(f, it[i].text);
        }
    }
    if (rc == -E2BIG || rc == -ENOMEM) {
        fprintf(stderr, "sluice %s %s: %s\n", cmd->name, SL_MAN_FLAG, strerror(-rc));
    }
    free(u);
    free(it);
    fflush(f);
    return rc == 0 && ferror(f) ? -EIO : rc;
}

/* The command's part, written by the command in a child process. */
static int command_part(const sl_cli_command_t *c, FILE *f)
{
    fprintf(f, ".SS \"sluice %s\"\n", c->name);
    sl_man_paragraphs(f, c->summary);
    fflush(f);
    pid_t pid = fork();
    if (pid < 0) {
        return -errno;
    }
    if (pid == 0) {
        char *argv[] = {(char *)c->name, SL_MAN_FLAG, NULL};
        c->main(2, argv); /* exits after writing its part */
        fprintf(stderr, "sluice %s: no %s\n", c->name, SL_MAN_FLAG);
        _exit(1);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            return -errno;
        }
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EINVAL;
}

int sl_cli_man(const sl_cli_command_t *cmds, size_t n, FILE *f)
{
    sl_man_head(f, "sluice", SL_VERSION, "run, plan and benchmark Sluice input pipelines");
    fputs(".SH SYNOPSIS\n", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i > 0 ? ".br\n.B sluice\n" : ".B sluice\n", f);
        char line[512] = "";
        for (const char *p = cmds[i].synopsis; *p != '\0';) { /* one line: wrapping is roff's */
            size_t len = strcspn(p, "\n");
            size_t ind = strspn(p, " ");
            append(line, sizeof(line), p + ind, len - ind);
            p += len + (p[len] == '\n');
        }
        sl_man_text(f, line, strlen(line));
        fputc('\n', f);
    }
    fputs(".br\n.B sluice\n\\fICOMMAND\\fR \\fB\\-\\-help\\fR\n", f);
    fputs(".br\n.B sluice\n\\fB\\-\\-version\\fR\n", f);
    sl_man_section(f, "DESCRIPTION", DESCRIPTION);
    fputs(".SH COMMANDS\n", f);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = command_part(&cmds[i], f);
    }
    if (rc == 0) {
        sl_man_section(f, "EXIT STATUS", EXIT_STATUS);
        sl_man_section(f, "SEE ALSO", SEE_ALSO);
    }
    fflush(f);
    return rc == 0 && ferror(f) ? -EIO : rc;
}
