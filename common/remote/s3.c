/* s3: endpoint, region, credentials and SigV4-signed requests for s3://
 * URLs (s3.h). */
#include "common/remote/s3.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/err.h"
#include "common/remote/sigv4.h"

static const char *env_or(sl_s3_getenv_fn env, const char *a, const char *b)
{
    const char *v = env(a);
    if ((v == NULL || v[0] == '\0') && b != NULL) {
        v = env(b);
    }
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static void copy(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src != NULL ? src : "");
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

/* Reads key id, secret and token of profile from an ini-style file; a
 * missing file is no credentials, not an error. */
static void load_file(sl_s3_conf_t *c, const char *path, const char *profile)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return;
    }
    char line[4608];
    bool in = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *s = trim(line);
        if (s[0] == '[') {
            char *end = strchr(s, ']');
            if (end != NULL) {
                *end = '\0';
                in = strcmp(trim(s + 1), profile) == 0;
            }
            continue;
        }
        char *eq = strchr(s, '=');
        if (!in || eq == NULL || s[0] == '#' || s[0] == ';') {
            continue;
        }
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        if (strcmp(k, "aws_access_key_id") == 0) {
            copy(c->key_id, sizeof(c->key_id), v);
        } else if (strcmp(k, "aws_secret_access_key") == 0) {
            copy(c->secret, sizeof(c->secret), v);
        } else if (strcmp(k, "aws_session_token") == 0) {
            copy(c->token, sizeof(c->token), v);
        }
    }
    memset(line, 0, sizeof(line));
    fclose(f);
}

static int load_endpoint(sl_s3_conf_t *c, sl_s3_getenv_fn env, char *err, size_t errlen)
{
    const char *ep = env_or(env, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
    if (ep == NULL) {
        snprintf(c->endpoint, sizeof(c->endpoint), "https://s3.%s.amazonaws.com", c->region);
        c->path_style = false;
        return 0;
    }
    sl_url_t u;
    char why[200];
    if (sl_url_parse(ep, &u, why, sizeof(why)) < 0 || u.scheme == SL_URL_S3 ||
        strcmp(u.path, "/") != 0) {
        return sl_err(err, errlen, -EINVAL,
                      "AWS_ENDPOINT_URL: '%s' is not an http(s)://host[:port] URL", ep);
    }
    u.path[0] = '\0';
    if (sl_url_format(&u, c->endpoint, sizeof(c->endpoint)) < 0) {
        return sl_err(err, errlen, -EINVAL, "AWS_ENDPOINT_URL: too long");
    }
    c->path_style = true;
    return 0;
}

int sl_s3_conf_load(sl_s3_conf_t *c, sl_s3_getenv_fn env, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    copy(c->region, sizeof(c->region), env_or(env, "AWS_REGION", "AWS_DEFAULT_REGION"));
    if (c->region[0] == '\0') {
        copy(c->region, sizeof(c->region), "us-east-1");
    }
    int rc = load_endpoint(c, env, err, errlen);
    if (rc < 0) {
        return rc;
    }
    const char *style = env_or(env, "SLUICE_S3_ADDRESSING_STYLE", NULL);
    if (style != NULL) {
        if (strcmp(style, "path") != 0 && strcmp(style, "virtual") != 0) {
            return sl_err(err, errlen, -EINVAL,
                          "SLUICE_S3_ADDRESSING_STYLE: '%s' is not path or virtual", style);
        }
        c->path_style = strcmp(style, "path") == 0;
    }
    const char *id = env_or(env, "AWS_ACCESS_KEY_ID", NULL);
    const char *secret = env_or(env, "AWS_SECRET_ACCESS_KEY", NULL);
    if (id != NULL && secret != NULL) {
        copy(c->key_id, sizeof(c->key_id), id);
        copy(c->secret, sizeof(c->secret), secret);
        copy(c->token, sizeof(c->token), env_or(env, "AWS_SESSION_TOKEN", NULL));
    } else {
        char path[4096];
        const char *file = env_or(env, "AWS_SHARED_CREDENTIALS_FILE", NULL);
        const char *home = env_or(env, "HOME", NULL);
        if (file == NULL && home != NULL) {
            snprintf(path, sizeof(path), "%s/.aws/credentials", home);
            file = path;
        }
        const char *profile = env_or(env, "AWS_PROFILE", NULL);
        if (file != NULL) {
            load_file(c, file, profile != NULL ? profile : "default");
        }
    }
    c->have_creds = c->key_id[0] != '\0' && c->secret[0] != '\0';
    return 0;
}

/* Appends one "Name: value" line to the header buffer. */
static int add_hdr(char *buf, size_t buflen, size_t *off, const char **hdrs, size_t *n,
                   const char *name, const char *value)
{
    int w = snprintf(buf + *off, buflen - *off, "%s: %s", name, value);
    if (w < 0 || (size_t)w >= buflen - *off || *n >= SL_S3_MAX_HDRS) {
        return -ENAMETOOLONG;
    }
    hdrs[(*n)++] = buf + *off;
    hdrs[*n] = NULL;
    *off += (size_t)w + 1;
    return 0;
}

int sl_s3_request(const sl_s3_conf_t *c, const sl_url_t *u, const char *method, long now,
                  const char *if_match, const char *query, char *url, size_t urllen, char *hdr_buf,
                  size_t hdr_buflen, const char *hdrs[SL_S3_MAX_HDRS + 1])
{
    if (query == NULL) {
        query = "";
    }
    char key[SL_URL_MAX * 3], path[SL_URL_MAX * 3 + 300], host[600];
    if (sl_url_encode_path(u->path, key, sizeof(key)) < 0) {
        return -ENAMETOOLONG;
    }
    const char *after = strstr(c->endpoint, "://");
    if (after == NULL) {
        return -EINVAL;
    }
    size_t scheme_len = (size_t)(after - c->endpoint);
    int n;
    if (c->path_style) {
        snprintf(host, sizeof(host), "%s", after + 3);
        n = snprintf(path, sizeof(path), "/%s%s", u->host, key);
    } else {
        snprintf(host, sizeof(host), "%s.%s", u->host, after + 3);
        n = snprintf(path, sizeof(path), "%s", key);
    }
    if (n < 0 || (size_t)n >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    n = snprintf(url, urllen, "%.*s://%s%s%s%s", (int)scheme_len, c->endpoint, host, path,
                 query[0] != '\0' ? "?" : "", query);
    if (n < 0 || (size_t)n >= urllen) {
        return -ENAMETOOLONG;
    }
    char date[20];
    time_t t = (time_t)now;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
    size_t off = 0, nh = 0;
    hdrs[0] = NULL;
    sl_sigv4_hdr_t sh[6];
    size_t ns = 0;
    sh[ns++] = (sl_sigv4_hdr_t){"host", host};
    sh[ns++] = (sl_sigv4_hdr_t){"x-amz-content-sha256", SL_SIGV4_EMPTY_SHA256};
    sh[ns++] = (sl_sigv4_hdr_t){"x-amz-date", date};
    if (c->have_creds && c->token[0] != '\0') {
        sh[ns++] = (sl_sigv4_hdr_t){"x-amz-security-token", c->token};
    }
    if (if_match != NULL && if_match[0] != '\0') {
        sh[ns++] = (sl_sigv4_hdr_t){"if-match", if_match};
    }
    /* host goes on the wire from the URL (curl sets it); the rest here. */
    for (size_t i = 1; i < ns; i++) {
        if (add_hdr(hdr_buf, hdr_buflen, &off, hdrs, &nh, sh[i].name, sh[i].value) < 0) {
            return -ENAMETOOLONG;
        }
    }
    if (!c->have_creds) {
        return 0;
    }
    char auth[1024];
    sl_sigv4_req_t r = {.access_key = c->key_id,
                        .secret_key = c->secret,
                        .region = c->region,
                        .service = "s3",
                        .amz_date = date,
                        .method = method,
                        .path = path,
                        .query = query,
                        .hdrs = sh,
                        .nhdrs = ns,
                        .payload_sha256 = SL_SIGV4_EMPTY_SHA256};
    int rc = sl_sigv4_authorization(&r, auth, sizeof(auth));
    if (rc < 0) {
        return rc;
    }
    return add_hdr(hdr_buf, hdr_buflen, &off, hdrs, &nh, "Authorization", auth);
}
