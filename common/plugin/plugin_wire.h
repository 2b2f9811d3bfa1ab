/* plugin_wire: the frames between a Sluice process and its plugin hosts
 * (sluice-plugin-host, one process per plugin file and calling thread):
 * [u32 type or status][u32 length][length bytes], native byte order (both
 * ends are on one machine, one build). A frame is at most SL_PW_MAX bytes;
 * a longer length is a broken peer. */
#ifndef SL_PLUGIN_WIRE_H
#define SL_PLUGIN_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define SL_PW_MAX (1u << 30)

enum {
    SL_PW_LIST = 1,    /* -> JSON array of the file's stages */
    SL_PW_CREATE = 2,  /* u32 stage, params JSON -> u32 handle */
    SL_PW_SHAPE = 3,   /* u32 handle, u32 h, w, c -> u32 h, w, c */
    SL_PW_PROCESS = 4, /* u32 handle, u64 rng[4], u32 h, w, c, pixels -> u32 h, w, c, pixels */
};
enum { SL_PW_OK = 0, SL_PW_ERR = 1 }; /* reply type; ERR carries the message */

/* Writes one frame of two parts (either may be empty). 0 or -errno. */
int sl_pw_write(int fd, uint32_t type, const void *a, size_t alen, const void *b, size_t blen);
/* Reads one frame into *buf (grown as needed, *cap its size), waiting at
 * most timeout_ms in all (< 0: forever). 0, -ETIMEDOUT, -EPIPE (closed),
 * -EPROTO (too long), -ENOMEM, -errno. */
int sl_pw_read(int fd, int timeout_ms, uint32_t *ret_type, uint8_t **buf, size_t *cap,
               size_t *ret_len);

/* Starts `host path` with pipes on its stdin and stdout: *to and *from
 * are our ends (close-on-exec). 0 or -errno. */
#include <sys/types.h>
int sl_pw_spawn(const char *host, const char *path, pid_t *ret_pid, int *ret_to, int *ret_from);

#endif
