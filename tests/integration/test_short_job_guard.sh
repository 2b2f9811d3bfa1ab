#!/usr/bin/env bash
# test: alone (run-integration.sh): the guard decides from profiling time measured here
# The short-job guard (issue 39 part 4, client/lib/short_job.h): an auto job
# too short to repay profiling starts on the better fixed policy instead.
# Here the workers (2 x 4 threads) far outrun the client (1 thread) on a
# costly spec (whole images decoded, then a wide Gaussian blur), so for one
# epoch profiling (~1 s and more) could save less than it costs: `sluice plan --explain` says
# a job starts on `all`, and a one-epoch auto job runs `all` (the
# dispatcher planned nothing: no "planned (" line) with the --local digests.
# A long job of the same spec would profile; --always-profile (or
# SLUICE_ALWAYS_PROFILE=1) makes the short one profile. Speed is the
# benchmark's (scripts/bench-first-plan), not this test's.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 4 40
spec() { # spec FILE EPOCHS
    cat >"$1" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 7},
 "stages": [{"op": "decode_jpeg"}, {"op": "gaussian_blur", "kernel_size": 31, "sigma": [3.0, 3.0]},
            {"op": "resize", "size": [96, 96]}, {"op": "to_chw"}],
 "batch_size": 8, "epochs": $2, "offload": "auto"}
JSON
}
spec "$TMP/short.json" 1
spec "$TMP/long.json" 200

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 3000 --heartbeat-ms 100
for w in W1 W2; do
    start_daemon $w "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --data-root "$TMP/data" --threads 4 --http none
done
wait_live_workers "$D_HTTP" 2

# The job first, while nothing of the spec is cached (a plan caches its
# client profile: a later job's profiling would then be cheap).
"$BIN/sluice" run "$TMP/short.json" --local --data-root "$TMP/data" --quiet --threads 1 \
    --digests "$TMP/local" >/dev/null || fail "sluice run --local failed"
before=$(grep -c 'planned (' "$TMP/D.err" || true)
"$BIN/sluice" run "$TMP/short.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --digests "$TMP/short" --json >"$TMP/short.run.json" || fail "short job failed"
/usr/bin/python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["mode"] == "all", p
print("short auto job: ran %s" % p["mode"])' "$TMP/short.run.json" ||
    fail "the short auto job did not start on all: $(cat "$TMP/short.run.json")"
[ "$(grep -c 'planned (' "$TMP/D.err" || true)" = "$before" ] ||
    fail "the dispatcher planned the short job: $(grep 'planned (' "$TMP/D.err" | tail -1)"
sort "$TMP/local" >"$TMP/local.s"
sort "$TMP/short" >"$TMP/short.s"
cmp -s "$TMP/local.s" "$TMP/short.s" || fail "the short job's digests differ from --local"
"$BIN/sluice" plan "$TMP/short.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --explain >"$TMP/short.txt" || fail "sluice plan --explain (short) failed"
grep '^short-job guard:' "$TMP/short.txt" || fail "no short-job guard line"
grep -q '^short-job guard: 160 samples, .*a job starts on `all` without profiling$' \
    "$TMP/short.txt" || fail "the short job would profile: $(grep guard "$TMP/short.txt")"
"$BIN/sluice" plan "$TMP/long.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --explain >"$TMP/long.txt" || fail "sluice plan --explain (long) failed"
grep '^short-job guard:' "$TMP/long.txt"
grep -q '^short-job guard: 32000 samples, .*: a job profiles' "$TMP/long.txt" ||
    fail "the long job would not profile: $(grep guard "$TMP/long.txt")"

# --always-profile (and SLUICE_ALWAYS_PROFILE=1) skip the guard: the short
# job profiles and the dispatcher plans it, with the --local digests; a
# value other than "1" leaves the guard on.
always() { # always NAME [FLAGS...]
    local name=$1
    shift
    local n0
    n0=$(grep -c 'planned (' "$TMP/D.err" || true)
    "$BIN/sluice" run "$TMP/short.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 1 --digests "$TMP/$name" --json "$@" >"$TMP/$name.run.json" ||
        fail "$name: the job failed"
    /usr/bin/python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["mode"] == "auto" and p["predicted_samples_per_sec"] > 0, p
print("%s: planned (split %d, local share %.2f), profiled in %.2f s" %
      (sys.argv[2], p["split"], p["local_share"], p["profile_seconds"]))' \
        "$TMP/$name.run.json" "$name" || fail "$name: no plan: $(cat "$TMP/$name.run.json")"
    [ "$(grep -c 'planned (' "$TMP/D.err" || true)" -gt "$n0" ] ||
        fail "$name: the dispatcher planned nothing"
    sort "$TMP/$name" >"$TMP/$name.s"
    cmp -s "$TMP/local.s" "$TMP/$name.s" || fail "$name: digests differ from --local"
}
SLUICE_ALWAYS_PROFILE=yes "$BIN/sluice" run "$TMP/short.json" --dispatcher "$D_GRPC" \
    --data-root "$TMP/data" --quiet --threads 1 --json >"$TMP/yes.run.json" ||
    fail "SLUICE_ALWAYS_PROFILE=yes: the job failed"
grep -q '"mode": *"all"' "$TMP/yes.run.json" ||
    fail "SLUICE_ALWAYS_PROFILE=yes skipped the guard: $(cat "$TMP/yes.run.json")"
always flag --always-profile
SLUICE_ALWAYS_PROFILE=1 always env
"$BIN/sluice" plan "$TMP/short.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --explain --always-profile >"$TMP/forced.txt" ||
    fail "sluice plan --always-profile failed"
grep -q '^short-job guard: not assessed (always profile' "$TMP/forced.txt" ||
    fail "plan --always-profile: $(grep guard "$TMP/forced.txt")"

echo "PASS"
