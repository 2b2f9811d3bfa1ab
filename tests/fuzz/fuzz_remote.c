/* fuzz_remote: what the client library does with a Batch a worker sent
 * (client/lib/job.c take_remote_sample, then the executor and the batcher): the
 * one place where bytes from a remote peer reach the client's pipeline.
 *
 * The harness opens a real job in local mode (a two-image imagefolder under
 * a temp data root; spec decode_jpeg + random_resized_crop, flip, normalize,
 * to_chw: 4 units), made to look remote the way the control thread would
 * (tests/unit/fixtures_client.h) and, when the input asks, with the Batch's
 * split entered as known. The
 * input is
 *   [u8 flags] [packed Batch]
 * flags bit 0: the Batch's split is in the split table with its range (as
 * after GetAssignment); otherwise it is first heard of from the Batch.
 * The message is queued as the fetcher queues it and the consumer is pumped
 * until everything is processed.
 *
 * Contracts: no crash, leak or UB; the pump only fails with a message; every
 * batch the batcher emits has its samples' bytes inside the batch. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/lib/client_impl.h"
#include "client/lib/sluice.h"
#include "tests/fuzz/fuzz.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_client.h"

#define FZ_REMOTE_MAX_PUMPS 2000

static char fz_remote_root[FX_TMPDIR_LEN];
static char fz_remote_spec[FX_TMPDIR_LEN + 32];

static void fz_remote_cleanup(void)
{
    fx_rmtree(fz_remote_root);
}

static void fz_remote_setup(void)
{
    if (fz_remote_root[0] != '\0') {
        return;
    }
    FZ_CHECK(fx_mkdtemp(fz_remote_root) == 0, "mkdtemp failed");
    atexit(fz_remote_cleanup);
    static const char *const files[] = {"train/a/0.jpg", "train/b/1.jpg"};
    char path[FX_TMPDIR_LEN + 64];
    snprintf(path, sizeof(path), "%s/train", fz_remote_root);
    FZ_CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/train/%c", fz_remote_root, 'a' + i);
        FZ_CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
        snprintf(path, sizeof(path), "%s/%s", fz_remote_root, files[i]);
        fx_jpeg_opts_t o = {.width = 24 + 8 * (uint32_t)i, .height = 16, .seed = (uint32_t)i};
        FZ_CHECK(fx_make_jpeg_file(path, &o) == 0, "cannot write %s", path);
    }
    static const char spec[] =
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 3},\n"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\", \"size\": 8},\n"
        "   {\"op\": \"flip\"}, {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5],\n"
        "    \"std\": [0.25, 0.25, 0.25]}, {\"op\": \"to_chw\"}],\n"
        " \"batch_size\": 2, \"epochs\": 2, \"max_pixels\": 4000000}\n";
    snprintf(fz_remote_spec, sizeof(fz_remote_spec), "%s/spec.json", fz_remote_root);
    FZ_CHECK(fx_write_file(fz_remote_spec, spec, sizeof(spec) - 1) == 0, "cannot write spec");
}

static void fz_remote_batches(sluice_job_t *job)
{
    sl_batch_t *b;
    while ((b = cl_line_pop(job->consumer.line)) != NULL) {
        for (uint32_t i = 0; i < b->n; i++) {
            const sl_sample_meta_t *m = &b->meta[i];
            FZ_CHECK(m->offset <= b->nbytes && m->nbytes <= b->nbytes - m->offset,
                     "sample %u: bytes [%zu, +%zu) outside a %zu-byte batch", i, m->offset,
                     m->nbytes, b->nbytes);
            FZ_CHECK(m->dtype == SL_DT_BYTES ||
                         m->nbytes == (size_t)m->h * m->w * m->c * sl_dtype_size(m->dtype),
                     "sample %u: %zu bytes for %ux%ux%u", i, m->nbytes, m->h, m->w, m->c);
        }
        sl_batch_free(b);
    }
}

int fuzz_remote_one(const uint8_t *data, size_t size)
{
    fz_remote_setup();
    fz_reader_t r = {data, size};
    uint32_t flags = fz_take(&r, 1);
    Sluice__Batch *batch =
        (Sluice__Batch *)protobuf_c_message_unpack(&sluice__batch__descriptor, NULL, r.n, r.p);
    if (batch == NULL) {
        return 0; /* the fetcher drops the stream: "bad message" */
    }
    char err[512];
    sluice_job_t *job = fx_remote_job_open(fz_remote_spec, fz_remote_root, 1, err, sizeof(err));
    FZ_CHECK(job != NULL, "%s", err);
    if (flags & 1) {
        cl_split_t *s = cl_split_add(job, batch->split_id);
        FZ_CHECK(s != NULL, "split table full");
        s->epoch = 0;
        s->begin = 0;
        s->end = job->num_samples;
        s->owner = 1;
        s->state = CL_SPLIT_OPEN;
    }
    cl_msg_t *msg = calloc(1, sizeof(*msg));
    FZ_CHECK(msg != NULL, "out of memory");
    msg->batch = batch;
    msg->worker_id = 1;
    pthread_mutex_lock(&job->mu);
    job->fetch.in_head = job->fetch.in_tail = msg;
    pthread_mutex_unlock(&job->mu);

    for (int i = 0; i < FZ_REMOTE_MAX_PUMPS; i++) {
        pthread_mutex_lock(&job->mu);
        int queued = job->fetch.in_head != NULL;
        pthread_mutex_unlock(&job->mu);
        if (!queued && cl_line_inflight(job->consumer.line) == 0) {
            break;
        }
        int rc = cl_job_pump(job);
        if (rc < 0) {
            const char *why = sluice_last_error(job);
            FZ_CHECK(why[0] != '\0', "pump failed with %d and no message", rc);
            break;
        }
        fz_remote_batches(job);
    }
    fz_remote_batches(job);
    fx_remote_job_close(job);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_remote_one)
