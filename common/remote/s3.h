/* s3: where an s3://bucket/key URL is fetched from and how the request is
 * signed, by the AWS conventions:
 *  - endpoint: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else
 *    https://s3.<region>.amazonaws.com;
 *  - region: AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1;
 *  - credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
 *    AWS_SESSION_TOKEN), else the [AWS_PROFILE or default] section of
 *    AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials; none: unsigned
 *    requests (public buckets);
 *  - addressing: virtual-host style (bucket.host/key) on AWS's endpoint,
 *    path style (host/bucket/key) on a custom one; SLUICE_S3_ADDRESSING_STYLE
 *    = path | virtual overrides.
 * The credentials are the host's own: they stay in this struct, are never
 * formatted into a message, and only their HMAC leaves the process. */
#ifndef SL_REMOTE_S3_H
#define SL_REMOTE_S3_H

#include <stdbool.h>
#include <stddef.h>

#include "common/remote/url.h"

typedef struct sl_s3_conf_s {
    char region[64];
    char endpoint[512]; /* scheme://host[:port], no trailing '/' */
    bool path_style;
    bool have_creds;
    char key_id[128];
    char secret[128];
    char token[4096];
} sl_s3_conf_t;

/* Fills c from env (a lookup function, getenv in production) and the
 * credentials file. Returns 0 or -EINVAL (a malformed endpoint or style:
 * err names the variable). */
typedef const char *(*sl_s3_getenv_fn)(const char *name);
int sl_s3_conf_load(sl_s3_conf_t *c, sl_s3_getenv_fn env, char *err, size_t errlen);

/* Most header lines sl_s3_request adds. */
#define SL_S3_MAX_HDRS 8

/* The request for GET/HEAD of s3 URL u at time now (UTC seconds): the wire
 * URL into url, header lines into hdr_buf with pointers in hdrs
 * (NULL-terminated), signed when c has credentials. if_match: an ETag to
 * require (GET after HEAD) or NULL. query: NULL/"" or the encoded query
 * in canonical (sorted) order ("list-type=2&prefix=a%2Fb"). Returns 0,
 * -ENAMETOOLONG, -EINVAL. */
int sl_s3_request(const sl_s3_conf_t *c, const sl_url_t *u, const char *method, long now,
                  const char *if_match, const char *query, char *url, size_t urllen, char *hdr_buf,
                  size_t hdr_buflen, const char *hdrs[SL_S3_MAX_HDRS + 1]);

#endif
