/* addr: the one HOST:PORT parser, for every address a flag, a config file or
 * a peer gives (gRPC listen and advertise addresses, HTTP endpoints, the
 * dispatcher a worker or client dials).
 *
 * Accepted: "host:port" and "[v6]:port"; host non-empty, port decimal
 * 0..65535 (0 = pick a free port, where listening). An unbracketed IPv6
 * address ("::1:80") is refused: its port cannot be told apart. */
#ifndef SL_ADDR_H
#define SL_ADDR_H

#include <stddef.h>

/* Splits addr into host (brackets removed) and port. Returns 0 or -EINVAL
 * (with a message naming addr in err); outputs untouched on failure. */
int sl_addr_split(const char *addr, char *host, size_t hostlen, unsigned *ret_port, char *err,
                  size_t errlen);

#endif
