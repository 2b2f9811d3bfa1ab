/* conf_man: manual pages (man(7) roff) written from the tables the programs
 * parse their flags with, so a page can neither miss a flag nor show a stale
 * default. Each program prints its page on the hidden flag --help-man; `make`
 * keeps the output in build/man/NAME.1 and `make install` installs it.
 *
 * Only the formatting lives here; each program supplies its prose as plain
 * text (sl_man_page_t). Text is escaped for roff: backslashes, a leading '.'
 * or '\'', and "--flag" words (written \-\- so they copy and search as
 * ASCII). Pages are ASCII; anything else would render differently per
 * locale. Writers return 0 or -EIO (the stream's error). */
#ifndef SL_CONF_MAN_H
#define SL_CONF_MAN_H

#include <stdio.h>

#include "common/base/conf.h"

/* The hidden flag; argv must be exactly {prog, SL_MAN_FLAG}. */
#define SL_MAN_FLAG "--help-man"
/* Every page's last reference; `make install` rewrites the prefix. */
#define SL_MAN_README "/usr/local/share/doc/sluice/README.md"

typedef struct sl_man_section_s {
    const char *title; /* "FILES"; upper case by convention */
    const char *text;  /* paragraphs split by blank lines; see sl_man_paragraphs */
} sl_man_section_t;

/* A daemon's page: the parts its config table does not hold. */
typedef struct sl_man_page_s {
    const char *description; /* DESCRIPTION, before OPTIONS */
    const sl_man_section_t *sections; /* after EXIT STATUS */
    size_t nsections;
    const char *see_also;    /* "sluice(1), sluice-worker(1)"; the README follows */
} sl_man_page_t;

/* 1 when argv asks for the manual page (exactly SL_MAN_FLAG). */
int sl_man_requested(int argc, char **argv);
/* A daemon's hook, before it parses its flags: when argv asks for the page,
 * prints it (sl_conf_print_man) and returns 1 (-EIO when stdout fails);
 * else 0. */
int sl_conf_man_main(const sl_conf_table_t *t, const sl_man_page_t *p, int argc, char **argv);

/* .TH, NAME ("name \- summary") and the no-hyphenation setting. */
void sl_man_head(FILE *f, const char *name, const char *version, const char *summary);
/* One line of text, escaped (no newline added). */
void sl_man_text(FILE *f, const char *s, size_t len);
/* Paragraphs: blank lines separate them (.PP); a line starting with two
 * spaces is kept as it stands (.nf/.fi), for examples. */
void sl_man_paragraphs(FILE *f, const char *text);
/* A tagged paragraph: .TP, the tag in bold up to its first space and the
 * rest in italics ("--listen HOST:PORT"), then the text. */
void sl_man_tagged(FILE *f, const char *tag, const char *text);
/* .SH title, then sl_man_paragraphs. */
void sl_man_section(FILE *f, const char *title, const char *text);

/* A daemon's whole page from its config table: SYNOPSIS, DESCRIPTION,
 * OPTIONS (--config, --help, --version, then every row: help, default,
 * bounds, required, SIGHUP), CONFIGURATION FILE, OUTPUT (the listening
 * line every daemon prints), EXIT STATUS, the page's sections, SEE ALSO.
 * 0 or -EIO. */
int sl_conf_print_man(const sl_conf_table_t *t, const sl_man_page_t *p, FILE *f);

#endif
