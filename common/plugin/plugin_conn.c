/* plugin_conn: one sluice-plugin-host process per (stage, thread)
 * (common/plugin/plugin.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/plugin/plugin.h"
#include "common/plugin/plugin_wire.h"

struct sl_plugin_conn_s {
    const sl_plugins_t *reg;
    const sl_plugin_info_t *pi;
    char *params;
    pid_t pid; /* 0: none running */
    int to, from;
    uint32_t handle;
    uint8_t *buf;
    size_t cap;
};

static void stop(sl_plugin_conn_t *c)
{
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    if (c->to >= 0) {
        close(c->to);
    }
    if (c->from >= 0) {
        close(c->from);
    }
    c->pid = 0;
    c->to = c->from = -1;
}

/* How the host ended, for the error: "crashed (signal 11)", ... */
static void host_end(sl_plugin_conn_t *c, int rc, char *err, size_t errlen)
{
    int status = 0;
    pid_t pid = c->pid;
    if (rc == -ETIMEDOUT) {
        stop(c);
        sl_err(err, errlen, -ECHILD, "plugin %s: no answer within %d ms (killed)", c->pi->name,
               c->reg->timeout_ms);
        return;
    }
    kill(pid, SIGKILL); /* a broken frame: it is of no more use either */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    c->pid = 0;
    stop(c);
    if (WIFSIGNALED(status)) {
        sl_err(err, errlen, -ECHILD, "plugin %s crashed (signal %d)", c->pi->name,
               WTERMSIG(status));
    } else {
        sl_err(err, errlen, -ECHILD, "plugin %s: its host ended (exit %d)", c->pi->name,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

static int call(sl_plugin_conn_t *c, uint32_t type, const void *a, size_t alen, const void *b,
                size_t blen, size_t *ret_len, char *err, size_t errlen)
{
    uint32_t rtype;
    int rc = sl_pw_write(c->to, type, a, alen, b, blen);
    if (rc == 0) {
        rc = sl_pw_read(c->from, c->reg->timeout_ms, &rtype, &c->buf, &c->cap, ret_len);
    }
    if (rc < 0) {
        host_end(c, rc, err, errlen);
        return -ECHILD;
    }
    if (rtype != SL_PW_OK) {
        return sl_err(err, errlen, -EBADMSG, "plugin %s: %s", c->pi->name, (char *)c->buf);
    }
    return 0;
}

/* Starts the host and creates the stage's state in it. */
static int start(sl_plugin_conn_t *c, char *err, size_t errlen)
{
    char path[1400];
    snprintf(path, sizeof(path), "%s/%s", c->reg->dir, c->pi->file);
    int rc = sl_pw_spawn(c->reg->host, path, &c->pid, &c->to, &c->from);
    if (rc < 0) {
        c->pid = 0;
        return sl_err(err, errlen, rc, "plugin %s: cannot start %s: %s", c->pi->name,
                      c->reg->host, strerror(-rc));
    }
    uint32_t stage = c->pi->stage;
    size_t len;
    rc = call(c, SL_PW_CREATE, &stage, 4, c->params, strlen(c->params), &len, err, errlen);
    if (rc == -EBADMSG) {
        stop(c);
        return -EINVAL; /* its parameters were refused: err has the plugin's words */
    }
    if (rc == 0 && len != 4) {
        stop(c);
        return sl_err(err, errlen, -ECHILD, "plugin %s: a broken reply", c->pi->name);
    }
    if (rc == 0) {
        memcpy(&c->handle, c->buf, 4);
    }
    return rc;
}

int sl_plugin_conn_open(const sl_plugins_t *p, const sl_plugin_info_t *pi, const char *params,
                        sl_plugin_conn_t **ret, char *err, size_t errlen)
{
    sl_plugin_conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->params = strdup(params != NULL ? params : "{}")) == NULL) {
        free(c);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    c->reg = p;
    c->pi = pi;
    c->to = c->from = -1;
    int rc = start(c, err, errlen);
    if (rc < 0) {
        sl_plugin_conn_close(c);
        return rc;
    }
    *ret = c;
    return 0;
}

int sl_plugin_conn_process(sl_plugin_conn_t *c, const uint64_t rng[4], const sl_tensor_t *in,
                           sl_tensor_t *out, char *err, size_t errlen)
{
    if (in->dtype != SL_DT_U8 || in->layout != SL_LAYOUT_HWC || in->c < 1 || in->c > 4) {
        return sl_err(err, errlen, -EINVAL,
                      "plugin %s: takes uint8 HWC images of 1..4 channels, got %s %ux%ux%u",
                      c->pi->name, sl_dtype_name(in->dtype), in->h, in->w, in->c);
    }
    if (c->pid == 0) {
        int rc = start(c, err, errlen); /* after a crash: a fresh host */
        if (rc < 0) {
            return rc == -EINVAL ? -EBADMSG : rc;
        }
    }
    uint8_t head[4 + 32 + 12];
    uint32_t shape[3] = {in->h, in->w, in->c};
    memcpy(head, &c->handle, 4);
    memcpy(head + 4, rng, 32);
    memcpy(head + 36, shape, 12);
    size_t len;
    int rc = call(c, SL_PW_PROCESS, head, sizeof(head), in->data, in->nbytes, &len, err, errlen);
    if (rc < 0) {
        return rc;
    }
    uint32_t o[3];
    if (len < 12) {
        return sl_err(err, errlen, -EBADMSG, "plugin %s: a broken reply", c->pi->name);
    }
    memcpy(o, c->buf, 12);
    if ((uint64_t)o[0] * o[1] * o[2] != len - 12) {
        return sl_err(err, errlen, -EBADMSG, "plugin %s: a broken reply", c->pi->name);
    }
    rc = sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_HWC, o[0], o[1], o[2]);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "plugin %s: output too large", c->pi->name);
    }
    memcpy(out->data, c->buf + 12, len - 12);
    return 0;
}

void sl_plugin_conn_close(sl_plugin_conn_t *c)
{
    if (c == NULL) {
        return;
    }
    stop(c);
    free(c->params);
    free(c->buf);
    free(c);
}
