/* bigbuf: the memory of a large buffer that is filled once and reused
 * (the batcher's batch buffers, common/engine/batcher.h).
 *
 * Why not malloc: a batch buffer is megabytes (32 float32 224x224x3 samples
 * are 19 MB) and its first touch faults it in a 4 KB page at a time. On the
 * GPU node of issue 39 (a virtual machine under a CPU quota) a page fault
 * cost ~60 us: 285 ms of CPU to first touch one 19 MB buffer, against 13 ms
 * with 2 MB pages. Buffers of at least SL_BIGBUF_MIN bytes are therefore
 * mapped on their own, 2 MB aligned, and advised MADV_HUGEPAGE (honoured
 * where transparent huge pages are "madvise" or "always"; a no-op, plain
 * 4 KB pages, where they are "never"). Smaller ones come from malloc.
 *
 * Memory: a mapped buffer's size is rounded up to 2 MB (at most 2 MB more
 * than asked, under 50 % of it); nothing else is kept. Any thread. */
#ifndef SL_BIGBUF_H
#define SL_BIGBUF_H

#include <stddef.h>
#include <stdint.h>

#define SL_BIGBUF_HUGE ((size_t)2 << 20) /* the huge page size on x86-64 and arm64 (4 KB base) */
#define SL_BIGBUF_MIN SL_BIGBUF_HUGE     /* smaller buffers: malloc */

/* A buffer of n bytes (uninitialised), or NULL. */
uint8_t *sl_bigbuf_alloc(size_t n);
/* Frees what sl_bigbuf_alloc(n) returned, with the same n; NULL ok. */
void sl_bigbuf_free(uint8_t *p, size_t n);
/* Whether a buffer of n bytes is mapped on its own (tests). */
int sl_bigbuf_mapped(size_t n);

#endif
