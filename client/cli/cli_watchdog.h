/* cli_watchdog: a deadline for a `sluice` subcommand whose library call may
 * block past it. sluice_next_batch() waits as long as the dispatcher is
 * merely slow (up to --dispatcher-timeout when it is gone, forever when it
 * is up but has no workers), and the library has no call that can be
 * interrupted; so a thread watches the clock and, once the deadline passes,
 * prints the caller's message, what was measured so far and, when the
 * caller gave one, an account of where the work stands, then ends the
 * process with SL_EXIT_RUNTIME. One per process. */
#ifndef SL_CLI_WATCHDOG_H
#define SL_CLI_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_cli_watchdog_s sl_cli_watchdog_t;

/* Starts the thread; deadline_sec is on sl_mono_sec()'s clock. what is
 * the message after "sluice " (copied, truncated to 255 bytes); the samples
 * count follows it. NULL on failure (errno set). */
sl_cli_watchdog_t *sl_cli_watchdog_new(const char *what, double deadline_sec);
/* Moves the deadline (any thread). */
void sl_cli_watchdog_set(sl_cli_watchdog_t *w, double deadline_sec);
/* Progress for the final message (any thread). */
void sl_cli_watchdog_progress(sl_cli_watchdog_t *w, uint64_t samples);
/* What to say about the work when the deadline passes: fn(arg, buf, len)
 * writes a paragraph, called on the watchdog's thread while the main thread
 * may be blocked anywhere, so fn must bound its own waits (client/lib/
 * diagnose.h does). NULL fn: nothing (set it so before arg goes away). */
typedef int (*sl_cli_watchdog_describe_fn)(void *arg, char *buf, size_t len);
void sl_cli_watchdog_describe(sl_cli_watchdog_t *w, sl_cli_watchdog_describe_fn fn, void *arg);
/* Stops and joins the thread; NULL is fine. */
void sl_cli_watchdog_free(sl_cli_watchdog_t *w);

#endif
