#include "common/base/addr.h"

#include <errno.h>
#include <string.h>

#include "common/base/err.h"

int sl_addr_split(const char *addr, char *host, size_t hostlen, unsigned *ret_port, char *err,
                  size_t errlen)
{
    if (addr == NULL || host == NULL || hostlen == 0) {
        return sl_err(err, errlen, -EINVAL, "no address");
    }
    const char *hbeg = addr;
    const char *colon = NULL;
    size_t hlen = 0;
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (close == NULL || close[1] != ':') {
            return sl_err(err, errlen, -EINVAL, "\"%s\" is not [IPV6]:PORT", addr);
        }
        hbeg = addr + 1;
        hlen = (size_t)(close - hbeg);
        colon = close + 1;
    } else {
        colon = strrchr(addr, ':');
        if (colon == NULL) {
            return sl_err(err, errlen, -EINVAL, "\"%s\" is not HOST:PORT (no port)", addr);
        }
        if (memchr(addr, ':', (size_t)(colon - addr)) != NULL) {
            return sl_err(err, errlen, -EINVAL,
                          "\"%s\": an IPv6 address needs brackets ([ADDR]:PORT)", addr);
        }
        hlen = (size_t)(colon - addr);
    }
    if (hlen == 0) {
        return sl_err(err, errlen, -EINVAL, "\"%s\" is not HOST:PORT (no host)", addr);
    }
    if (hlen >= hostlen) {
        return sl_err(err, errlen, -EINVAL, "\"%s\": host longer than %zu bytes", addr,
                      hostlen - 1);
    }
    const char *p = colon + 1;
    if (*p == '\0' || strlen(p) > 5) {
        return sl_err(err, errlen, -EINVAL, "\"%s\": port must be 0..65535", addr);
    }
    unsigned port = 0;
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return sl_err(err, errlen, -EINVAL, "\"%s\": port is not a number", addr);
        }
        port = port * 10 + (unsigned)(*p - '0');
    }
    if (port > 65535) {
        return sl_err(err, errlen, -EINVAL, "\"%s\": port must be 0..65535", addr);
    }
    memcpy(host, hbeg, hlen);
    host[hlen] = '\0';
    *ret_port = port;
    return 0;
}
