/* part_io: the byte-level I/O and hashing of partial entries (partial.c):
 * whole reads and writes at an offset, copies between files, and the
 * word-wise hash of records and their bytes. Not a public API. */
#ifndef SL_REMOTE_PART_IO_H
#define SL_REMOTE_PART_IO_H

#include <stddef.h>
#include <stdint.h>

/* The unit bytes are hashed and copied in (a multiple of 8: the hash
 * takes words, so a range hashes the same in any process). */
#define SL_PART_BUF ((size_t)256 << 10)
#define SL_PART_HASH_SEED 0xcbf29ce484222325ULL

/* A word-wise hash: not for adversaries, for torn and lost writes. Start
 * from SL_PART_HASH_SEED, feed bytes, then sl_part_hash_final. */
uint64_t sl_part_hash_bytes(uint64_t h, const unsigned char *p, size_t n);
uint64_t sl_part_hash_final(uint64_t h);

/* Exactly n bytes at off: 0, -errno, -EIO at EOF. */
int sl_part_pread_full(int fd, void *buf, size_t n, uint64_t off);
int sl_part_pwrite_full(int fd, const void *buf, size_t n, uint64_t off);

/* Copies len bytes from in_fd at in_off to out_fd at out_off through buf
 * (SL_PART_BUF bytes); *ret_hash (may be NULL) gets their hash. 0 or
 * -errno. */
int sl_part_copy_range(int in_fd, uint64_t in_off, int out_fd, uint64_t out_off, uint64_t len,
                       unsigned char *buf, uint64_t *ret_hash);

#endif
