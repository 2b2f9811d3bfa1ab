/* The client-side consumer fixture shared by test_client_feed.c,
 * test_client_diagnose.c and tests/fuzz/fuzz_remote.c: a job opened in
 * local mode and made to look remote the way the control thread leaves it
 * -- job->disp set to a placeholder the consumer's path only tests for
 * NULL, the ring of local splits made -- so a test drives the consumer
 * (client/lib/job.c) with messages, splits and fetcher slots it sets by
 * hand. No thread runs besides the job's executor. */
#ifndef TESTS_UNIT_FIXTURES_CLIENT_H
#define TESTS_UNIT_FIXTURES_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "client/lib/sluice.h"

/* root/train: an ImageFolder of n w x h JPEGs (fx_make_imagefolder) and
 * root/spec.json: decode_jpeg, batches of 2, its path into spec[len].
 * Returns 0 or a negative errno. */
int fx_decode_job_files(const char *root, int n, uint32_t w, uint32_t h, char *spec, size_t len);

/* Opens spec over data_root with threads executor threads and makes the
 * job look remote. NULL with err filled on failure. */
sluice_job_t *fx_remote_job_open(const char *spec, const char *data_root, unsigned threads,
                                 char *err, size_t errlen);
/* Takes the placeholder and any fetcher slots set by hand (no thread
 * behind them) back off the job, then sluice_close: it frees what is
 * still queued. */
void fx_remote_job_close(sluice_job_t *job);

#endif
