/* sluice-plugin-host: runs the stages of one plugin file for one Sluice
 * thread, in a process of its own, so that a plugin that crashes or hangs
 * takes only this process down (common/plugin/sluice_plugin.h). Started by
 * common/plugin/plugin_conn.c as `sluice-plugin-host FILE`; requests on
 * stdin, replies on stdout (common/plugin/plugin_wire.h); dies with its
 * parent. Not for users to run. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/plugin/plugin_wire.h"
#include "common/plugin/sluice_plugin.h"

#define MAX_STATES 64

typedef struct {
    const sluice_plugin_stage_t *const *stages;
    uint32_t nstages;
    const sluice_plugin_stage_t *st[MAX_STATES]; /* per handle */
    void *state[MAX_STATES];
    uint32_t nstate;
    uint8_t *out;
    size_t outcap;
} host_t;

static int reply_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int reply_err(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return sl_pw_write(1, SL_PW_ERR, msg, strlen(msg), NULL, 0);
}

static int do_list(host_t *h)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a != NULL && i < h->nstages; i++) {
        const sluice_plugin_stage_t *s = h->stages[i];
        json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s,s:f,s:i}", "name",
                                           s->name ? s->name : "", "version",
                                           s->version ? s->version : "", "reads",
                                           s->reads ? s->reads : "", "writes",
                                           s->writes ? s->writes : "", "cost_hint", s->cost_hint,
                                           "abi", (int)s->abi));
    }
    char *txt = a != NULL ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    if (txt == NULL) {
        return reply_err("out of memory");
    }
    int rc = sl_pw_write(1, SL_PW_OK, txt, strlen(txt), NULL, 0);
    free(txt);
    return rc;
}

static int do_create(host_t *h, const uint8_t *p, size_t n)
{
    uint32_t idx;
    if (n < 4) {
        return reply_err("create: short request");
    }
    memcpy(&idx, p, 4);
    if (idx >= h->nstages || h->nstate == MAX_STATES) {
        return reply_err("create: no stage %u (or more than %d states)", idx, MAX_STATES);
    }
    const sluice_plugin_stage_t *s = h->stages[idx];
    void *state = NULL;
    char err[256] = "";
    if (s->create != NULL && s->create((const char *)p + 4, n - 4, &state, err, sizeof(err)) < 0) {
        return reply_err("%s", err[0] ? err : "its parameters were refused");
    }
    h->st[h->nstate] = s;
    h->state[h->nstate] = state;
    uint32_t handle = h->nstate++;
    return sl_pw_write(1, SL_PW_OK, &handle, 4, NULL, 0);
}

static int shape_of(const host_t *h, uint32_t handle, const uint32_t in[3], uint32_t out[3],
                    char *err, size_t errlen)
{
    const sluice_plugin_stage_t *s = h->st[handle];
    memcpy(out, in, 3 * sizeof(uint32_t));
    if (s->out_shape != NULL &&
        s->out_shape(h->state[handle], in[0], in[1], in[2], &out[0], &out[1], &out[2], err,
                     errlen) < 0) {
        return -EINVAL;
    }
    if (out[0] == 0 || out[1] == 0 || out[2] == 0 || out[2] > 4 ||
        (uint64_t)out[0] * out[1] * out[2] > SL_PW_MAX - 64) {
        snprintf(err, errlen, "output shape %ux%ux%u out of range", out[0], out[1], out[2]);
        return -EINVAL;
    }
    return 0;
}

static int do_shape(host_t *h, const uint8_t *p, size_t n)
{
    uint32_t v[4], out[3];
    char err[256] = "";
    if (n != sizeof(v)) {
        return reply_err("shape: bad request");
    }
    memcpy(v, p, sizeof(v));
    if (v[0] >= h->nstate) {
        return reply_err("shape: no handle %u", v[0]);
    }
    if (shape_of(h, v[0], v + 1, out, err, sizeof(err)) < 0) {
        return reply_err("%s", err);
    }
    return sl_pw_write(1, SL_PW_OK, out, sizeof(out), NULL, 0);
}

static int do_process(host_t *h, const uint8_t *p, size_t n)
{
    const size_t head = 4 + 32 + 12;
    uint32_t handle, in[3], out[3];
    sluice_plugin_rng_t rng;
    char err[256] = "";
    if (n < head) {
        return reply_err("process: short request");
    }
    memcpy(&handle, p, 4);
    memcpy(rng.s, p + 4, 32);
    memcpy(in, p + 36, 12);
    if (handle >= h->nstate || (uint64_t)in[0] * in[1] * in[2] != n - head) {
        return reply_err("process: bad handle or image size");
    }
    if (shape_of(h, handle, in, out, err, sizeof(err)) < 0) {
        return reply_err("%s", err);
    }
    size_t nb = (size_t)out[0] * out[1] * out[2];
    if (nb + 12 > h->outcap) {
        uint8_t *q = realloc(h->out, nb + 12);
        if (q == NULL) {
            return reply_err("out of memory");
        }
        h->out = q;
        h->outcap = nb + 12;
    }
    memcpy(h->out, out, 12);
    sluice_plugin_image_t a = {(uint8_t *)p + head, in[0], in[1], in[2]};
    sluice_plugin_image_t b = {h->out + 12, out[0], out[1], out[2]};
    if (h->st[handle]->process(h->state[handle], &a, &b, &rng, err, sizeof(err)) < 0) {
        return reply_err("%s", err[0] ? err : "the stage failed");
    }
    return sl_pw_write(1, SL_PW_OK, h->out, nb + 12, NULL, 0);
}

int main(int argc, char **argv)
{
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the Sluice process */
    if (argc != 2) {
        fprintf(stderr, "usage: sluice-plugin-host PLUGIN.so (started by Sluice, not by hand)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    sluice_plugin_stages_fn entry = dl ? (sluice_plugin_stages_fn)dlsym(dl, SLUICE_PLUGIN_ENTRY)
                                       : NULL;
    host_t h = {0};
    if (entry != NULL) {
        h.stages = entry(&h.nstages);
    }
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    uint32_t type;
    while (sl_pw_read(0, -1, &type, &buf, &cap, &len) == 0) {
        int rc;
        if (entry == NULL || h.stages == NULL) {
            rc = dl == NULL ? reply_err("%s", dlerror()) /* names the file */
                            : reply_err("no " SLUICE_PLUGIN_ENTRY "() in it");
        } else if (type == SL_PW_LIST) {
            rc = do_list(&h);
        } else if (type == SL_PW_CREATE) {
            rc = do_create(&h, buf, len);
        } else if (type == SL_PW_SHAPE) {
            rc = do_shape(&h, buf, len);
        } else if (type == SL_PW_PROCESS) {
            rc = do_process(&h, buf, len);
        } else {
            rc = reply_err("unknown request %u", type);
        }
        if (rc < 0) {
            break;
        }
    }
    return 0;
}
