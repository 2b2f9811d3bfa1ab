/* conf: daemon configuration as one table (name, type, offset, bounds,
 * default, help). The same table fills defaults, parses the config file
 * ("key = value" lines, '#' comments), parses the command-line flags
 * ("--key VALUE" or "--key=VALUE"; '_' in a key is '-' on the command line),
 * and prints --help. Flags override the file; --config FILE is read first
 * wherever it appears. Errors name "FILE:LINE: key: why" or "--flag: why". */
#ifndef SL_CONF_H
#define SL_CONF_H

#include <stddef.h>
#include <stdio.h>

#define SL_CONF_STR_MAX 256

typedef enum {
    SL_CONF_STR = 0, /* char[SL_CONF_STR_MAX] at offset */
    SL_CONF_INT,     /* long long at offset, min..max */
    SL_CONF_BOOL,    /* int at offset: true/false/yes/no/1/0/on/off */
    SL_CONF_DOUBLE,  /* double at offset, min..max */
    SL_CONF_LOGLEVEL, /* int at offset: error|warning|notice|info|debug -> syslog level */
} sl_conf_type_e;

typedef struct sl_conf_opt_s {
    const char *name;  /* "worker_timeout_ms"; flag --worker-timeout-ms */
    sl_conf_type_e type;
    size_t offset;     /* offsetof(config struct, field) */
    double min, max;   /* bounds for INT and DOUBLE */
    const char *def;   /* default as text ("" for empty strings) */
    const char *help;  /* one line */
    int required;      /* must be set by file or flag */
    int reloadable;    /* may change on SIGHUP */
} sl_conf_opt_t;

typedef struct sl_conf_table_s {
    const char *progname;
    const char *summary; /* first line of --help */
    const char *version;
    const sl_conf_opt_t *opts;
    size_t nopts;
} sl_conf_table_t;

/* Fills obj with every default. */
int sl_conf_defaults(const sl_conf_table_t *t, void *obj, char *err, size_t errlen);
/* Sets one key from text; where is "FILE:LINE" or "--flag" for messages. */
int sl_conf_set(const sl_conf_table_t *t, void *obj, const char *name, const char *value,
                const char *where, char *err, size_t errlen);
/* Reads a config file. Unknown keys, bad values and lines without '=' are
 * errors naming FILE:LINE. Lines are bounded (4096 bytes). */
int sl_conf_load_file(const sl_conf_table_t *t, void *obj, const char *path, char *err,
                      size_t errlen);
/* Full command line: defaults, then --config FILE, then the other flags.
 * Returns 0 to run, 1 when --help or --version was printed (exit 0),
 * -EINVAL on an error (err says which flag/line; exit 2). ret_config_path
 * (may be NULL) receives the --config path for SIGHUP reloads. */
int sl_conf_parse_args(const sl_conf_table_t *t, void *obj, int argc, char **argv,
                       char *ret_config_path, size_t pathlen, char *err, size_t errlen);
/* --help text from the table: every flag, its default and help line. */
void sl_conf_print_help(const sl_conf_table_t *t, FILE *f);
/* The value's placeholder in --help: TEXT, N, BOOL, X or LEVEL. */
const char *sl_conf_type_hint(const sl_conf_opt_t *o);
/* Re-reads the file and applies only reloadable keys (SIGHUP). */
int sl_conf_reload(const sl_conf_table_t *t, void *obj, const char *path, char *err,
                   size_t errlen);

#endif
