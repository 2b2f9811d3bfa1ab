/* steps: see steps.h. */
#include "client/lib/steps.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "common/base/lsq.h"
#include "common/sample/record.h"

void cl_steps_add_batch(cl_steps_t *s, const sluice_batch_t *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        double tokens = 0, tiles = 0;
        sl_rec_t r;
        if (b->dtype == SLUICE_DT_RECORD &&
            sl_rec_parse(b->data + b->offsets[i], b->sizes[i], &r, NULL, 0) == 0) {
            const sl_rfield_t *ids = sl_rec_find(&r, SL_RF_INPUT_IDS);
            const sl_rfield_t *tok = sl_rec_find(&r, SL_RF_TOKENS);
            tokens = ids ? ids->h : tok ? tok->h : 0;
            for (uint32_t k = 0; k < r.n; k++) {
                tiles += r.f[k].kind == SL_RF_TILES ? r.f[k].count
                         : r.f[k].kind == SL_RF_IMAGE ? 1
                                                      : 0;
            }
        }
        s->acc[0] += tokens;
        s->acc[1] += tokens * tokens;
        s->acc[2] += tiles;
        s->acc[3] += 1;
    }
}

static double predict(const cl_steps_t *s, const double *x)
{
    double y = 0;
    for (int i = 0; i < CL_STEPS_NPARAM; i++) {
        y += s->coef[i] * x[i];
    }
    return y;
}

int cl_steps_report(cl_steps_t *s, double seconds)
{
    if (!isfinite(seconds) || seconds < 0) {
        return -EINVAL;
    }
    if (s->fitted) {
        s->abs_err += fabs(predict(s, s->acc) - seconds);
        s->sum_y += seconds;
    }
    sl_lsq_add(s->xtx, s->xty, CL_STEPS_NPARAM, s->acc, seconds);
    s->n++;
    memset(s->acc, 0, sizeof(s->acc));
    if (s->n >= CL_STEPS_MIN_FIT && sl_lsq_solve(s->xtx, s->xty, CL_STEPS_NPARAM, s->coef) == 0) {
        s->fitted = 1;
    }
    return 0;
}

int sluice_report_step(sluice_job_t *job, double seconds)
{
    int rc = cl_steps_report(&job->consumer.steps, seconds);
    if (rc < 0) {
        snprintf(job->consumer.last_error, sizeof(job->consumer.last_error),
                 "sluice_report_step: %g is not a step time in seconds", seconds);
    }
    return rc;
}
