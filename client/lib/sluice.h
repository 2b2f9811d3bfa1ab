/* sluice.h: the public C API of libsluice, the client shim on the GPU node.
 *
 * A job is opened from a pipeline spec (a file, or its JSON text), either
 * locally (every stage on this host) or through a dispatcher (workers run
 * the offloaded stages; this library runs the rest and its own share).
 * Batches come back in the order the spec asks for, every sample of every
 * epoch exactly once.
 *
 * The library never logs and never exits: every call returns a code and
 * sluice_last_error() says why. One thread at a time may call a job's
 * functions (the training loop's); the library runs its own threads inside. */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_job sluice_job_t;

typedef struct sluice_options {
    const char *dispatcher; /* "HOST:PORT"; NULL runs everything locally */
    const char *data_root;  /* the spec's source path is relative to it; NULL = "." */
    unsigned threads;       /* local decode threads; 0 = online CPUs */
    const char *offload;    /* NULL = the spec's; else off|all|auto|fastflow|K:F */
    unsigned epochs;        /* 0 = the spec's */
    int timeout_ms;         /* RPC deadline; 0 = 10000 */
    double consumer_rate;   /* samples/s the training loop takes, for the planner; 0 = unknown
                             * (measured while running) */
    /* Multi-rank jobs (one consumer per GPU): this process is rank `rank` of
     * world_size (0 = the spec's, default 1) and gets only its equal share
     * of every epoch. The ranks of one job submit the same spec and
     * job_name (NULL = derived from the spec); a restarted rank resumes its
     * share. Works locally too (the share of a --local run). Joining by name
     * needs the job's capability, which every rank derives alike from the
     * name and the environment variable SLUICE_JOB_SECRET (set it to the
     * same random value, >= 16 bytes, for all ranks of one launch), else
     * from the token (docs/protocol.md "Job capabilities"). */
    unsigned rank;
    unsigned world_size;
    const char *job_name;
    /* Dispatcher outages (a restart with --journal): batches from workers
     * keep flowing and calls are retried with capped backoff; the job fails
     * only after the dispatcher has not answered for this long (ms; 0 =
     * 60000). */
    int dispatcher_timeout_ms;
    /* Transport security, NULL = off. PEM paths: any tls_* turns TLS on for
     * every channel (dispatcher and workers), tls_ca = the roots to trust
     * (NULL = the system's); tls_cert + tls_key present a client
     * certificate. token_file: a file holding the cluster's bearer token. */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    const char *token_file;
    /* Fields below were appended later; the order is the ABI (bindings
     * mirror it), so new ones go at the end.
     *
     * Epoch numbering: the job delivers epochs first_epoch .. first_epoch +
     * epochs - 1, each exactly as that epoch of one longer job (the same
     * order and the same random crops: the RNG is keyed by seed, epoch and
     * sample index). An outer per-epoch training loop opens a job of one
     * epoch with first_epoch = its epoch (PyTorch's set_epoch). 0 = from the
     * start; first_epoch + epochs must not exceed SLUICE_MAX_EPOCHS. */
    uint64_t first_epoch;
    /* Non-zero has_seed: seed replaces the spec's source.seed (0..INT64_MAX). */
    int has_seed;
    uint64_t seed;
    /* Resume (docs/protocol.md "Resume"): the states sluice_state_save
     * wrote, one per rank of the run that saved them (any order; a
     * single-rank run's one). The job delivers exactly what they did not
     * consume, from their epoch on, with the same bytes per sample; rank and
     * world_size may differ from the saving run's. The buffers need not
     * outlive sluice_open. n_resume_states 0: start fresh. */
    const char *const *resume_states;
    const size_t *resume_state_lens;
    unsigned n_resume_states;
    /* Stage plugins (docs/plugins.md): the directory whose *.so files this
     * process may run for a spec's "plugin" stages (NULL = $SLUICE_PLUGIN_DIR,
     * else none). The client runs any unit its plan leaves it, so it needs
     * the spec's plugins as the workers do. */
    const char *plugin_dir;
    /* Multi-rank jobs: the secret the ranks of this launch share (>= 16
     * bytes, the same on every rank; need not outlive sluice_open), from
     * which each job's capability is derived with its name. NULL = the
     * environment's: SLUICE_JOB_SECRET, else torchrun's TORCHELASTIC_RUN_ID
     * (with the token, if any), else the token alone, else none -- then
     * sluice_secret_warning says so. The Python binding fills it under an
     * initialized torch.distributed group (rank 0 draws, broadcasts). */
    const char *job_secret;
    /* URL sources (docs/sources.md "Remote sources"): the spec's source path,
     * its shards, a filelist's or manifest's entries may be http://,
     * https:// or s3:// URLs. remote_roots: comma-separated URL prefixes this
     * process may fetch (NULL = $SLUICE_REMOTE_ROOTS, else none: a URL is
     * refused, -EINVAL naming it and the setting). cache_dir: the shard
     * cache (NULL = $SLUICE_CACHE_DIR, else $XDG_CACHE_HOME/sluice or
     * ~/.cache/sluice); cache_bytes: its bound (0 = $SLUICE_CACHE_BYTES,
     * else 10 GiB). S3 credentials are this host's AWS_* variables or
     * ~/.aws/credentials, never sent to the dispatcher or workers. */
    const char *remote_roots;
    const char *cache_dir;
    uint64_t cache_bytes;
    /* Non-zero: an auto or fastflow job profiles before it starts however
     * short it is. 0 = the environment's SLUICE_ALWAYS_PROFILE ("1": on),
     * else the short-job guard decides: a job too short to repay profiling
     * starts on `off` or `all`, whichever is estimated faster
     * (docs/planner.md "The short-job guard"). For a job run to leave its
     * measured profile for the next jobs of the spec, or to test planning. */
    int always_profile;
} sluice_options_t;

/* Epoch numbers stay below this (first_epoch + epochs at most). */
#define SLUICE_MAX_EPOCHS 4294967296ull

enum { SLUICE_DT_BYTES = 0, SLUICE_DT_UINT8 = 1, SLUICE_DT_FLOAT32 = 2 };
/* Multimodal specs (webdataset, jsonl sources): every sample is a record
 * (docs/records.md) and sluice_batch_records lays a batch out for a model. */
enum { SLUICE_DT_UINT32 = 3, SLUICE_DT_RECORD = 4 };
enum { SLUICE_LAYOUT_HWC = 0, SLUICE_LAYOUT_CHW = 1 };

/* A batch: n samples' bytes back to back in data. When uniform, every sample
 * has dtype/layout/h/w/c, so data is an [n, h, w, c] (HWC) or [n, c, h, w]
 * (CHW) array. Owned by the library until sluice_release_batch. */
typedef struct sluice_batch {
    uint64_t epoch;
    uint32_t n;
    int uniform;
    int dtype, layout;
    uint32_t h, w, c;         /* of sample 0 */
    const uint8_t *data;
    size_t nbytes;
    const int32_t *labels;    /* n entries */
    const uint64_t *indices;  /* n sample indices in the source */
    const size_t *offsets;    /* n byte offsets into data */
    const size_t *sizes;      /* n byte sizes */
    void *priv;
    /* The normalization the consumer applies on its training device (the
     * spec's normalize has "on": "device"). norm_on_device = 1: data is
     * uint8, as Sluice made it (digests are of it), and the consumer computes
     * (x / 255 - norm_mean[ch]) / norm_std[ch] per channel ch. 0: nothing to
     * apply (the arrays are zero). */
    int norm_on_device;
    float norm_mean[3];
    float norm_std[3];
    /* Appended later (the order is the ABI). Private: sluice_batch_records'
     * layout, built on first call and freed with the batch. */
    void *priv_records;
    /* n positions of the samples in this rank's epoch order. With
     * "batching": "balanced", position p is in step p / step_samples and
     * microbatch (p % step_samples) / batch_size of this rank; step_samples
     * is 0 for count-based batches. */
    const uint64_t *positions;
    uint32_t rank;
    uint32_t step_samples;
    uint32_t batch_size;
    /* Appended later. The spec's "batch_transforms" (MixUp / CutMix with
     * torchvision's semantics, docs/reference/spec.md): the images in data
     * are already mixed, and soft_labels [n x num_classes] (float32, owned
     * by the batch) replace labels for training (labels stay the samples'
     * own). mix_op is what applied to this batch (SLUICE_MIX_*), mix_lambda
     * the weight of each sample itself (for CutMix corrected to the box:
     * 1 - box area / (h * w)), mix_box the CutMix box x1, y1, x2, y2 (end
     * exclusive) pasted from sample j - 1 (sample 0: the last). Without
     * batch transforms soft_labels is NULL, num_classes 0, mix_lambda 1. */
    const float *soft_labels;
    uint32_t num_classes;
    int mix_op;
    double mix_lambda;
    uint32_t mix_box[4];
    /* Appended later. "batching": "packed" (docs/reference/spec.md): this
     * batch is one pack, microbatch `microbatch` of global step `step` of
     * this rank; the loss-normalisation counts are the pack's tokens, this
     * rank's tokens in the step and the whole step's over every rank (from
     * the schedule's predicted sequence lengths). All 0 otherwise. */
    uint64_t step;
    uint32_t microbatch;
    uint64_t pack_tokens, rank_step_tokens, global_step_tokens;
    /* Appended later. A random_erasing after a normalize with "on":
     * "device" (docs/reference/spec.md): the consumer applies these nerase
     * boxes after normalizing, in order (a later box over an earlier one
     * wins). data holds the pixels unerased, as digests do. */
    const struct sluice_erase *erase;
    uint32_t nerase;
} sluice_batch_t;

/* One erase: sample `sample`'s rows [y, y + h) and columns [x, x + w), every
 * channel c, become value[c] (in normalized units: 0 is the mean colour,
 * torchvision's value=0); when random is 1 they become standard normal
 * values instead, drawn by the consumer from a generator seeded with seed.
 * img_h x img_w is the sample's image (for batches whose samples differ in
 * shape). */
typedef struct sluice_erase {
    uint64_t seed;
    uint32_t sample;
    uint32_t x, y, w, h;
    int random;
    float value[3];
    uint32_t img_h, img_w;
} sluice_erase_t;

enum { SLUICE_MIX_NONE = 0, SLUICE_MIX_MIXUP = 1, SLUICE_MIX_CUTMIX = 2 };

/* A batch of records laid out for a model: ragged arrays with offsets (the
 * cu_seqlens form varlen attention kernels take). Sample i's items of a
 * kind are [X_offsets[i], X_offsets[i + 1]) of that kind's array. Built in
 * one pass over the batch; decoded untiled images stay where they are in
 * batch->data (image_data gives their offsets). Owned by the batch. */
typedef struct sluice_records {
    uint32_t n;
    const char *const *keys;      /* n NUL-terminated sample keys */
    const char *const *metas;     /* n JSON objects (the sample's metadata, "{}" if none) */
    /* The text and its token ids (tokenize); tokens is NULL without tokenize. */
    const char *text;             /* all texts back to back (UTF-8, no NULs added) */
    const int64_t *text_offsets;  /* n + 1 byte offsets */
    const int32_t *tokens;
    const int64_t *token_offsets; /* n + 1 */
    /* The sequence the model sees (template); NULL without template. */
    const int32_t *input_ids;
    const int64_t *cu_seqlens;    /* n + 1 */
    /* n: input_ids' length, else the tokens', else 0: the sequence length on the GPU. */
    const int64_t *seq_lens;
    /* Every image of the batch in sample order. */
    uint64_t nimages;
    const int64_t *image_offsets;   /* n + 1 */
    const uint32_t *image_hw;       /* nimages x 2: each image's decoded height, width
                                     * (0, 0 while still encoded) */
    /* Untiled images: byte offset of the pixels (or encoded bytes) in batch->data,
     * their h, w, c and dtype/layout; SIZE_MAX offset where the image was tiled. */
    const size_t *image_data;
    const size_t *image_nbytes;
    const uint32_t *image_shape;    /* nimages x 3: h, w, c */
    const int *image_dtype;         /* nimages SLUICE_DT_* */
    const int *image_layout;        /* nimages SLUICE_LAYOUT_* */
    /* Tiles (image_tiles): [ntiles, c, tile, tile] CHW, tiles_dtype; NULL without. */
    const void *tiles;
    int tiles_dtype;
    uint64_t ntiles;
    uint32_t tile, tile_c;
    const uint32_t *tiles_per_image; /* nimages */
    const int64_t *tile_offsets;     /* n + 1: sample i's tiles */
    /* Appended later (the order is the ABI). The batch as one packed
     * sequence for varlen attention (flash_attn_varlen_func's cu_seqlens_q/k
     * and max_seqlen_q/k); NULL / 0 without template. */
    const int32_t *labels;         /* input_ids' length: template's labels (its ignore_index
                                    * where not trained, unshifted); NULL without labels */
    const int32_t *position_ids;   /* input_ids' length: 0, 1, ... restarting per sample */
    const int32_t *cu_seqlens_i32; /* n + 1: cu_seqlens as int32 */
    int32_t max_seqlen;            /* the longest sample's input_ids */
} sluice_records_t;

typedef struct sluice_stats {
    uint64_t delivered; /* samples in the batches sluice_next_batch returned */
    uint64_t skipped;
    uint64_t duplicates_dropped;
    uint64_t from_local, from_remote;
    double seconds;
    double wait_seconds;   /* time next_batch spent waiting for data */
    uint32_t plan_split;
    double plan_local_share;
    char plan_mode[64];
    uint64_t job_id;
    double plan_predicted;    /* samples/s the planner predicts; 0 = no prediction */
    char plan_binding[32];    /* the resource it says binds */
    uint32_t plan_version;    /* 1, +1 per re-plan */
    double profile_seconds;   /* spent profiling before submission */
    /* What the per-sample costs sent for the split cut came from: "header
     * model", "file size", or "" (none sent: multi-rank or huge jobs). */
    char sample_costs[16];
    /* Appended later (the order is the ABI). The job's epochs:
     * first_epoch .. first_epoch + epochs - 1. */
    uint64_t first_epoch;
    uint32_t epochs;
    /* Non-empty: the dispatcher gives this client remote work to run itself,
     * and why ("every live worker refused the job (worker 2: ...)", "no live
     * worker for 5000 ms"); the plan it reports is unchanged. */
    char fallback[256];
    /* Appended later. The trainer model fitted from sluice_report_step:
     * step seconds = coef[0] tokens + coef[1] tokens^2 + coef[2] tiles +
     * coef[3] samples over the step's samples; trainer_fitted after 8
     * reports; trainer_error = mean |predicted - reported| / mean reported
     * over the reports made after the fit (each predicted before it was
     * added), 0 before. Balanced batching's spec "model" takes these. */
    uint64_t trainer_steps;
    int trainer_fitted;
    double trainer_coef[4];
    double trainer_error;
    /* Balanced batching: over the full steps of the job's first epoch, this
     * rank's predicted load per step and the schedule's imbalance per step
     * (max / mean over ranks), mean and max; 0 for count-based batches. */
    double step_load, step_imbalance, step_imbalance_max;
    /* Appended later. 1: workers compress the samples they send this job
     * (the planner chose it because the link binds, or the spec says
     * "compress": "zstd"); the client decompresses, the bytes are the same. */
    int plan_compress;
    /* Appended later. Packed batching: the first epoch's mean pack fill
     * (tokens / token budget, full steps) and its samples longer than a
     * pack's budgets; 0 otherwise. */
    double pack_fill;
    uint64_t pack_oversize;
    /* Appended later. The short-job guard's verdict (an auto or fastflow
     * single-rank job; docs/planner.md "The short-job guard"): guard_choice
     * "profile", "off" or "all" ("" = not asked: a fixed plan, several
     * ranks, always_profile, or it failed), guard_reason "pays", "long",
     * "link", "short" or "unknown"; its estimates (samples/s everything
     * local, remote, both at once; the seconds profiling would take and
     * could gain) and the wall seconds the guard itself took. */
    char guard_choice[8];
    char guard_reason[8];
    double guard_rate_off, guard_rate_all, guard_rate_both;
    double guard_profile_sec, guard_gain_sec, guard_seconds;
} sluice_stats_t;

/* A skipped sample (a file that is not a JPEG, truncated, ...). */
typedef struct sluice_skip {
    uint64_t epoch;
    uint64_t index;     /* the sample's index in the source */
    char reason[16];    /* as sluice_skip_counts names it: "not_jpeg", "corrupt", ... */
    char path[256];     /* under the data root; "shard.tar:KEY" for tar members */
    char detail[256];   /* what the reader or decoder said */
} sluice_skip_t;

/* How many skipped samples a job remembers (the most recent ones). */
#define SLUICE_RECENT_SKIPS 64

/* Opens a job. Returns 0, -EINVAL for a bad spec or options (err names
 * file:line:field), other negative codes for runtime failures. */
int sluice_open(const char *spec_path, const sluice_options_t *opts, sluice_job_t **ret,
                char *err, size_t errlen);
/* The same from the spec's JSON text (len bytes, need not end in NUL);
 * name stands for the file in error messages ("name:line: field: why";
 * NULL = "<spec>"). */
int sluice_open_json(const char *json, size_t len, const char *name,
                     const sluice_options_t *opts, sluice_job_t **ret, char *err,
                     size_t errlen);
/* Next batch: 0 and *ret set; 1 when every epoch has been delivered; a
 * negative code on failure (sluice_last_error). */
int sluice_next_batch(sluice_job_t *job, sluice_batch_t **ret);
void sluice_release_batch(sluice_job_t *job, sluice_batch_t *batch);
const char *sluice_last_error(const sluice_job_t *job);
void sluice_get_stats(const sluice_job_t *job, sluice_stats_t *ret);
/* NULL, or why the job is open to strangers: a multi-rank job whose ranks
 * share no secret (no job_secret, SLUICE_JOB_SECRET, torchrun run id or
 * token), so anyone who knows its name can join it and take its samples.
 * The library never prints: the CLI and the Python binding warn with it.
 * Valid as long as the job. */
const char *sluice_secret_warning(const sluice_job_t *job);
/* Why the job's auto (or fastflow) plan keeps everything on this machine
 * (split 0, local share 1), as the dispatcher's planner says it: "no
 * worker: none registered", "workers share the client's host: ...",
 * "workers slower than the client: ...", "link too slow: ...". Copies it
 * into buf (NUL-terminated, cut to len) and returns its length; 0 when the
 * plan is not all local for a reason (a fixed plan, a local job, work
 * offloaded). */
int sluice_local_reason(const sluice_job_t *job, char *buf, size_t len);
/* Skipped samples by reason: fills up to n (name, count) pairs, returns how
 * many. With names or counts NULL it fills nothing and returns how many
 * reasons this library has (size the arrays with it: a newer library may
 * have more than a caller built for). */
int sluice_skip_counts(const sluice_job_t *job, const char **names, uint64_t *counts, int n);
/* The most recent skipped samples, oldest first (at most
 * SLUICE_RECENT_SKIPS are kept): fills up to n, returns how many. */
int sluice_recent_skips(const sluice_job_t *job, sluice_skip_t *out, int n);
/* URL objects the job holds to one version (jsonl images, filelist entries
 * named by URL: docs/sources.md "One version per job"): how many are pinned
 * (a resumed job's saved ones included) and how many were seen after the
 * table was full (262 144) and so were delivered unchecked. */
void sluice_url_pins(const sluice_job_t *job, uint64_t *ret_pinned, uint64_t *ret_unpinned);
/* The training loop reports how long its last step took (seconds): the
 * samples of the batches taken since the previous report. Fits the trainer
 * model balanced batching predicts with (sluice_stats_t.trainer_*).
 * Returns 0, -EINVAL for a negative or non-finite time. */
int sluice_report_step(sluice_job_t *job, double seconds);
/* The record layout of a batch of a multimodal spec (built once, valid
 * until the batch is released). Returns 0, -EINVAL when the batch's samples
 * are not records, -EBADMSG for a damaged record, -ENOMEM. */
int sluice_batch_records(sluice_job_t *job, sluice_batch_t *batch, const sluice_records_t **ret);
/* This rank's position now -- what the batches sluice_next_batch handed out
 * consumed -- as a small text value to keep with a model checkpoint (a few
 * KB, whatever the epoch's size). Signed with the cluster token when the job
 * has one (token_file), else checksummed. *ret is malloc'd and
 * NUL-terminated (*ret_len bytes without the NUL); free it with
 * sluice_state_free. Returns 0, or a negative errno (sluice_last_error). */
int sluice_state_save(sluice_job_t *job, char **ret, size_t *ret_len);
void sluice_state_free(char *state);
/* Ends the job (tells the dispatcher) and frees everything. NULL ok. */
void sluice_close(sluice_job_t *job);

/* Appended later: what a job delivers, for LR schedules and progress bars.
 *
 * This rank's share of epoch `epoch`: of its P positions (the
 * DistributedSampler share rank_padding gives: floor(n / world) for "drop",
 * ceil(n / world) for "pad", whose repeats count; n for one rank; for an
 * epoch a resumed job continues, what is left of it) *ret_batches batches
 * (they never span epochs: ceil(P / batch_size), floor with drop_last)
 * holding *ret_samples samples (P; with drop_last, batches x batch_size:
 * the remainder is not delivered). Balanced batching: the same counts (every rank
 * gets equal counts per step); a batch is one microbatch and "microbatches"
 * consecutive batches one step. SLUICE_EPOCH_FULL: an epoch no resume
 * shortens. Skipped samples (unreadable files) are not delivered, so an
 * epoch that skips some delivers fewer samples (and maybe batches) than
 * counted. Returns 0, -EINVAL (NULL arguments). */
#define SLUICE_EPOCH_FULL UINT64_MAX
int sluice_epoch_counts(const sluice_job_t *job, uint64_t epoch, uint64_t *ret_samples,
                        uint64_t *ret_batches);
/* The same summed over the job's epochs (first_epoch .. first_epoch +
 * epochs - 1): what iterating the job to its end delivers. */
int sluice_job_counts(const sluice_job_t *job, uint64_t *ret_samples, uint64_t *ret_batches);
/* The source's classes: labels are 0 .. sluice_num_classes - 1; an
 * imagefolder's are its class directories, sorted, and sluice_class_name
 * gives their names (torchvision ImageFolder's classes[label]); NULL for
 * label out of range and for kinds whose labels have no names (their count
 * is the largest label + 1). The name is owned by the job. */
uint32_t sluice_num_classes(const sluice_job_t *job);
const char *sluice_class_name(const sluice_job_t *job, uint32_t label);
/* Mixed jobs (a spec with "mix", docs/mixing.md): the number of sources (0
 * for a job that reads one "source"), source j's name and its share of the
 * first weights (before any schedule; NULL / 0 for j out of range), the
 * positions of an epoch, and the source sample index (a batch's indices[i])
 * came from: 0 .. nsources - 1, or -1 (not mixed, out of range). */
uint32_t sluice_mix_nsources(const sluice_job_t *job);
const char *sluice_mix_source_name(const sluice_job_t *job, uint32_t source);
double sluice_mix_source_share(const sluice_job_t *job, uint32_t source);
uint64_t sluice_mix_samples_per_epoch(const sluice_job_t *job);
int sluice_sample_source(const sluice_job_t *job, uint64_t index);
/* Opens a job only to describe it -- the functions above, sluice_get_stats
 * -- before running it: the spec and options are checked and the source is
 * indexed exactly as sluice_open does (same errors), but no dispatcher is
 * contacted and nothing runs; sluice_next_batch and sluice_state_save
 * answer -EINVAL. json NULL: spec_path is the spec file; else json (len
 * bytes) is the spec and spec_path its name in messages (NULL = "<spec>").
 * Close it with sluice_close. */
int sluice_describe(const char *spec_path, const char *json, size_t len,
                    const sluice_options_t *opts, sluice_job_t **ret, char *err, size_t errlen);
/* The library's version, e.g. "0.1.0" (the same as `sluice --version`). */
const char *sluice_version(void);

#ifdef __cplusplus
}
#endif
#endif
