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

/* Table rows, one line each: T is the config struct and key both its field
 * and the option's name. Rows are neither required nor reloadable unless
 * their macro says so (the log level is reloadable in every daemon). */
#define SL_CONF_ROW(T, key, type, lo, hi, def, help, required, reloadable)                       \
    {#key, type, offsetof(T, key), lo, hi, def, help, required, reloadable}
#define SL_CONF_STR_ROW(T, key, def, help) SL_CONF_ROW(T, key, SL_CONF_STR, 0, 0, def, help, 0, 0)
#define SL_CONF_REQUIRED_STR_ROW(T, key, help)                                                   \
    SL_CONF_ROW(T, key, SL_CONF_STR, 0, 0, "", help, 1, 0)
#define SL_CONF_INT_ROW(T, key, lo, hi, def, help)                                               \
    SL_CONF_ROW(T, key, SL_CONF_INT, lo, hi, def, help, 0, 0)
#define SL_CONF_LOGLEVEL_ROW(T, key, def, help)                                                  \
    SL_CONF_ROW(T, key, SL_CONF_LOGLEVEL, 0, 0, def, help, 0, 1)

/* The transport-security rows every daemon has (docs/reference/config.md "Security"), in the
 * order --help lists them: T needs char[SL_CONF_STR_MAX] fields tls_cert,
 * tls_key, tls_ca, token_file and http_token_file. The help lines that
 * differ say what the key does for that daemon. */
#define SL_CONF_SECURITY_ROWS(T, cert_help, ca_help, token_help)                                 \
    SL_CONF_STR_ROW(T, tls_cert, "", cert_help),                                                 \
    SL_CONF_STR_ROW(T, tls_key, "", "PEM private key of tls_cert"),                              \
    SL_CONF_STR_ROW(T, tls_ca, "", ca_help),                                                     \
    SL_CONF_STR_ROW(T, token_file, "", token_help),                                              \
    SL_CONF_STR_ROW(T, http_token_file, "",                                                      \
                    "file holding the bearer token the status HTTP endpoint requires; set it "   \
                    "for any non-loopback http address")

/* Fills obj with every default. */
int sl_conf_defaults(const sl_conf_table_t *t, void *obj, char *err, size_t errlen);
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
