/* state: a job's position as a small portable value that outlives the job,
 * the dispatcher and the cluster (docs/protocol.md "Resume").
 *
 * A rank's state says what its training loop consumed (client/lib/taken.h:
 * ranges of positions per epoch, plus the history of a job that was itself
 * resumed) and what it belongs to (the spec's hash without its rank, world
 * size and epochs, the source's size and fingerprint, the rank padding). It
 * is text:
 *     SLUICE-STATE 1
 *     {...one JSON object...}
 *     sha256 HEX            (or: hmac-sha256 HEX, keyed by the cluster token)
 * Resuming takes the states of every rank of the run that saved them (or one
 * from a single-rank run), merges them and gives the new job a "resume"
 * section (common/spec/resume.h) and a first epoch; the new job may have
 * another world size. */
#ifndef CL_STATE_H
#define CL_STATE_H

#include <stddef.h>

#include "client/lib/sluice.h"

#define CL_STATE_VERSION 1
#define CL_STATE_MAX_BYTES (16u << 20) /* a state larger than this is refused */

struct sluice_job;

/* This rank's state now (a batch boundary: what sluice_next_batch handed
 * out), malloc'd into *ret (NUL-terminated, *ret_len bytes without it).
 * key/keylen: the cluster token (signs), or NULL (a checksum). Returns 0,
 * -E2BIG when the consumed ranges overflowed, -ENOMEM. */
int cl_state_save(const struct sluice_job *job, const char *key, size_t keylen, char **ret,
                  size_t *ret_len, char *err, size_t errlen);

/* Applies opts' resume states to a job whose spec (with its rank and world
 * size) and source are loaded: sets job->spec.resume, job->first_epoch and
 * the epochs left. key: as for cl_state_save (a token set means only states
 * signed with it are accepted). A damaged, foreign (another spec or source),
 * future or incomplete (a rank's state missing) set is -EINVAL with err
 * saying which; nothing left to run is -ERANGE. */
int cl_state_apply(struct sluice_job *job, const sluice_options_t *opts, const char *key,
                   size_t keylen, char *err, size_t errlen);

#endif
