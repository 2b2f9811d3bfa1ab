/* bigbuf: see bigbuf.h. */
#include "common/engine/bigbuf.h"

#include <stdlib.h>
#include <sys/mman.h>

int sl_bigbuf_mapped(size_t n) { return n >= SL_BIGBUF_MIN && n <= SIZE_MAX / 2; }

/* The mapping's length for n bytes: whole huge pages. */
static size_t mapped_len(size_t n) { return (n + SL_BIGBUF_HUGE - 1) & ~(SL_BIGBUF_HUGE - 1); }

uint8_t *sl_bigbuf_alloc(size_t n)
{
    if (!sl_bigbuf_mapped(n)) {
        return malloc(n ? n : 1);
    }
    size_t len = mapped_len(n);
    /* One huge page more than needed, then the unaligned head and the
     * tail cut off: the kernel aligns only some anonymous mappings. */
    size_t over = len + SL_BIGBUF_HUGE;
    uint8_t *p = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return NULL;
    }
    uintptr_t a = ((uintptr_t)p + SL_BIGBUF_HUGE - 1) & ~(uintptr_t)(SL_BIGBUF_HUGE - 1);
    size_t head = a - (uintptr_t)p;
    if (head > 0) {
        (void)munmap(p, head);
    }
    if (over - head > len) {
        (void)munmap((uint8_t *)a + len, over - head - len);
    }
    /* A hint: where THP is off this fails or does nothing, and the buffer
     * is faulted in 4 KB pages as a malloc'd one would be. */
    (void)madvise((void *)a, len, MADV_HUGEPAGE);
    return (uint8_t *)a;
}

void sl_bigbuf_free(uint8_t *p, size_t n)
{
    if (p == NULL) {
        return;
    }
    if (!sl_bigbuf_mapped(n)) {
        free(p);
        return;
    }
    (void)munmap(p, mapped_len(n));
}
