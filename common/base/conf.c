/* conf: one table drives defaults, the config file, the flags and --help
 * (one row per option: nothing to keep in step). Library code: nothing here logs; errors go to the
 * caller's buffer and name "FILE:LINE: key: why" or "--flag: why". */
#include "common/base/conf.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include "common/base/err.h"
#include "common/base/log.h"

#define LINE_MAX_BYTES 4096
#define KEY_MAX 128

/* One parsed value, big enough for any option type: reload validates a
 * whole file into these before it applies anything. */
typedef union conf_value_u {
    char s[SL_CONF_STR_MAX];
    long long i;
    int b;
    double d;
} conf_value_t;

static const sl_conf_opt_t *find_opt(const sl_conf_table_t *t, const char *name)
{
    for (size_t i = 0; i < t->nopts; i++) {
        if (strcmp(t->opts[i].name, name) == 0) {
            return &t->opts[i];
        }
    }
    return NULL;
}

/* Flag spelling of a key: '_' becomes '-'. */
static void flag_name(const char *key, char *out, size_t outlen)
{
    size_t i = 0;
    for (; key[i] != '\0' && i + 1 < outlen; i++) {
        out[i] = key[i] == '_' ? '-' : key[i];
    }
    out[i] = '\0';
}

static int parse_bool(const char *v, int *ret)
{
    static const char *const yes[] = {"true", "yes", "1", "on"};
    static const char *const no[] = {"false", "no", "0", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *ret = 1;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *ret = 0;
            return 0;
        }
    }
    return -EINVAL;
}

/* Parses value for opt into dst (the field, or a conf_value_t). */
static int parse_value(const sl_conf_opt_t *o, const char *value, void *dst, const char *where,
                       char *err, size_t errlen)
{
    switch (o->type) {
    case SL_CONF_STR: {
        size_t n = strlen(value);
        if (n >= SL_CONF_STR_MAX) {
            return sl_err(err, errlen, -EINVAL, "%s: %s: longer than %d bytes", where, o->name,
                          SL_CONF_STR_MAX - 1);
        }
        memcpy(dst, value, n + 1);
        return 0;
    }
    case SL_CONF_INT: {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (value[0] == '\0' || end == value || *end != '\0' || errno != 0 ||
            (double)v < o->min || (double)v > o->max) {
            return sl_err(err, errlen, -EINVAL, "%s: %s: '%s' is not an integer in %.0f..%.0f",
                          where, o->name, value, o->min, o->max);
        }
        *(long long *)dst = v;
        return 0;
    }
    case SL_CONF_BOOL: {
        int b = 0;
        if (parse_bool(value, &b) != 0) {
            return sl_err(err, errlen, -EINVAL,
                          "%s: %s: '%s' is not a boolean (true/false/yes/no/on/off/1/0)", where,
                          o->name, value);
        }
        *(int *)dst = b;
        return 0;
    }
    case SL_CONF_DOUBLE: {
        char *end = NULL;
        errno = 0;
        double v = strtod(value, &end);
        if (value[0] == '\0' || end == value || *end != '\0' || errno != 0 || !isfinite(v) ||
            v < o->min || v > o->max) {
            return sl_err(err, errlen, -EINVAL, "%s: %s: '%s' is not a number in %g..%g", where,
                          o->name, value, o->min, o->max);
        }
        *(double *)dst = v;
        return 0;
    }
    case SL_CONF_LOGLEVEL: {
        int lvl = 0;
        if (sl_log_parse_level(value, &lvl) != 0) {
            return sl_err(err, errlen, -EINVAL,
                          "%s: %s: '%s' is not one of error, warning, notice, info, debug", where,
                          o->name, value);
        }
        *(int *)dst = lvl;
        return 0;
    }
    }
    return sl_err(err, errlen, -EINVAL, "%s: %s: option has an unknown type", where, o->name);
}

static size_t value_size(const sl_conf_opt_t *o)
{
    switch (o->type) {
    case SL_CONF_STR:
        return SL_CONF_STR_MAX;
    case SL_CONF_INT:
        return sizeof(long long);
    case SL_CONF_BOOL:
    case SL_CONF_LOGLEVEL:
        return sizeof(int);
    case SL_CONF_DOUBLE:
        return sizeof(double);
    }
    return 0;
}

int sl_conf_defaults(const sl_conf_table_t *t, void *obj, char *err, size_t errlen)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_conf_opt_t *o = &t->opts[i];
        char where[KEY_MAX + 16];
        snprintf(where, sizeof(where), "default of %s", o->name);
        int rc = parse_value(o, o->def != NULL ? o->def : "", (char *)obj + o->offset, where,
                             err, errlen);
        /* An empty default for a number means "no default": a required key. */
        if (rc != 0 && !(o->required && (o->def == NULL || o->def[0] == '\0'))) {
            return rc;
        }
    }
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) {
        s[--n] = '\0';
    }
    return s;
}

/* Splits one line into key and value in place. Returns 1 for a blank or
 * comment line, 0 with the key and value set, or an error code. A '#'
 * preceded by whitespace starts a comment unless it is inside double quotes;
 * a value in double quotes keeps its spaces and '#'. */
static int split_line(char *line, const char *where, char **ret_key, char **ret_val, char *err,
                      size_t errlen)
{
    char *s = trim(line);
    if (*s == '\0' || *s == '#') {
        return 1;
    }
    char *eq = strchr(s, '=');
    if (eq == NULL) {
        return sl_err(err, errlen, -EINVAL, "%s: expected 'key = value'", where);
    }
    *eq = '\0';
    char *key = trim(s);
    char *val = trim(eq + 1);
    if (*key == '\0') {
        return sl_err(err, errlen, -EINVAL, "%s: missing key before '='", where);
    }
    if (*val == '"') {
        char *close = strchr(val + 1, '"');
        if (close == NULL) {
            return sl_err(err, errlen, -EINVAL, "%s: %s: unterminated quote", where, key);
        }
        char *rest = trim(close + 1);
        if (*rest != '\0' && *rest != '#') {
            return sl_err(err, errlen, -EINVAL, "%s: %s: text after the closing quote", where,
                          key);
        }
        *close = '\0';
        val++;
    } else {
        for (char *p = val; *p != '\0'; p++) {
            if (*p == '#' && p > val && isspace((unsigned char)p[-1])) {
                *p = '\0';
                break;
            }
        }
        val = trim(val);
    }
    *ret_key = key;
    *ret_val = val;
    return 0;
}

/* Reads path line by line. For every key line calls visit(); stops at the
 * first error. */
typedef int (*visit_fn)(void *arg, const sl_conf_opt_t *o, const char *key, const char *val,
                        const char *where, char *err, size_t errlen);

static int walk_file(const sl_conf_table_t *t, const char *path, visit_fn visit, void *arg,
                     char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return sl_err(err, errlen, -errno, "%s: %s", path, strerror(errno));
    }
    int rc = 0;
    char line[LINE_MAX_BYTES + 1];
    unsigned lineno = 0;
    for (;;) {
        /* getc rather than fgets: a NUL byte or an overlong line is an error
         * naming the line, never a silent truncation. */
        size_t n = 0;
        int ch = 0;
        int bad_nul = 0;
        while ((ch = getc(f)) != EOF && ch != '\n') {
            if (ch == '\0') {
                bad_nul = 1;
            }
            if (n < LINE_MAX_BYTES) {
                line[n] = (char)ch;
            }
            n++;
        }
        if (ch == EOF && n == 0) {
            break;
        }
        lineno++;
        char where[SL_CONF_STR_MAX + 32];
        snprintf(where, sizeof(where), "%s:%u", path, lineno);
        if (n > LINE_MAX_BYTES) {
            rc = sl_err(err, errlen, -EINVAL, "%s: line longer than %d bytes", where,
                        LINE_MAX_BYTES);
            goto out;
        }
        if (bad_nul) {
            rc = sl_err(err, errlen, -EINVAL, "%s: NUL byte in line", where);
            goto out;
        }
        line[n] = '\0';
        char *key = NULL;
        char *val = NULL;
        rc = split_line(line, where, &key, &val, err, errlen);
        if (rc == 1) {
            rc = 0;
            continue;
        }
        if (rc != 0) {
            goto out;
        }
        const sl_conf_opt_t *o = find_opt(t, key);
        if (o == NULL) {
            rc = sl_err(err, errlen, -EINVAL, "%s: unknown key '%s'", where, key);
            goto out;
        }
        rc = visit(arg, o, key, val, where, err, errlen);
        if (rc != 0) {
            goto out;
        }
    }
    if (ferror(f)) {
        rc = sl_err(err, errlen, -EIO, "%s: read error", path);
    }
out:
    fclose(f);
    return rc;
}

typedef struct load_ctx_s {
    const sl_conf_table_t *t;
    void *obj;
    unsigned char *seen; /* may be NULL; one flag per option */
} load_ctx_t;

static int visit_load(void *arg, const sl_conf_opt_t *o, const char *key, const char *val,
                      const char *where, char *err, size_t errlen)
{
    load_ctx_t *c = arg;
    int rc = parse_value(o, val, (char *)c->obj + o->offset, where, err, errlen);
    if (rc == 0 && c->seen != NULL) {
        c->seen[o - c->t->opts] = 1;
    }
    return rc;
}

static int load_file(const sl_conf_table_t *t, void *obj, const char *path,
                     unsigned char *seen, char *err, size_t errlen)
{
    load_ctx_t c = {.t = t, .obj = obj, .seen = seen};
    return walk_file(t, path, visit_load, &c, err, errlen);
}

int sl_conf_load_file(const sl_conf_table_t *t, void *obj, const char *path, char *err,
                      size_t errlen)
{
    return load_file(t, obj, path, NULL, err, errlen);
}

typedef struct reload_ctx_s {
    const sl_conf_table_t *t;
    conf_value_t *vals; /* one per option */
    unsigned char *seen;
} reload_ctx_t;

static int visit_reload(void *arg, const sl_conf_opt_t *o, const char *key, const char *val,
                        const char *where, char *err, size_t errlen)
{
    reload_ctx_t *c = arg;
    size_t i = (size_t)(o - c->t->opts);
    int rc = parse_value(o, val, &c->vals[i], where, err, errlen);
    if (rc == 0) {
        c->seen[i] = 1;
    }
    return rc;
}

/* Validates the whole file first, so a bad edit changes nothing. Reloadable
 * keys present in the file take its values; absent ones keep theirs (the
 * flags that set them are not remembered). */
int sl_conf_reload(const sl_conf_table_t *t, void *obj, const char *path, char *err,
                   size_t errlen)
{
    if (t->nopts == 0) {
        return 0;
    }
    conf_value_t *vals = calloc(t->nopts, sizeof(*vals));
    unsigned char *seen = calloc(t->nopts, 1);
    int rc = -ENOMEM;
    if (vals == NULL || seen == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "%s: out of memory", path);
        goto out;
    }
    reload_ctx_t c = {.t = t, .vals = vals, .seen = seen};
    rc = walk_file(t, path, visit_reload, &c, err, errlen);
    if (rc != 0) {
        goto out;
    }
    for (size_t i = 0; i < t->nopts; i++) {
        if (seen[i] && t->opts[i].reloadable) {
            memcpy((char *)obj + t->opts[i].offset, &vals[i], value_size(&t->opts[i]));
        }
    }
out:
    free(vals);
    free(seen);
    return rc;
}

const char *sl_conf_type_hint(const sl_conf_opt_t *o)
{
    switch (o->type) {
    case SL_CONF_STR:
        return "TEXT";
    case SL_CONF_INT:
        return "N";
    case SL_CONF_BOOL:
        return "BOOL";
    case SL_CONF_DOUBLE:
        return "X";
    case SL_CONF_LOGLEVEL:
        return "LEVEL";
    }
    return "?";
}

void sl_conf_print_help(const sl_conf_table_t *t, FILE *f)
{
    fprintf(f, "%s - %s\n\n", t->progname, t->summary != NULL ? t->summary : "");
    fprintf(f, "usage: %s [--config FILE] [--KEY VALUE]...\n\n", t->progname);
    fprintf(f, "  %-30s %s\n", "--config FILE",
            "read 'key = value' lines first (flags override them)");
    fprintf(f, "  %-30s %s\n", "--help", "print this text and exit");
    fprintf(f, "  %-30s %s\n", "--version", "print the version and exit");
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_conf_opt_t *o = &t->opts[i];
        char flag[KEY_MAX];
        char left[KEY_MAX + 16];
        flag_name(o->name, flag, sizeof(flag));
        snprintf(left, sizeof(left), "--%s %s", flag, sl_conf_type_hint(o));
        fprintf(f, "  %-30s %s", left, o->help != NULL ? o->help : "");
        char range[96] = "";
        if (o->type == SL_CONF_INT) {
            snprintf(range, sizeof(range), "%.0f..%.0f; ", o->min, o->max);
        } else if (o->type == SL_CONF_DOUBLE) {
            snprintf(range, sizeof(range), "%g..%g; ", o->min, o->max);
        }
        if (o->required) {
            fprintf(f, " (%srequired)", range);
        } else {
            fprintf(f, " (%sdefault '%s')", range, o->def != NULL ? o->def : "");
        }
        fprintf(f, "%s\n", o->reloadable ? " [SIGHUP]" : "");
    }
}

/* Maps "--some-flag" (without the dashes, up to '=') to an option. */
static const sl_conf_opt_t *find_flag(const sl_conf_table_t *t, const char *flag, size_t len)
{
    for (size_t i = 0; i < t->nopts; i++) {
        char f[KEY_MAX];
        flag_name(t->opts[i].name, f, sizeof(f));
        if (strlen(f) == len && strncmp(f, flag, len) == 0) {
            return &t->opts[i];
        }
    }
    return NULL;
}

static int is_config_flag(const char *a) { return strcmp(a, "--config") == 0; }

/* Pass 1 over argv: --help/--version win over everything (returns 1 after
 * printing); the last --config FILE wherever it appears goes to *ret_config. */
static int scan_early_flags(const sl_conf_table_t *t, int argc, char **argv,
                            const char **ret_config, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sl_conf_print_help(t, stdout);
            return 1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("%s %s\n", t->progname, t->version != NULL ? t->version : "");
            return 1;
        }
        if (is_config_flag(a)) {
            if (i + 1 >= argc) {
                return sl_err(err, errlen, -EINVAL, "--config: missing value");
            }
            *ret_config = argv[++i];
        } else if (strncmp(a, "--config=", 9) == 0) {
            *ret_config = a + 9;
        }
    }
    return 0;
}

/* Reads --config FILE (if any) before the other flags, so flags override it. */
static int load_config_flag(const sl_conf_table_t *t, void *obj, const char *config,
                            unsigned char *seen, char *ret_config_path, size_t pathlen,
                            char *err, size_t errlen)
{
    if (config == NULL) {
        if (ret_config_path != NULL && pathlen > 0) {
            ret_config_path[0] = '\0';
        }
        return 0;
    }
    if (config[0] == '\0') {
        return sl_err(err, errlen, -EINVAL, "--config: empty path");
    }
    if (load_file(t, obj, config, seen, err, errlen) != 0) {
        return -EINVAL;
    }
    if (ret_config_path != NULL && pathlen > 0) {
        if (strlen(config) >= pathlen) {
            return sl_err(err, errlen, -EINVAL, "--config: path too long");
        }
        snprintf(ret_config_path, pathlen, "%s", config);
    }
    return 0;
}

/* One "--key VALUE" or "--key=VALUE" at argv[*i]; advances *i past a
 * separate value. */
static int apply_flag(const sl_conf_table_t *t, void *obj, int argc, char **argv, int *i,
                      unsigned char *seen, char *err, size_t errlen)
{
    const char *a = argv[*i];
    if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
        return sl_err(err, errlen, -EINVAL, "'%s': unexpected argument (see --help)", a);
    }
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t nlen = eq != NULL ? (size_t)(eq - name) : strlen(name);
    const sl_conf_opt_t *o = find_flag(t, name, nlen);
    if (o == NULL) {
        return sl_err(err, errlen, -EINVAL, "--%.*s: unknown flag (see --help)", (int)nlen,
                      name);
    }
    char where[KEY_MAX + 4];
    snprintf(where, sizeof(where), "--%.*s", (int)nlen, name);
    const char *val = NULL;
    if (eq != NULL) {
        val = eq + 1;
    } else if (o->type == SL_CONF_BOOL) {
        /* A bare boolean flag means true; "--flag no" also works. */
        int b = 0;
        if (*i + 1 < argc && parse_bool(argv[*i + 1], &b) == 0) {
            val = argv[++*i];
        } else {
            val = "true";
        }
    } else {
        if (*i + 1 >= argc) {
            return sl_err(err, errlen, -EINVAL, "%s: missing value", where);
        }
        val = argv[++*i];
    }
    if (parse_value(o, val, (char *)obj + o->offset, where, err, errlen) != 0) {
        return -EINVAL;
    }
    seen[o - t->opts] = 1;
    return 0;
}

/* Pass 2: every flag but --config, in order, so the last one wins. */
static int apply_flags(const sl_conf_table_t *t, void *obj, int argc, char **argv,
                       unsigned char *seen, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_config_flag(a)) {
            i++;
            continue;
        }
        if (strncmp(a, "--config=", 9) == 0) {
            continue;
        }
        int rc = apply_flag(t, obj, argc, argv, &i, seen, err, errlen);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static int check_required(const sl_conf_table_t *t, const unsigned char *seen, char *err,
                          size_t errlen)
{
    for (size_t i = 0; i < t->nopts; i++) {
        if (t->opts[i].required && !seen[i]) {
            char f[KEY_MAX];
            flag_name(t->opts[i].name, f, sizeof(f));
            return sl_err(err, errlen, -EINVAL, "--%s: required (or '%s' in the config file)",
                          f, t->opts[i].name);
        }
    }
    return 0;
}

int sl_conf_parse_args(const sl_conf_table_t *t, void *obj, int argc, char **argv,
                       char *ret_config_path, size_t pathlen, char *err, size_t errlen)
{
    unsigned char *seen = calloc(t->nopts > 0 ? t->nopts : 1, 1);
    if (seen == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    const char *config = NULL;
    int rc = sl_conf_defaults(t, obj, err, errlen);
    if (rc == 0) {
        rc = scan_early_flags(t, argc, argv, &config, err, errlen);
    }
    if (rc == 0) {
        rc = load_config_flag(t, obj, config, seen, ret_config_path, pathlen, err, errlen);
    }
    if (rc == 0) {
        rc = apply_flags(t, obj, argc, argv, seen, err, errlen);
    }
    if (rc == 0) {
        rc = check_required(t, seen, err, errlen);
    }
    free(seen);
    return rc;
}
