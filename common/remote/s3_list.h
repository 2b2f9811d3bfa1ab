/* s3_list: S3 ListObjectsV2, the listing an imagefolder over s3:// is
 * indexed from: the query of one page and the parse of its XML answer.
 * Pure functions: any thread. */
#ifndef SL_REMOTE_S3_LIST_H
#define SL_REMOTE_S3_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest continuation token we keep. */
#define SL_S3_TOKEN_MAX 2048

/* One object of a page: its key (entities decoded), size and ETag. */
typedef int (*sl_s3_list_fn)(void *ctx, const char *key, uint64_t size, const char *etag);

/* The canonical (sorted, encoded) query of a page under prefix, after
 * token (NULL/"" for the first page). Returns 0 or -ENAMETOOLONG. */
int sl_s3_list_query(const char *prefix, const char *token, char *out, size_t outlen);

/* Calls fn for each <Contents> of the page xml[0, n) in order; sets
 * *ret_truncated and copies NextContinuationToken into token. Returns 0,
 * -EPROTO (not a ListBucketResult, a malformed entry), or fn's error. */
int sl_s3_list_parse(const char *xml, size_t n, sl_s3_list_fn fn, void *ctx, bool *ret_truncated,
                     char *token, size_t tokenlen);

#endif
