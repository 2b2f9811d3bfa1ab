/* The dispatcher-status fixture shared by test_dispatcher_status.c and
 * test_dispatcher_status_jobs.c: a dispatcher and its status history on a
 * fake clock (now, advanced by the tests), driven through the service
 * functions as workers and clients would. Splits are 10 samples. */
#ifndef TESTS_UNIT_FIXTURES_STATUS_H
#define TESTS_UNIT_FIXTURES_STATUS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatcher/disp.h"
#include "dispatcher/status/status.h"

/* A one-epoch job processed on the client (no plan, no prediction). */
#define FX_ST_SPEC_OFF                                                                             \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"                  \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"            \
    " \"batch_size\": 4, \"epochs\": 1, \"offload\": \"off\"}"

typedef struct fx_st_s {
    disp_t d;
    disp_status_t *st;
    int64_t now;
} fx_st_t;

void fx_st_init(fx_st_t *e);
void fx_st_free(fx_st_t *e);
/* Submits a job of n samples: spec NULL is FX_ST_SPEC_OFF; name is what the
 * client sends as spec_name. Returns its id. */
uint64_t fx_st_submit_spec(fx_st_t *e, uint64_t n, const char *spec, const char *name);
uint64_t fx_st_submit(fx_st_t *e, uint64_t n); /* FX_ST_SPEC_OFF as "off.json" */
/* The client's poll: up to max ids of the splits it holds. */
size_t fx_st_client_splits(fx_st_t *e, uint64_t job, uint64_t *ids, size_t max);
/* The client acknowledges n splits, skipped of their samples for reason. */
void fx_st_ack(fx_st_t *e, uint64_t job, uint64_t *ids, size_t n, const char *reason,
               uint64_t skipped);
void fx_st_close_job(fx_st_t *e, uint64_t job);
/* /status at e->now, parsed (the caller decrefs). */
json_t *fx_st_status(fx_st_t *e);
/* The job object of id in doc (open or recently closed); NULL if absent. */
json_t *fx_st_job(json_t *doc, uint64_t id);

#endif
