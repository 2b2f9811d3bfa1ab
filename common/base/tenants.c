/* tenants: see tenants.h. */
#include "common/base/tenants.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/file.h"

#define TENANTS_FILE_MAX (256 * 1024)

int sl_tenant_name_ok(const char *s)
{
    size_t n = s != NULL ? strnlen(s, SL_TENANT_NAME_MAX) : 0;
    if (n == 0 || n >= SL_TENANT_NAME_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

const sl_tenant_t *sl_tenants_find(const sl_tenants_t *ts, const char *name)
{
    for (size_t i = 0; ts != NULL && i < ts->n; i++) {
        if (strcmp(ts->t[i].name, name) == 0) {
            return &ts->t[i];
        }
    }
    return NULL;
}

static int token_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < SL_TENANT_TOKEN_MIN || n >= SL_SECRET_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] <= ' ' || s[i] > '~') {
            return 0;
        }
    }
    return 1;
}

/* "key=N" with N in [0, max]. */
static int limit(const char *word, const char *key, uint64_t max, uint64_t *ret)
{
    size_t k = strlen(key);
    if (strncmp(word, key, k) != 0 || word[k] != '=') {
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(word + k + 1, &end, 10);
    if (errno != 0 || end == word + k + 1 || *end != '\0' || v > max) {
        return -EINVAL;
    }
    *ret = v;
    return 1;
}

/* One non-comment line into t. */
static int parse_line(char *line, sl_tenant_t *t, char *why, size_t whylen)
{
    char *save = NULL;
    char *name = strtok_r(line, " \t", &save);
    char *token = strtok_r(NULL, " \t", &save);
    if (name == NULL || token == NULL) {
        return sl_err(why, whylen, -EINVAL,
                      "expected NAME TOKEN [max_jobs=N] [max_buffered_mb=N]");
    }
    if (!sl_tenant_name_ok(name)) {
        return sl_err(why, whylen, -EINVAL, "name: 1..%d of [A-Za-z0-9_.-]",
                      SL_TENANT_NAME_MAX - 1);
    }
    if (!token_ok(token)) {
        return sl_err(why, whylen, -EINVAL, "tenant \"%s\": token must be %d..%d printable bytes",
                      name, SL_TENANT_TOKEN_MIN, SL_SECRET_MAX - 1);
    }
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    snprintf(t->token, sizeof(t->token), "%s", token);
    for (char *w = strtok_r(NULL, " \t", &save); w != NULL; w = strtok_r(NULL, " \t", &save)) {
        uint64_t v = 0;
        int a = limit(w, "max_jobs", 4096, &v);
        if (a == 1) {
            t->max_jobs = (uint32_t)v;
            continue;
        }
        int b = a == 0 ? limit(w, "max_buffered_mb", 1u << 20, &v) : a;
        if (b == 1) {
            t->max_buffered_bytes = v << 20;
            continue;
        }
        return sl_err(why, whylen, -EINVAL,
                      "tenant \"%s\": unknown or out-of-range \"%.40s\" (max_jobs=0..4096, "
                      "max_buffered_mb=0..1048576)",
                      name, w);
    }
    return 0;
}

int sl_tenants_parse(const char *fname, const char *text, sl_tenants_t *out, char *err,
                     size_t errlen)
{
    sl_tenants_t *ts = calloc(1, sizeof(*ts));
    char *copy = strdup(text);
    int rc = 0;
    if (ts == NULL || copy == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    unsigned lineno = 0;
    /* strtok_r would merge empty lines and lose their numbers: split by hand. */
    for (char *line = copy, *next; line != NULL && rc == 0; line = next) {
        lineno++;
        next = strchr(line, '\n');
        if (next != NULL) {
            *next++ = '\0';
        }
        char *hash = strchr(line, '#');
        if (hash != NULL) {
            *hash = '\0';
        }
        if (strspn(line, " \t\r") == strlen(line)) {
            continue;
        }
        line[strcspn(line, "\r")] = '\0';
        char why[256];
        if (ts->n == SL_TENANTS_MAX) {
            rc = sl_err(err, errlen, -E2BIG, "%s:%u: more than %d tenants", fname, lineno,
                        SL_TENANTS_MAX);
            break;
        }
        sl_tenant_t *t = &ts->t[ts->n];
        if (parse_line(line, t, why, sizeof(why)) != 0) {
            rc = sl_err(err, errlen, -EINVAL, "%s:%u: %s", fname, lineno, why);
            break;
        }
        for (size_t i = 0; i < ts->n; i++) {
            if (strcmp(ts->t[i].name, t->name) == 0 || strcmp(ts->t[i].token, t->token) == 0) {
                rc = sl_err(err, errlen, -EINVAL,
                            "%s:%u: tenant \"%s\": name or token already used by \"%s\"", fname,
                            lineno, t->name, ts->t[i].name);
                break;
            }
        }
        if (rc == 0) {
            ts->n++;
        }
    }
    if (rc == 0) {
        *out = *ts;
    }
out:
    if (ts != NULL) {
        memset(ts, 0, sizeof(*ts)); /* tokens */
    }
    free(ts);
    free(copy);
    return rc;
}

int sl_tenants_load(const char *path, sl_tenants_t *out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t n = 0;
    char why[400];
    int rc = sl_file_read(path, TENANTS_FILE_MAX, &text, &n, why, sizeof(why));
    if (rc < 0) {
        return sl_err(err, errlen, rc, "tenants file %s", why);
    }
    if (strlen(text) != n) {
        free(text);
        return sl_err(err, errlen, -EINVAL, "tenants file \"%s\": contains a NUL byte", path);
    }
    rc = sl_tenants_parse(path, text, out, err, errlen);
    free(text);
    return rc;
}
