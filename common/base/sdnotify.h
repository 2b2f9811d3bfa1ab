/* sdnotify: the sd_notify(3) datagram protocol, without libsystemd.
 *
 * A unit with Type=notify starts the daemon with $NOTIFY_SOCKET naming an
 * AF_UNIX datagram socket (a path, or "@name" for the abstract namespace).
 * The daemon sends newline-separated "KEY=VALUE" assignments in one datagram:
 * READY=1 once it serves, STOPPING=1 when it begins to shut down, STATUS=text
 * for `systemctl status`, RELOADING=1 around a reload. Without $NOTIFY_SOCKET
 * (not under systemd) every call is a no-op returning 0.
 *
 * Library code: never logs, never exits. Thread-safe (no state kept: each
 * call opens, sends and closes its own socket, a few microseconds, so it is
 * cheap enough for the handful of messages a daemon sends). */
#ifndef SL_SDNOTIFY_H
#define SL_SDNOTIFY_H

#include <stddef.h>

/* Sends state ("READY=1\nSTATUS=serving") to $NOTIFY_SOCKET. Returns 1 when
 * sent, 0 when $NOTIFY_SOCKET is unset or empty, a negative errno on failure
 * (-EINVAL: the variable does not name a usable socket address; -EMSGSIZE:
 * state longer than SL_SDNOTIFY_MAX). */
int sl_sdnotify(const char *state, char *err, size_t errlen);

/* printf-style convenience for "STATUS=..." and friends; same returns. */
int sl_sdnotifyf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define SL_SDNOTIFY_MAX 4096

#endif
