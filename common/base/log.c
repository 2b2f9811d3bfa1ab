/* The level and program name are process-wide by design: they are the
 * daemon's top-level logging state, set once at start-up and on SIGHUP. */
#include "common/base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int g_level = LOG_NOTICE;
static const char *g_name = "sluice";

static const struct {
    const char *name;
    int level;
} LEVELS[] = {
    {"error", LOG_ERR}, {"warning", LOG_WARNING}, {"notice", LOG_NOTICE},
    {"info", LOG_INFO}, {"debug", LOG_DEBUG},
};

void sl_log_set_level(int level) { atomic_store(&g_level, level); }
int sl_log_get_level(void) { return atomic_load(&g_level); }
void sl_log_set_name(const char *progname) { g_name = progname; }

int sl_log_parse_level(const char *name, int *ret_level)
{
    for (size_t i = 0; i < sizeof(LEVELS) / sizeof(LEVELS[0]); i++) {
        if (strcmp(name, LEVELS[i].name) == 0) {
            *ret_level = LEVELS[i].level;
            return 0;
        }
    }
    return -EINVAL;
}

static const char *level_tag(int level)
{
    for (size_t i = 0; i < sizeof(LEVELS) / sizeof(LEVELS[0]); i++) {
        if (LEVELS[i].level == level) {
            return LEVELS[i].name;
        }
    }
    return "?";
}

void sl_log_write(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    /* "<N>" prefix lets journald pick up the level from stderr. */
    if (sl_log_get_level() >= LOG_DEBUG) {
        fprintf(stderr, "<%d>%02d:%02d:%02d.%03ld %s %s: %s (%s:%d)\n", level, tm.tm_hour,
                tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, g_name, level_tag(level), msg, file,
                line);
    } else {
        fprintf(stderr, "<%d>%02d:%02d:%02d.%03ld %s %s: %s\n", level, tm.tm_hour, tm.tm_min,
                tm.tm_sec, ts.tv_nsec / 1000000, g_name, level_tag(level), msg);
    }
}
