/* plugin_reg: the registry of one plugin_dir (common/plugin/plugin.h). */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/base/file.h"
#include "common/base/sha256.h"
#include "common/plugin/plugin.h"
#include "common/plugin/plugin_wire.h"
#include "common/plugin/sluice_plugin.h"

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= SL_PLUGIN_NAME_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) {
            return 0;
        }
    }
    return 1;
}

static void refuse(sl_plugins_t *p, const char *file, const char *why)
{
    size_t n = strlen(p->refused);
    snprintf(p->refused + n, sizeof(p->refused) - n, "%s%s: %s", n > 0 ? "; " : "", file, why);
}

/* A host lists the file's stages; each becomes an entry. */
static void list_file(sl_plugins_t *p, const char *file, const char *sha)
{
    char path[1400], err[512];
    snprintf(path, sizeof(path), "%s/%s", p->dir, file);
    pid_t pid;
    int to = -1, from = -1;
    int rc = sl_pw_spawn(p->host, path, &pid, &to, &from);
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    uint32_t type = SL_PW_ERR;
    if (rc < 0) {
        snprintf(err, sizeof(err), "cannot start %.300s: %s", p->host, strerror(-rc));
        refuse(p, file, err);
        return;
    }
    rc = sl_pw_write(to, SL_PW_LIST, NULL, 0, NULL, 0);
    if (rc == 0) {
        rc = sl_pw_read(from, p->timeout_ms, &type, &buf, &cap, &len);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    close(to);
    close(from);
    if (rc < 0) {
        refuse(p, file, "its host crashed or did not answer while loading it");
        free(buf);
        return;
    }
    if (type != SL_PW_OK) {
        refuse(p, file, (const char *)buf);
        free(buf);
        return;
    }
    json_t *a = json_loads((const char *)buf, 0, NULL);
    free(buf);
    size_t i;
    json_t *s;
    json_array_foreach(a, i, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        const char *ver = json_string_value(json_object_get(s, "version"));
        const char *reads = json_string_value(json_object_get(s, "reads"));
        const char *writes = json_string_value(json_object_get(s, "writes"));
        json_int_t abi = json_integer_value(json_object_get(s, "abi"));
        if (name == NULL || !name_ok(name) || abi != SLUICE_PLUGIN_ABI || reads == NULL ||
            strcmp(reads, "image") != 0 || writes == NULL || strcmp(writes, "image") != 0) {
            snprintf(err, sizeof(err),
                     "stage %zu: needs a name of [a-z0-9_], ABI %d, reads and writes \"image\"",
                     i, SLUICE_PLUGIN_ABI);
            refuse(p, file, err);
            continue;
        }
        if (p->n == SL_PLUGIN_MAX || sl_plugins_find(p, name, NULL) != NULL) {
            refuse(p, file, p->n == SL_PLUGIN_MAX ? "more than 64 stages in the directory"
                                                  : "a stage of that name is in another file");
            continue;
        }
        sl_plugin_info_t *pi = &p->v[p->n++];
        memset(pi, 0, sizeof(*pi));
        snprintf(pi->name, sizeof(pi->name), "%s", name);
        snprintf(pi->version, sizeof(pi->version), "%s", ver != NULL ? ver : "");
        snprintf(pi->sha256, sizeof(pi->sha256), "%s", sha);
        snprintf(pi->file, sizeof(pi->file), "%s", file);
        pi->stage = (uint32_t)i;
        pi->cost_hint = json_number_value(json_object_get(s, "cost_hint"));
    }
    if (a == NULL) {
        refuse(p, file, "a broken stage list");
    }
    json_decref(a);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sl_plugins_scan(const char *dir, const char *host, int timeout_ms, sl_plugins_t **ret,
                    char *err, size_t errlen)
{
    sl_plugins_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    snprintf(p->dir, sizeof(p->dir), "%s", dir);
    if (host != NULL) {
        snprintf(p->host, sizeof(p->host), "%s", host);
    } else if (sl_plugin_host_find(p->host, sizeof(p->host), p->host_err, sizeof(p->host_err)) <
               0) {
        /* Without it no file can be listed: one reason, not one per file. */
        snprintf(p->refused, sizeof(p->refused), "every file: %.1000s", p->host_err);
    }
    p->timeout_ms = timeout_ms > 0 ? timeout_ms : SL_PLUGIN_TIMEOUT_MS;
    DIR *d = opendir(dir);
    if (d == NULL) {
        int e = errno;
        free(p);
        return sl_err(err, errlen, -e, "plugin_dir %s: %s", dir, strerror(e));
    }
    char *names[SL_PLUGIN_MAX * 2];
    size_t n = 0;
    struct dirent *de;
    while (p->host_err[0] == '\0' && (de = readdir(d)) != NULL && n < SL_PLUGIN_MAX * 2) {
        size_t l = strlen(de->d_name);
        if (l > 3 && l < sizeof(p->v[0].file) && strcmp(de->d_name + l - 3, ".so") == 0 &&
            (names[n] = strdup(de->d_name)) != NULL) {
            n++;
        }
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), by_name);
    for (size_t i = 0; i < n; i++) {
        char path[1400], msg[256];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        char *bytes = NULL;
        size_t len = 0;
        if (sl_file_read(path, SL_PLUGIN_FILE_MAX, &bytes, &len, msg, sizeof(msg)) < 0) {
            refuse(p, names[i], msg);
        } else {
            char sha[65];
            sl_sha256_hex(bytes, len, sha);
            free(bytes);
            list_file(p, names[i], sha);
        }
        free(names[i]);
    }
    *ret = p;
    return 0;
}

void sl_plugins_free(sl_plugins_t *p) { free(p); }

int sl_plugins_scan_client(const char *dir, sl_plugins_t **ret, char *err, size_t errlen)
{
    *ret = NULL;
    if (dir == NULL) {
        dir = getenv("SLUICE_PLUGIN_DIR");
    }
    if (dir == NULL || dir[0] == '\0') {
        return 0;
    }
    const char *t = getenv("SLUICE_PLUGIN_TIMEOUT_MS");
    long ms = t != NULL ? strtol(t, NULL, 10) : 0;
    return sl_plugins_scan(dir, NULL, ms > 0 && ms <= 600000 ? (int)ms : 0, ret, err, errlen);
}

const sl_plugin_info_t *sl_plugins_find(const sl_plugins_t *p, const char *name,
                                        const char *sha256)
{
    for (size_t i = 0; p != NULL && i < p->n; i++) {
        if (strcmp(p->v[i].name, name) == 0 &&
            (sha256 == NULL || strcmp(p->v[i].sha256, sha256) == 0)) {
            return &p->v[i];
        }
    }
    return NULL;
}

void sl_plugins_why_missing(const sl_plugins_t *p, const char *name, char *out, size_t len)
{
    if (p == NULL) {
        snprintf(out, len, "no plugin_dir is configured here");
        return;
    }
    const sl_plugin_info_t *pi = sl_plugins_find(p, name, NULL);
    if (pi == NULL && p->host_err[0] != '\0') {
        snprintf(out, len, "the plugins of %s could not be listed: %s", p->dir, p->host_err);
    } else if (pi == NULL) {
        /* A file there that did not load may be the one meant. */
        snprintf(out, len, "not in %s%s%s%s", p->dir,
                 p->refused[0] != '\0' ? " (not used there: " : "", p->refused,
                 p->refused[0] != '\0' ? ")" : "");
    } else {
        snprintf(out, len, "%s has %s %s with sha256 %.16s... (another build)", p->dir, pi->name,
                 pi->version, pi->sha256);
    }
}
