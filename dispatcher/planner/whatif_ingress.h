/* whatif_ingress: the client's ingress the what-if (planner.h
 * disp_planner_whatif) prices added workers against when no probe measured
 * it (issue 39, "Workers wanted", docs/planner.md).
 *
 * The client measures its ingress (PlannerInputs.client_bandwidth) with
 * two or more workers at once; with one, only that worker's path. The
 * what-if used to add each added worker's path to the sum, as if the
 * client's own link took any number of them: on the W2 cluster (every link
 * 200 Mbit/s) the one-worker job's path read 24.1 MB/s, the what-if priced
 * two workers at 48 MB/s, and the jobs with two and three workers measured
 * the client's ingress at 22.6 and 24.2 MB/s -- the client's own link, as
 * the one path had been (docs/benchmarks.md "Workers wanted: the link the
 * what-if did not know").
 *
 * So with fewer than two workers in the input and no ingress measured, the
 * what-if takes the fastest single path measured as the client's ingress:
 * what a probe has seen, never more. A client whose own link is faster than
 * its workers' is under-priced until a job of it runs with two workers
 * (the ingress probe then measures it, and the figure replaces this).
 *
 * Pure arithmetic; the planner's plans are not changed by it. */
#ifndef DISP_WHATIF_INGRESS_H
#define DISP_WHATIF_INGRESS_H

#include "dispatcher/planner/planner.h"

/* The ingress (bytes/s) for the what-if of in: in->client_bandwidth when
 * measured (> 0); else, when in has fewer than two workers, the largest
 * bandwidth measured of a class with a worker, and *ret_assumed = 1; else
 * 0 (no limit). *ret_assumed is 0 unless assumed. */
double disp_wi_ingress(const disp_pl_input_t *in, int *ret_assumed);

#endif
