/* probe: a HEAD of a URL to see whether its server answers (probe.h). */
#include "common/remote/probe.h"

#include <errno.h>
#include <stdlib.h>

#include "common/base/err.h"
#include "common/remote/remote_impl.h"

int sl_remote_probe(const sl_remote_t *r, const char *url, const int *cancel, char *err,
                    size_t errlen)
{
    if (r == NULL) {
        return sl_err(err, errlen, -EPERM, "URL '%s': no remote settings here", url);
    }
    sl_url_t *u = malloc(sizeof(*u));
    char *canon = malloc(SL_URL_MAX);
    sl_fetch_resp_t *resp = malloc(sizeof(*resp));
    int rc = -ENOMEM;
    if (u == NULL || canon == NULL || resp == NULL) {
        sl_err(err, errlen, rc, "out of memory");
        goto out;
    }
    rc = sl_remote_check_url(r, url, u, err, errlen);
    if (rc == 0 && sl_url_format(u, canon, SL_URL_MAX) < 0) {
        rc = sl_err(err, errlen, -EINVAL, "URL '%s' is too long", url);
    }
    if (rc == 0) {
        sl_fetch_opts_t o = r->fetch;
        o.cancel = cancel;
        sl_remote_req_t hq = {.head = true, .opts = &o};
        rc = sl_remote_request_retry(r, u, canon, &hq, -1, NULL, resp, err, errlen);
    }
out:
    free(u);
    free(canon);
    free(resp);
    return rc;
}

bool sl_remote_err_unreachable(int rc)
{
    switch (-rc) {
    case ECONNREFUSED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ECONNRESET:
    case EHOSTDOWN:
        return true;
    default:
        return false;
    }
}
