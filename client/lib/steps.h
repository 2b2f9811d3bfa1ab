/* steps: what a training step costs, fitted from the step times the loop
 * reports (sluice_report_step) -- the trainer model of balanced batching,
 * seconds = a tokens + b tokens^2 + c tiles + d samples summed over the
 * step's samples. The samples of the batches handed out since the last
 * report make the step (their real shapes, from the records). The error is
 * measured out of sample: each report is predicted by the fit of the
 * reports before it. Training-loop thread only. */
#ifndef CL_STEPS_H
#define CL_STEPS_H

#include <stdint.h>

#include "client/lib/sluice.h"

#define CL_STEPS_NPARAM 4
#define CL_STEPS_MIN_FIT 8 /* reports before the model is fitted */

typedef struct cl_steps_s {
    double acc[CL_STEPS_NPARAM]; /* the step being consumed */
    double xtx[CL_STEPS_NPARAM * CL_STEPS_NPARAM], xty[CL_STEPS_NPARAM];
    uint64_t n;
    double coef[CL_STEPS_NPARAM];
    int fitted;
    double abs_err, sum_y; /* of reports predicted before they were added */
} cl_steps_t;

/* Adds a handed-out batch's samples to the current step (records only;
 * other batches count samples). */
void cl_steps_add_batch(cl_steps_t *s, const sluice_batch_t *b);
/* The current step took seconds: one observation. Returns 0 or -EINVAL. */
int cl_steps_report(cl_steps_t *s, double seconds);

#endif
