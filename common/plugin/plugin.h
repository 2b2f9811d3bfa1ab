/* plugin: Sluice's side of stage plugins (common/plugin/sluice_plugin.h,
 * docs/plugins.md): the registry of a host's plugin_dir, and connections to
 * sluice-plugin-host processes that run a plugin's stage.
 *
 * The registry is made once (sl_plugins_scan) from the files of one
 * directory the host's operator configured -- never from a path a peer sent
 * -- and is immutable afterwards (any thread). Each file is hashed and
 * listed by a host process of its own, so even loading a plugin cannot
 * crash the caller. A connection is one host process for one stage with
 * its parameters, used by one thread at a time; a host that crashes or
 * outlives the timeout is killed and the call fails with -ECHILD (the next
 * call starts a fresh one). */
#ifndef SL_PLUGIN_H
#define SL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "common/sample/tensor.h"

#define SL_PLUGIN_MAX 64           /* stages in one plugin_dir */
#define SL_PLUGIN_NAME_MAX 64
#define SL_PLUGIN_FILE_MAX (256u << 20)
#define SL_PLUGIN_TIMEOUT_MS 10000 /* default per call */

typedef struct sl_plugin_info_s {
    char name[SL_PLUGIN_NAME_MAX];
    char version[64];
    char sha256[65];  /* of the file */
    char file[256];   /* its name in the directory */
    uint32_t stage;   /* its index among the file's stages */
    double cost_hint; /* CPU s per megapixel, 0 = unknown */
} sl_plugin_info_t;

typedef struct sl_plugins_s {
    char dir[1024];
    char host[1024];  /* the sluice-plugin-host program */
    int timeout_ms;
    sl_plugin_info_t v[SL_PLUGIN_MAX];
    size_t n;
    char refused[1024]; /* files that could not be used, and why ("" if none) */
    char host_err[1024]; /* the host program was not found: where it was looked for */
} sl_plugins_t;

/* Lists every *.so of dir (sorted). host: the sluice-plugin-host program
 * (NULL: sl_plugin_host_find's; when it finds none, no file is listed and
 * ->host_err and ->refused say where it looked). A file that does not load
 * or breaks the ABI is left out and named in ->refused. Returns 0, or
 * -errno for a directory that cannot be read (err says which). */
int sl_plugins_scan(const char *dir, const char *host, int timeout_ms, sl_plugins_t **ret,
                    char *err, size_t errlen);
void sl_plugins_free(sl_plugins_t *p); /* NULL ok */
/* A client's registry (library, `sluice plan`): dir, else
 * $SLUICE_PLUGIN_DIR, the timeout from $SLUICE_PLUGIN_TIMEOUT_MS (as the
 * worker's plugin_timeout_ms). *ret is NULL when no directory is named.
 * Returns as sl_plugins_scan. */
int sl_plugins_scan_client(const char *dir, sl_plugins_t **ret, char *err, size_t errlen);
/* The stage called name from the file with this SHA-256, or NULL. */
const sl_plugin_info_t *sl_plugins_find(const sl_plugins_t *p, const char *name,
                                        const char *sha256);
/* Why a stage is not here, for an error message: "no plugin_dir", "not in
 * DIR" (and the files there that could not be used, and why), "DIR has
 * cutout 1.0 with sha256 0123abcd... (another build)", or that the plugin
 * host program was not found (->host_err). */
void sl_plugins_why_missing(const sl_plugins_t *p, const char *name, char *out, size_t len);
/* The sluice-plugin-host program: $SLUICE_PLUGIN_HOST (a path, or a name
 * on PATH) when set; else sluice-plugin-host beside this program, beside
 * the library this code is in (libsluice.so under Python) or in that
 * library's ../bin (a build's lib/ and bin/, an installed PREFIX/lib and
 * PREFIX/bin); else on PATH. 0 with its path in out, or -ENOENT with err
 * naming where it looked and how to point to it (plugin_locate.c). */
int sl_plugin_host_find(char *out, size_t len, char *err, size_t errlen);

typedef struct sl_plugin_conn_s sl_plugin_conn_t;
/* A host process for stage pi of p with params (JSON object text). The
 * stage's own refusal of its params is -EINVAL with its message. */
int sl_plugin_conn_open(const sl_plugins_t *p, const sl_plugin_info_t *pi, const char *params,
                        sl_plugin_conn_t **ret, char *err, size_t errlen);
/* Runs the stage on in (uint8 HWC) into out, drawing from the stream
 * whose state is rng. 0; -EBADMSG: the stage refused the sample (err: its
 * reason); -ECHILD: the host crashed or timed out (err says which). */
int sl_plugin_conn_process(sl_plugin_conn_t *c, const uint64_t rng[4], const sl_tensor_t *in,
                           sl_tensor_t *out, char *err, size_t errlen);
void sl_plugin_conn_close(sl_plugin_conn_t *c); /* NULL ok */

#endif
