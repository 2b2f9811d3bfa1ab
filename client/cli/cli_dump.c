/* sluice run --dump: one JSON line per delivered sample, so a user sees
 * exactly what the pipeline produced for a multimodal spec. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/cli/cli.h"

static json_t *ids_json(const int32_t *ids, int64_t from, int64_t to)
{
    json_t *a = json_array();
    for (int64_t k = from; ids != NULL && k < to; k++) {
        json_array_append_new(a, json_integer(ids[k]));
    }
    return a;
}

/* Text from a data set: json_string refuses what is not UTF-8. */
static json_t *str_json(const char *s)
{
    json_t *v = json_string(s);
    return v != NULL ? v : json_string("(not utf-8)");
}

static json_t *sample_json(const sluice_job_t *job, const sluice_batch_t *b,
                           const sluice_records_t *r, uint32_t i)
{
    json_t *j = json_object();
    /* A mixed job's lines name their source (one source's keep their form). */
    int from = sluice_sample_source(job, b->indices[i]);
    if (from >= 0) {
        json_object_set_new(j, "source", json_string(sluice_mix_source_name(job, (uint32_t)from)));
    }
    json_object_set_new(j, "epoch", json_integer((json_int_t)b->epoch));
    json_object_set_new(j, "index", json_integer((json_int_t)b->indices[i]));
    json_object_set_new(j, "key", str_json(r->keys[i]));
    json_object_set_new(j, "label", json_integer(b->labels[i]));
    json_object_set_new(j, "tokens", ids_json(r->tokens, r->token_offsets[i],
                                              r->token_offsets[i + 1]));
    json_t *images = json_array(), *tiles = json_array();
    for (int64_t k = r->image_offsets[i]; k < r->image_offsets[i + 1]; k++) {
        json_array_append_new(images, json_pack("[I,I]", (json_int_t)r->image_hw[2 * k],
                                                (json_int_t)r->image_hw[2 * k + 1]));
        json_array_append_new(tiles, json_integer(r->tiles_per_image[k]));
    }
    json_object_set_new(j, "images", images);
    json_object_set_new(j, "tiles", tiles);
    json_object_set_new(j, "seq_len", json_integer((json_int_t)r->seq_lens[i]));
    if (b->step_samples > 0) {
        uint64_t p = b->positions[i];
        json_object_set_new(j, "rank", json_integer(b->rank));
        json_object_set_new(j, "step", json_integer((json_int_t)(p / b->step_samples)));
        json_object_set_new(j, "microbatch",
                            json_integer((json_int_t)(p % b->step_samples / b->batch_size)));
    }
    return j;
}

int sl_cli_write_dump(FILE *f, sluice_job_t *job, sluice_batch_t *batch)
{
    const sluice_records_t *r = NULL;
    if (batch->dtype != SLUICE_DT_RECORD) {
        errno = EINVAL;
        return -1;
    }
    if (sluice_batch_records(job, batch, &r) < 0) {
        errno = EBADMSG;
        return -1;
    }
    for (uint32_t i = 0; i < batch->n; i++) {
        json_t *j = sample_json(job, batch, r, i);
        char *line = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        int bad = line == NULL || fprintf(f, "%s\n", line) < 0;
        free(line);
        if (bad) {
            return -1;
        }
    }
    return 0;
}
