/* fuzz_conf: the config file parser (common/base/conf.c) with the daemons'
 * tables. The input is written to a file and read as
 *   - sl_conf_load_file with the dispatcher's table, then disp_config_check;
 *   - sl_conf_reload with the same table: the same verdict as the load;
 *   - sl_conf_parse_args "--config FILE" for the dispatcher and through
 *     wk_config_parse for the worker (with the required flags given).
 * Contracts: 0 or -EINVAL (-ENOMEM, -EIO), the message names the file; an
 * accepted file leaves every INT/DOUBLE key within its table bounds, every
 * string NUL-terminated and the log level a syslog level. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/base/conf.h"
#include "dispatcher/config.h"
#include "tests/fuzz/fuzz.h"
#include "worker/config.h"

static fz_tmpfile_t fz_conf_file;

static void fz_conf_cleanup(void) { fz_tmpfile_remove(&fz_conf_file); }

static void fz_conf_code(int rc, const char *err, size_t errlen, const char *what)
{
    FZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM || rc == -EIO, "%s returned %d: %s",
             what, rc, err);
    if (rc != 0) {
        FZ_CHECK(memchr(err, '\0', errlen) != NULL, "%s: unterminated message", what);
    }
}

/* Every key of an accepted file within the table's bounds. */
static void fz_conf_bounds(const sl_conf_table_t *t, const void *obj)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_conf_opt_t *o = &t->opts[i];
        const char *field = (const char *)obj + o->offset;
        switch (o->type) {
        case SL_CONF_STR:
            FZ_CHECK(memchr(field, '\0', SL_CONF_STR_MAX) != NULL, "%s unterminated", o->name);
            break;
        case SL_CONF_INT: {
            long long v;
            memcpy(&v, field, sizeof(v));
            FZ_CHECK((double)v >= o->min && (double)v <= o->max, "%s = %lld", o->name, v);
            break;
        }
        case SL_CONF_DOUBLE: {
            double v;
            memcpy(&v, field, sizeof(v));
            FZ_CHECK(v >= o->min && v <= o->max, "%s = %g", o->name, v);
            break;
        }
        case SL_CONF_BOOL: {
            int v;
            memcpy(&v, field, sizeof(v));
            FZ_CHECK(v == 0 || v == 1, "%s = %d", o->name, v);
            break;
        }
        case SL_CONF_LOGLEVEL: {
            int v;
            memcpy(&v, field, sizeof(v));
            FZ_CHECK(v >= LOG_ERR && v <= LOG_DEBUG, "%s = %d", o->name, v);
            break;
        }
        }
    }
}

int fuzz_conf_one(const uint8_t *data, size_t size)
{
    fz_tmpfile_setup(&fz_conf_file, "conf", "fuzz.conf", fz_conf_cleanup);
    fz_tmpfile_write(&fz_conf_file, data, size);
    char err[1024];

    disp_config_t *dc = calloc(1, sizeof(*dc));
    FZ_CHECK(dc != NULL, "out of memory");
    FZ_CHECK(sl_conf_defaults(&disp_conf_table, dc, err, sizeof(err)) == 0, "%s", err);
    int rc = sl_conf_load_file(&disp_conf_table, dc, fz_conf_file.path, err, sizeof(err));
    fz_conf_code(rc, err, sizeof(err), "load");
    if (rc == 0) {
        fz_conf_bounds(&disp_conf_table, dc);
        (void)disp_config_check(dc, err, sizeof(err));
    } else {
        FZ_CHECK(strncmp(err, fz_conf_file.path, strlen(fz_conf_file.path)) == 0,
                 "message does not name the file: %s", err);
    }
    int rrc = sl_conf_reload(&disp_conf_table, dc, fz_conf_file.path, err, sizeof(err));
    FZ_CHECK(rrc == rc, "load returned %d, reload %d: %s", rc, rrc, err);

    char *dargv[] = {"sluice-dispatcher", "--config", fz_conf_file.path, NULL};
    char cpath[256];
    memset(dc, 0, sizeof(*dc));
    rc = sl_conf_parse_args(&disp_conf_table, dc, 3, dargv, cpath, sizeof(cpath), err,
                            sizeof(err));
    fz_conf_code(rc, err, sizeof(err), "dispatcher args");
    if (rc == 0) {
        fz_conf_bounds(&disp_conf_table, dc);
    }
    free(dc);

    wk_config_t *wc = calloc(1, sizeof(*wc));
    FZ_CHECK(wc != NULL, "out of memory");
    char *wargv[] = {"sluice-worker", "--config", fz_conf_file.path, "--dispatcher", "127.0.0.1:1",
                     "--data-root", fz_conf_file.dir, NULL};
    rc = wk_config_parse(wc, 7, wargv, cpath, sizeof(cpath), err, sizeof(err));
    fz_conf_code(rc, err, sizeof(err), "worker args");
    if (rc == 0) {
        fz_conf_bounds(&wk_conf_table, wc);
    }
    free(wc);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_conf_one)
