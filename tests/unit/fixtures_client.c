#include "tests/unit/fixtures_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "tests/unit/fixtures.h"

/* job->disp points here: never dereferenced on the consumer's path. */
static int fx_placeholder_channel;

int fx_decode_job_files(const char *root, int n, uint32_t w, uint32_t h, char *spec, size_t len)
{
    int rc = fx_make_imagefolder(root, n, w, h);
    if (rc < 0) {
        return rc;
    }
    static const char json[] = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
                               " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 2}";
    if (snprintf(spec, len, "%s/spec.json", root) >= (int)len) {
        return -ENAMETOOLONG;
    }
    return fx_write_file(spec, json, sizeof(json) - 1);
}

sluice_job_t *fx_remote_job_open(const char *spec, const char *data_root, unsigned threads,
                                 char *err, size_t errlen)
{
    sluice_options_t opts = {.data_root = data_root, .threads = threads};
    sluice_job_t *job = NULL;
    if (sluice_open(spec, &opts, &job, err, errlen) != 0) {
        return NULL;
    }
    job->disp = (sl_rpc_channel_t *)(void *)&fx_placeholder_channel;
    if (job->local_pending.cap == 0) { /* made by a remote open only */
        sl_ring_free(&job->local_pending);
        if (sl_ring_init(&job->local_pending, sizeof(uint64_t), 64) < 0) {
            snprintf(err, errlen, "out of memory");
            fx_remote_job_close(job);
            return NULL;
        }
    }
    return job;
}

void fx_remote_job_close(sluice_job_t *job)
{
    if (job == NULL) {
        return;
    }
    job->disp = NULL; /* sluice_close must not free the placeholder */
    memset(job->fetch.fetchers, 0, sizeof(job->fetch.fetchers));
    sluice_close(job);
}
