/* log: the one logging macro, for daemons and the CLI only.
 * common/ and client/ library code never logs: it returns an error code and
 * fills the caller's error buffer, and the program decides what to print. Output goes to stderr,
 * which journald collects. The level is the daemon's top-level state. */
#ifndef SL_LOG_H
#define SL_LOG_H

#include <syslog.h>

/* Syslog levels: LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG. */
void sl_log_set_level(int level);
int sl_log_get_level(void);
/* Parses "error", "warning", "notice", "info", "debug"; returns -EINVAL otherwise. */
int sl_log_parse_level(const char *name, int *ret_level);
void sl_log_set_name(const char *progname);
void sl_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The level check comes first so that arguments are not formatted for nothing. */
#define SL_LOG(level, ...)                                          \
    do {                                                            \
        if ((level) <= sl_log_get_level()) {                        \
            sl_log_write((level), __FILE__, __LINE__, __VA_ARGS__); \
        }                                                           \
    } while (0)

#define SL_ERR(...) SL_LOG(LOG_ERR, __VA_ARGS__)
#define SL_WARN(...) SL_LOG(LOG_WARNING, __VA_ARGS__)
#define SL_NOTICE(...) SL_LOG(LOG_NOTICE, __VA_ARGS__)
#define SL_INFO(...) SL_LOG(LOG_INFO, __VA_ARGS__)
#define SL_DEBUG(...) SL_LOG(LOG_DEBUG, __VA_ARGS__)

#endif
