/* journal_replay: the job table rebuilt from the journal (journal_state.h
 * says what the records hold). Start-up only, before any other thread. */
#ifndef DISP_JOURNAL_REPLAY_H
#define DISP_JOURNAL_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "dispatcher/disp.h"
#include "dispatcher/journal/journal.h"

/* Replays j (of directory dir, for messages) into d's job table, which
 * must be empty: every job not closed is submitted again with its id,
 * split size and plan, its acknowledged splits, multi-rank group and
 * planner state; job ids move past the replayed ones. A torn tail is
 * truncated and logged. Returns 0 and the number of jobs restored, or
 * -EBADMSG (a corrupt middle, a record that does not decode: err names
 * file and offset) or another negative errno with err. */
int disp_jreplay(disp_t *d, disp_journal_t *j, const char *dir, int64_t now_ms,
                 size_t *ret_restored, char *err, size_t errlen);

#endif
