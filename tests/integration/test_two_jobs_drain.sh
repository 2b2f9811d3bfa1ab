#!/usr/bin/env bash
# Two jobs at once on the same workers (different specs and seeds, so split
# ids collide across jobs): both digest sets equal their --local runs. Then
# the same two jobs again while one worker gets SIGTERM mid-job: it drains
# (finishes what it started, keeps serving Fetch), tells the dispatcher it is
# leaving, exits 0, and both jobs complete with the --local digests long
# before worker_timeout (60 s here) could have re-assigned anything.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 20
write_train_spec "$TMP/a.json" 4
cat >"$TMP/b.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 13},
 "stages": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 48},
            {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}],
 "batch_size": 6, "epochs": 4}
JSON
for j in a b; do
    "$BIN/sluice" run "$TMP/$j.json" --local --data-root "$TMP/data" --quiet --threads 2 \
        --digests "$TMP/local_$j"
    sort "$TMP/local_$j" >"$TMP/local_$j.s"
    awk '$1 < 2' "$TMP/local_$j.s" >"$TMP/local2_$j.s"
done
cmp -s "$TMP/local_a.s" "$TMP/local_b.s" && fail "the two specs give the same digests"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 6 --heartbeat-ms 100 --worker-timeout-ms 60000
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --log-level info
done

# run_job NAME SPEC OUT [args...]: in the background; pid in $job_pid.
run_job() {
    local spec=$1 out=$2
    shift 2
    "$BIN/sluice" run "$spec" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 1 --offload all --digests "$out" "$@" &
    job_pid=$!
    PIDS+=("$job_pid")
}

# ---- two concurrent jobs
run_job "$TMP/a.json" "$TMP/c_a" --epochs 2
pa=$job_pid
run_job "$TMP/b.json" "$TMP/c_b" --epochs 2
pb=$job_pid
wait "$pa" || fail "job a failed"
wait "$pb" || fail "job b failed"
for j in a b; do
    sort "$TMP/c_$j" | cmp -s - "$TMP/local2_$j.s" ||
        fail "concurrent job $j: digests differ from --local"
done
for i in 1 2; do
    h=W${i}_HTTP
    n=$(curl -sf "http://${!h}/status" | /usr/bin/python3 -c \
        'import json,sys; print(json.load(sys.stdin)["jobs_accepted"])')
    [ "$n" -eq 2 ] || fail "worker $i ran $n of the two jobs"
done
echo "two concurrent jobs on the same workers: both digest sets identical to --local"

# ---- the same, and worker 1 is told to stop mid-job
run_job "$TMP/a.json" "$TMP/d_a"
pa=$job_pid
run_job "$TMP/b.json" "$TMP/d_b"
pb=$job_pid
for _ in $(seq 1 200); do
    [ -f "$TMP/d_a" ] && [ "$(wc -l <"$TMP/d_a")" -ge 60 ] && break
    sleep 0.05
done
kill -0 "$pa" 2>/dev/null || fail "job a ended before the worker could be stopped"
busy=$(curl -sf "http://$W1_HTTP/status" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
print(sum(j["splits_queued"] + j["splits_running"] + j["buffered_msgs"] for j in s["jobs"]))')
t0=$(date +%s)
kill -TERM "$W1_PID"
rc=0
wait "$W1_PID" || rc=$?
[ "$rc" -eq 0 ] || fail "worker 1: exit $rc after SIGTERM, want 0"
grep -q "told the dispatcher this worker is leaving" "$TMP/W1.err" ||
    fail "worker 1 did not say goodbye: $(tail -n 5 "$TMP/W1.err")"
wait "$pa" || fail "job a failed after a worker left"
wait "$pb" || fail "job b failed after a worker left"
secs=$(($(date +%s) - t0))
for j in a b; do
    sort "$TMP/d_$j" | cmp -s - "$TMP/local_$j.s" ||
        fail "worker stopped: job $j digests differ from --local"
done
grep -q "worker .* left" "$TMP/D.err" || fail "the dispatcher did not see the worker leave"
[ "$secs" -lt 30 ] || fail "jobs took ${secs}s after SIGTERM (worker_timeout is 60 s)"
kill -0 "$W2_PID" 2>/dev/null && kill -0 "$D_PID" 2>/dev/null || fail "a daemon died"
echo "worker 1 drained ($busy splits/messages pending at SIGTERM), exited 0; both jobs done" \
    "${secs}s later with identical digests"
echo "two jobs + drain: ok"
