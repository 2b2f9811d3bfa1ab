/* fixtures_disp: a worker and a client talking to an in-process dispatcher
 * through its service functions (dispatcher/service/service.h), as the real peers do
 * over RPC. Shared by the dispatcher suites; each asserts success itself. */
#ifndef TESTS_UNIT_FIXTURES_DISP_H
#define TESTS_UNIT_FIXTURES_DISP_H

#include <stddef.h>
#include <stdint.h>

#include "dispatcher/disp.h"
#include "tests/unit/fixtures.h" /* FX_JOB_SECRET */

/* A dispatcher with the defaults but 10-sample splits, 2 splits a worker
 * and no per-client job limit, started at now (ms); free with
 * fx_disp_destroy and free(). */
disp_t *fx_disp_new(int64_t now);

/* RegisterWorker from addr with this many threads; want: the id to ask back
 * (a worker re-registering after a restart), 0 for a new one. Returns the id. */
uint64_t fx_disp_register(disp_t *d, const char *addr, uint32_t threads, uint64_t want,
                          int64_t now);

/* GetAssignment of a job: the ids (and epochs, when epochs is non-NULL) of
 * at most max splits the client is to run itself, in *ret_n; the fallback
 * reason ("(null)" when none) when fallback is non-NULL. Returns whether
 * the job is finished. */
int fx_disp_client_splits(disp_t *d, uint64_t job, int64_t now, uint64_t *ids, uint64_t *epochs,
                          size_t max, size_t *ret_n, char *fallback, size_t fblen);

/* disp_destroy, after checking that no split made a move the allow table
 * refuses (disp_split_move): the existing flows never try one. */
void fx_disp_destroy(disp_t *d);

#endif
