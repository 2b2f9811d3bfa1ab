/* part_io: byte-level I/O and hashing of partial entries (part_io.h). */
#include "common/remote/part_io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

uint64_t sl_part_hash_bytes(uint64_t h, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    while (n > 0) {
        h = (h ^ *p++) * 0x100000001b3ULL;
        n--;
    }
    return h;
}

uint64_t sl_part_hash_final(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

int sl_part_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            return k < 0 ? -errno : -EIO;
        }
        got += (size_t)k;
    }
    return 0;
}

int sl_part_pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
    size_t put = 0;
    while (put < n) {
        ssize_t k = pwrite(fd, (const char *)buf + put, n - put, (off_t)(off + put));
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            return k < 0 ? -errno : -EIO;
        }
        put += (size_t)k;
    }
    return 0;
}

int sl_part_copy_range(int in_fd, uint64_t in_off, int out_fd, uint64_t out_off, uint64_t len,
                       unsigned char *buf, uint64_t *ret_hash)
{
    uint64_t h = SL_PART_HASH_SEED;
    for (uint64_t at = 0; at < len;) {
        size_t n = len - at < SL_PART_BUF ? (size_t)(len - at) : SL_PART_BUF;
        int rc = sl_part_pread_full(in_fd, buf, n, in_off + at);
        if (rc == 0) {
            rc = sl_part_pwrite_full(out_fd, buf, n, out_off + at);
        }
        if (rc < 0) {
            return rc;
        }
        if (ret_hash != NULL) {
            h = sl_part_hash_bytes(h, buf, n);
        }
        at += n;
    }
    if (ret_hash != NULL) {
        *ret_hash = sl_part_hash_final(h);
    }
    return 0;
}
