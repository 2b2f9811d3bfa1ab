/* misbehave: a plugin that crashes or hangs on purpose, for the tests of
 * plugin isolation (tests/integration/test_plugins.sh). params {"mode":
 * "crash" | "hang" | "crash_once" | "stdout" | "ok", "from": N, "marker": PATH}
 * ("stdout" writes junk into the host's reply stream, as a chatty plugin might):
 * misbehaves from its N-th call on (per host process); "crash_once" crashes
 * only the first host that gets there (it leaves PATH behind), like a
 * transient fault. A test plugin: the marker file is state no real plugin
 * may keep. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/plugin/sluice_plugin.h"

typedef struct {
    int mode; /* 0 ok, 1 crash, 2 hang, 3 crash once, 4 junk on stdout */
    long from;
    char marker[512];
} mis_t;

static long calls; /* per host process: one state, one thread -- a test plugin only */

static int create(const char *params, size_t len, void **ret, char *err, size_t errlen)
{
    json_t *o = json_loadb(params, len, 0, NULL);
    const char *mode = json_string_value(json_object_get(o, "mode"));
    mis_t *m = calloc(1, sizeof(*m));
    if (m == NULL || mode == NULL) {
        snprintf(err, errlen, "params: need {\"mode\": \"crash\" | \"hang\" | \"ok\"}");
        json_decref(o);
        free(m);
        return -EINVAL;
    }
    m->mode = strcmp(mode, "crash") == 0        ? 1
              : strcmp(mode, "hang") == 0       ? 2
              : strcmp(mode, "crash_once") == 0 ? 3
              : strcmp(mode, "stdout") == 0     ? 4
                                                : 0;
    m->from = (long)json_integer_value(json_object_get(o, "from"));
    const char *marker = json_string_value(json_object_get(o, "marker"));
    snprintf(m->marker, sizeof(m->marker), "%s", marker != NULL ? marker : "");
    json_decref(o);
    *ret = m;
    return 0;
}

static void destroy(void *state) { free(state); }

static int process(const void *state, const sluice_plugin_image_t *in,
                   sluice_plugin_image_t *out, sluice_plugin_rng_t *rng, char *err,
                   size_t errlen)
{
    (void)rng;
    (void)err;
    (void)errlen;
    const mis_t *m = state;
    if (calls++ >= m->from) {
        if (m->mode == 1) {
            abort(); /* as a failed assert(); SIGSEGV would be ASan's to report in sanitized builds */
        }
        if (m->mode == 2) {
            for (;;) {
                pause();
            }
        }
        if (m->mode == 4) {
            static const char junk[] = "debug: hello from the plugin\n";
            if (write(1, junk, sizeof(junk) - 1) < 0) {
                return -EIO;
            }
        }
        if (m->mode == 3 && m->marker[0] != '\0') {
            int fd = open(m->marker, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (fd >= 0) { /* the first to get here */
                close(fd);
                abort();
            }
        }
    }
    memcpy(out->data, in->data, (size_t)in->h * in->w * in->c);
    return 0;
}

static const sluice_plugin_stage_t MIS = {
    .abi = SLUICE_PLUGIN_ABI,
    .name = "misbehave",
    .version = "test",
    .reads = "image",
    .writes = "image",
    .create = create,
    .destroy = destroy,
    .process = process,
};

const sluice_plugin_stage_t *const *sluice_plugin_stages(uint32_t *ret_n)
{
    static const sluice_plugin_stage_t *const stages[] = {&MIS};
    *ret_n = 1;
    return stages;
}
