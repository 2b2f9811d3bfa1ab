/* video_dl: FFmpeg's libraries by dlopen (video_dl.h). The table is
 * written once under pthread_once and only read afterwards. */
#define SL_VDL_NO_REDIRECT
#include "common/video/video_dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/base/err.h"

#define VDL_STR2(x) #x
#define VDL_STR(x) VDL_STR2(x)

/* The libraries, by the names the list in video_dl.h uses. */
enum { VDL_avutil, VDL_avcodec, VDL_avformat, VDL_swscale, VDL__COUNT };
static const char *const k_sonames[VDL__COUNT] = {
    [VDL_avutil] = "libavutil.so." VDL_STR(LIBAVUTIL_VERSION_MAJOR),
    [VDL_avcodec] = "libavcodec.so." VDL_STR(LIBAVCODEC_VERSION_MAJOR),
    [VDL_avformat] = "libavformat.so." VDL_STR(LIBAVFORMAT_VERSION_MAJOR),
    [VDL_swscale] = "libswscale.so." VDL_STR(LIBSWSCALE_VERSION_MAJOR),
};

/* Written by load() only, inside pthread_once; read-only after. */
static sl_vdl_t g_vdl;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_rc;
static char g_why[256];

static void load(void)
{
    void *h[VDL__COUNT] = {0};
    for (int i = 0; i < VDL__COUNT; i++) {
        h[i] = dlopen(k_sonames[i], RTLD_NOW | RTLD_LOCAL);
        if (h[i] == NULL) {
            snprintf(g_why, sizeof(g_why), "FFmpeg's %s is not installed (%s)", k_sonames[i],
                     dlerror());
            g_rc = -EPROTONOSUPPORT;
            return;
        }
    }
#define VDL_LOAD(lib, fn)                                                                          \
    *(void **)&g_vdl.fn = dlsym(h[VDL_##lib], #fn);                                                \
    if (g_vdl.fn == NULL) {                                                                        \
        snprintf(g_why, sizeof(g_why), "%s has no %s", k_sonames[VDL_##lib], #fn);                 \
        g_rc = -EPROTONOSUPPORT;                                                                   \
        return;                                                                                    \
    }
    SL_VDL_FUNCS(VDL_LOAD)
#undef VDL_LOAD
    /* FFmpeg logs to stderr by default; a library of ours never logs. */
    g_vdl.av_log_set_level(AV_LOG_QUIET);
}

int sl_vdl_load(char *err, size_t errlen)
{
    pthread_once(&g_once, load);
    return g_rc < 0 ? sl_err(err, errlen, g_rc, "%s", g_why) : 0;
}

const sl_vdl_t *sl_vdl(void) { return &g_vdl; }
