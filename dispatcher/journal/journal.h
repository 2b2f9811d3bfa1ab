/* journal: the dispatcher's write-ahead log, so a restart loses no job state.
 *
 * Records are (type, payload) pairs. Appending one only writes it (under
 * the caller's state lock, which keeps records in order); making it durable
 * is a separate step, disp_journal_wait, taken after that lock is released
 * and before the change the record describes is answered. Waits share
 * syncs (group commit): one fdatasync covers every record appended while
 * the previous one ran, so N clients acknowledging at once pay about one
 * disk flush, not N one after the other. On disk each record is
 *   u32 magic "SLJ1" | u32 payload length | u32 type | u32 crc32c(type, payload) | payload
 * (little endian). A snapshot (written to a temp file, fsync'd, renamed) holds
 * the compacted state; the log holds what came after it.
 *
 * Threads: open, replay, append and compact under the caller's state lock
 * (one at a time); disp_journal_last, _wait and _broken from any thread.
 *
 * Replay tells a torn tail (the process died mid-append: an incomplete or
 * bad record with nothing valid after it) from a corrupt middle (a bad
 * record followed by valid ones): the tail is truncated and reported in
 * ret_truncated; a corrupt middle is an error (-EBADMSG) that names the
 * file and offset, and the dispatcher refuses to start. */
#ifndef DISP_JOURNAL_H
#define DISP_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define DISP_JOURNAL_MAX_RECORD (64u << 20)

typedef struct disp_journal_s disp_journal_t;

/* Called for every valid record in order: the snapshot's first, then the
 * log's. A non-zero return stops replay and is returned. */
typedef int (*disp_journal_fn)(void *ctx, uint32_t type, const uint8_t *payload, size_t len);

/* Opens (creating) DIR/journal.log and DIR/snapshot. Does not replay. */
int disp_journal_open(const char *dir, disp_journal_t **ret, char *err, size_t errlen);
void disp_journal_close(disp_journal_t *j);

/* Replays snapshot then log through fn. ret_truncated: bytes of torn tail cut
 * from the log (0 when clean). */
int disp_journal_replay(disp_journal_t *j, disp_journal_fn fn, void *ctx, size_t *ret_truncated,
                        char *err, size_t errlen);

/* Appends one record (write(2) only) and returns its number, 1, 2, ... in
 * append order, in *ret_seq (may be NULL). The caller serialises appends,
 * compaction and replay (its state lock). Returns 0 or a negative errno;
 * a record that failed to write is cut off the log again. */
int disp_journal_append(disp_journal_t *j, uint32_t type, const void *payload, size_t len,
                        uint64_t *ret_seq);
/* The last number handed out (0: none since open): a record's, or a
 * compaction's (a snapshot takes a number too). Any thread. */
uint64_t disp_journal_last(disp_journal_t *j);

/* Returns once record seq and every one before it are durable: 0, or -EIO
 * when the sync that covered it failed. Any thread, without the caller's
 * state lock (this is where a thread may wait for the disk). If no sync is
 * running it runs one for every record appended so far; else it waits for
 * the running one and checks again, so a record is never reported durable
 * by a sync that started before it was written. A failed sync breaks the
 * journal: every record it covered fails, and so does every later wait
 * until a compaction has rewritten the whole state (disp_journal_broken). */
int disp_journal_wait(disp_journal_t *j, uint64_t seq);
/* Whether a sync has failed since the last compaction. Any thread. */
int disp_journal_broken(disp_journal_t *j);

/* Tests: fn replaces fdatasync(fd) for every later sync (NULL restores it);
 * upto is the last record the sync covers. Returns 0 or a negative errno.
 * Set before any thread appends or waits. */
typedef int (*disp_journal_sync_fn)(void *ctx, int fd, uint64_t upto);
void disp_journal_set_sync(disp_journal_t *j, disp_journal_sync_fn fn, void *ctx);

/* Replaces the snapshot with the records the writer emits and empties the
 * log. A crash at any point leaves the old snapshot + old log, or the new
 * snapshot + the old log, or the new snapshot + an empty log: so replay must
 * treat records already reflected in the snapshot as no-ops (idempotent
 * records). The caller holds its state lock throughout, so no append races
 * the snapshot, and the snapshot holds the effect of every record appended
 * so far: they all count as durable once it is, and a broken journal is
 * whole again. The writer calls emit() per record. */
typedef int (*disp_journal_emit_fn)(void *emit_ctx, uint32_t type, const void *payload,
                                    size_t len);
typedef int (*disp_journal_writer_fn)(void *ctx, disp_journal_emit_fn emit, void *emit_ctx);
int disp_journal_compact(disp_journal_t *j, disp_journal_writer_fn writer, void *ctx, char *err,
                         size_t errlen);

/* Bytes in the log since the last compaction (for the compaction policy). */
uint64_t disp_journal_log_bytes(const disp_journal_t *j);

#endif
