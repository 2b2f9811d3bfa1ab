/* conf_man: roff for the manual pages (see conf_man.h). Library code: it
 * writes to the stream it is given and reports the stream's error. */
#include "common/base/conf_man.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

int sl_man_requested(int argc, char **argv)
{
    return argc == 2 && strcmp(argv[1], SL_MAN_FLAG) == 0;
}

static int is_word(char ch)
{
    return isalnum((unsigned char)ch) || ch == '-' || ch == '_';
}

void sl_man_text(FILE *f, const char *s, size_t len)
{
    int in_flag = 0; /* inside a "--flag" word: its hyphens are \- too */
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        char prev = i > 0 ? s[i - 1] : '\n';
        if (prev == '\n' && (ch == '.' || ch == '\'')) {
            fputs("\\&", f); /* would be read as a request */
        }
        if (ch == '-' && !in_flag && i + 1 < len && s[i + 1] == '-' && !is_word(prev)) {
            in_flag = 1;
        } else if (!is_word(ch)) {
            in_flag = 0;
        }
        if (ch == '\\') {
            fputs("\\e", f);
        } else if (ch == '-' && in_flag) {
            fputs("\\-", f);
        } else {
            fputc(ch, f);
        }
    }
}

static void text_line(FILE *f, const char *s)
{
    sl_man_text(f, s, strlen(s));
    fputc('\n', f);
}

void sl_man_head(FILE *f, const char *name, const char *version, const char *summary)
{
    fprintf(f, ".\\\" Written by %s %s from its option table; edit that, not this.\n", name,
            SL_MAN_FLAG);
    fputs(".TH \"", f);
    for (const char *p = name; *p != '\0'; p++) {
        fputc(toupper((unsigned char)*p), f);
    }
    fprintf(f, "\" 1 \"\" \"sluice %s\" \"Sluice\"\n", version != NULL ? version : "");
    /* Flags must stay whole words: a hyphenated "--max-" at a line end
     * would not search or copy. */
    fputs(".nh\n.ad l\n.SH NAME\n", f);
    sl_man_text(f, name, strlen(name));
    fputs(" \\- ", f);
    text_line(f, summary != NULL ? summary : "");
}

void sl_man_paragraphs(FILE *f, const char *text)
{
    int started = 0, gap = 0, pre = 0;
    const char *p = text;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (len == 0) {
            gap = started;
        } else {
            int verbatim = len >= 2 && p[0] == ' ' && p[1] == ' ';
            if (pre && (gap || !verbatim)) {
                fputs(".fi\n.RE\n", f);
                pre = 0;
            }
            if (gap) {
                fputs(".PP\n", f);
                gap = 0;
            }
            if (verbatim && !pre) {
                fputs(".RS 4\n.nf\n", f);
                pre = 1;
            }
            /* Fill mode breaks at a leading space anyway; keep it only in .nf. */
            size_t skip = verbatim ? 2 : 0;
            sl_man_text(f, p + skip, len - skip);
            fputc('\n', f);
            started = 1;
        }
        p += len + (nl != NULL);
    }
    if (pre) {
        fputs(".fi\n.RE\n", f);
    }
}

void sl_man_tagged(FILE *f, const char *tag, const char *text)
{
    const char *sp = strchr(tag, ' ');
    size_t n = sp != NULL ? (size_t)(sp - tag) : strlen(tag);
    fputs(".TP\n\\fB", f);
    sl_man_text(f, tag, n);
    fputs("\\fR", f);
    if (sp != NULL) {
        fputs(" \\fI", f);
        sl_man_text(f, sp + 1, strlen(sp + 1));
        fputs("\\fR", f);
    }
    fputc('\n', f);
    sl_man_paragraphs(f, text);
}

void sl_man_section(FILE *f, const char *title, const char *text)
{
    fprintf(f, ".SH %s\n", title);
    sl_man_paragraphs(f, text);
}

/* One row of the table as a tagged paragraph: its help line, then what
 * --help shows in parentheses, spelled out. */
static void print_opt(FILE *f, const sl_conf_opt_t *o)
{
    char tag[128];
    char text[1024];
    int n = snprintf(tag, sizeof(tag), "--%s %s", o->name, sl_conf_type_hint(o));
    for (int i = 2; i < n && tag[i] != ' '; i++) {
        tag[i] = tag[i] == '_' ? '-' : tag[i];
    }
    size_t used = (size_t)snprintf(text, sizeof(text), "%s.", o->help != NULL ? o->help : "");
    if (o->required) {
        used += (size_t)snprintf(text + used, sizeof(text) - used, " Required.");
    } else if (o->def == NULL || o->def[0] == '\0') {
        used += (size_t)snprintf(text + used, sizeof(text) - used, " Default: empty.");
    } else {
        used += (size_t)snprintf(text + used, sizeof(text) - used, " Default: %s.", o->def);
    }
    if (used < sizeof(text) && o->type == SL_CONF_INT) {
        used += (size_t)snprintf(text + used, sizeof(text) - used, " Range: %.0f..%.0f.",
                                 o->min, o->max);
    } else if (used < sizeof(text) && o->type == SL_CONF_DOUBLE) {
        used += (size_t)snprintf(text + used, sizeof(text) - used, " Range: %g..%g.", o->min,
                                 o->max);
    }
    if (used < sizeof(text) && o->reloadable) {
        snprintf(text + used, sizeof(text) - used, " Re-read on SIGHUP.");
    }
    sl_man_tagged(f, tag, text);
}

int sl_conf_print_man(const sl_conf_table_t *t, const sl_man_page_t *p, FILE *f)
{
    sl_man_head(f, t->progname, t->version, t->summary);
    fputs(".SH SYNOPSIS\n.B ", f);
    text_line(f, t->progname);
    fputs("[\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fB\\-\\-\\fR\\fIKEY\\fR \\fIVALUE\\fR]...\n",
          f);
    sl_man_section(f, "DESCRIPTION", p->description);
    sl_man_section(f, "OPTIONS",
                   "Every option is also a key of the configuration file, with its hyphens "
                   "written as underscores there. Flags override the file. --KEY=VALUE works "
                   "as well as --KEY VALUE.");
    sl_man_tagged(f, "--config FILE", "Read key = value lines from FILE first, wherever the "
                                      "flag stands; the other flags override them.");
    sl_man_tagged(f, "--help", "Print every option with its bounds and default, and exit.");
    sl_man_tagged(f, "--version", "Print the version and exit.");
    for (size_t i = 0; i < t->nopts; i++) {
        print_opt(f, &t->opts[i]);
    }
    sl_man_section(f, "CONFIGURATION FILE",
                   "Lines of key = value; # starts a comment. An unknown key, a bad value or "
                   "a line without = stops the program with exit status 2 and a message "
                   "FILE:LINE: key: why. SIGHUP re-reads the file and applies the keys "
                   "marked \"Re-read on SIGHUP\"; a bad file is refused and the running "
                   "settings stay.");
    sl_man_section(f, "OUTPUT",
                   "The first line on standard output names the addresses bound (port 0 "
                   "picks a free one):\n"
                   "\n"
                   "  listening grpc=HOST:PORT http=HOST:PORT\n"
                   "\n"
                   "(http=none when the status endpoint is off). The http address serves "
                   "/status (JSON), /metrics (Prometheus text) and /healthz. Logs go to "
                   "standard error. Under systemd (Type=notify) READY=1 is sent once the "
                   "daemon listens.");
    sl_man_section(f, "EXIT STATUS",
                   "0 after SIGTERM or SIGINT (a clean shutdown), --help or --version; 1 on a "
                   "runtime failure (an address that cannot be bound, say); 2 on a usage or "
                   "configuration error.");
    for (size_t i = 0; i < p->nsections; i++) {
        sl_man_section(f, p->sections[i].title, p->sections[i].text);
    }
    fputs(".SH SEE ALSO\n", f);
    sl_man_text(f, p->see_also, strlen(p->see_also));
    fputs(", ", f);
    text_line(f, SL_MAN_README);
    fflush(f);
    return ferror(f) ? -EIO : 0;
}

int sl_conf_man_main(const sl_conf_table_t *t, const sl_man_page_t *p, int argc, char **argv)
{
    if (!sl_man_requested(argc, argv)) {
        return 0;
    }
    return sl_conf_print_man(t, p, stdout) < 0 ? -EIO : 1;
}
