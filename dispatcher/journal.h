/* journal: the dispatcher's write-ahead log, so a restart loses no job state.
 *
 * Records are (type, payload) pairs, appended and fdatasync'd before the
 * change they describe is answered. On disk each is
 *   u32 magic "SLJ1" | u32 payload length | u32 type | u32 crc32c(type, payload) | payload
 * (little endian). A snapshot (written to a temp file, fsync'd, renamed) holds
 * the compacted state; the log holds what came after it.
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

/* Appends one record and makes it durable (fdatasync) before returning. */
int disp_journal_append(disp_journal_t *j, uint32_t type, const void *payload, size_t len);

/* Replaces the snapshot with the records the writer emits and empties the
 * log. A crash at any point leaves the old snapshot + old log, or the new
 * snapshot + the old log, or the new snapshot + an empty log: so replay must
 * treat records already reflected in the snapshot as no-ops (idempotent
 * records). The caller holds its state lock throughout, so no append races
 * the snapshot. The writer calls emit() per record. */
typedef int (*disp_journal_emit_fn)(void *emit_ctx, uint32_t type, const void *payload,
                                    size_t len);
typedef int (*disp_journal_writer_fn)(void *ctx, disp_journal_emit_fn emit, void *emit_ctx);
int disp_journal_compact(disp_journal_t *j, disp_journal_writer_fn writer, void *ctx, char *err,
                         size_t errlen);

/* Bytes in the log since the last compaction (for the compaction policy). */
uint64_t disp_journal_log_bytes(const disp_journal_t *j);

#endif
