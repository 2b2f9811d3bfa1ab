/* rpc_probe: sends one unary request and prints the gRPC status, for
 * integration scripts.
 *
 *   rpc_probe TARGET METHOD [--version N] [--garbage] [--bytes N] [--timeout MS]
 *
 * Default request: a message whose field 1 is `uint32 version` (N, default
 * SL_PROTOCOL_VERSION) -- every Sluice request starts that way -- padded with
 * an unknown field to about --bytes N bytes if asked. --garbage sends N
 * (default 16) bytes that do not parse as protobuf instead.
 *
 * stdout: one line `status=CODE details=TEXT` (CODE numeric). Exit 0 when a
 * gRPC status came back (whatever it is), 1 on a local failure, 2 on usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rpc/rpc.h"
#include "common/rpc/rpc_impl.h"
#include "proto/sluice.pb-c.h"

#define PAD_FIELD 1000 /* unknown to every Sluice message: ignored by the peer */

static int usage(void)
{
    fprintf(stderr, "usage: rpc_probe TARGET METHOD [--version N] [--garbage] [--bytes N] "
                    "[--timeout MS]\n");
    return 2;
}

static int parse_num(const char *s, unsigned long max, unsigned long *ret)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v > max) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

/* Builds the request bytes into a malloc'd buffer. */
static unsigned char *build(unsigned long version, int garbage, unsigned long bytes,
                            size_t *ret_len)
{
    if (garbage) {
        size_t n = bytes == 0 ? 16 : bytes;
        unsigned char *p = malloc(n);
        if (p == NULL) {
            return NULL;
        }
        /* Field 1, length-delimited, claiming far more bytes than follow. */
        static const unsigned char head[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
        for (size_t i = 0; i < n; i++) {
            p[i] = i < sizeof(head) ? head[i] : (unsigned char)(0xa5 ^ i);
        }
        *ret_len = n;
        return p;
    }
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    req.version = (uint32_t)version;
    size_t base = protobuf_c_message_get_packed_size(&req.base);
    /* Total = base + 2-byte tag + varint(pad) + pad, as close to bytes as fits. */
    size_t pad = 0;
    unsigned char scratch[10];
    for (size_t hdr = 3; hdr <= 7 && pad == 0; hdr++) {
        if (bytes > base + hdr && 2 + put_varint(scratch, bytes - base - hdr) == hdr) {
            pad = bytes - base - hdr;
        }
    }
    unsigned char *p = malloc(base + 16 + pad);
    if (p == NULL) {
        return NULL;
    }
    size_t n = protobuf_c_message_pack(&req.base, p);
    if (bytes > 0) {
        n += put_varint(p + n, ((uint64_t)PAD_FIELD << 3) | 2);
        n += put_varint(p + n, pad);
        memset(p + n, 'p', pad);
        n += pad;
    }
    *ret_len = n;
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        return usage();
    }
    const char *target = argv[1];
    const char *method = argv[2];
    unsigned long version = SL_PROTOCOL_VERSION, bytes = 0, timeout = 5000;
    int garbage = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--garbage") == 0) {
            garbage = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--version") == 0) {
            if (parse_num(argv[++i], UINT32_MAX, &version) < 0) {
                return usage();
            }
        } else if (i + 1 < argc && strcmp(argv[i], "--bytes") == 0) {
            if (parse_num(argv[++i], 1ul << 30, &bytes) < 0) {
                return usage();
            }
        } else if (i + 1 < argc && strcmp(argv[i], "--timeout") == 0) {
            if (parse_num(argv[++i], 3600000, &timeout) < 0 || timeout == 0) {
                return usage();
            }
        } else {
            return usage();
        }
    }

    size_t len = 0;
    unsigned char *req = build(version, garbage, bytes, &len);
    if (req == NULL) {
        fprintf(stderr, "rpc_probe: out of memory\n");
        return 1;
    }
    sl_rpc_init();
    char err[256];
    /* The channel may send and receive up to 1 GiB so that the peer's limit
     * is what gets tested. */
    sl_rpc_channel_t *ch = sl_rpc_channel_new(target, 1u << 30, NULL, 1, err, sizeof(err));
    if (ch == NULL) {
        fprintf(stderr, "rpc_probe: %s\n", err);
        free(req);
        sl_rpc_shutdown();
        return 1;
    }
    sl_rpc_status_t st = {0};
    size_t reply_len = 0;
    int r = sl_rpc_unary_bytes(ch, method, req, len, (int)timeout, 0, NULL, &reply_len, &st);
    free(req);
    sl_rpc_channel_free(ch);
    sl_rpc_shutdown();
    if (r != 0 && r != -ECOMM) {
        fprintf(stderr, "rpc_probe: local failure: %s\n", st.details);
        return 1;
    }
    printf("status=%d details=%s\n", st.code, st.details);
    fprintf(stderr, "rpc_probe: %s, %zu request bytes, %zu reply bytes\n",
            sl_rpc_code_name(st.code), len, reply_len);
    return 0;
}
