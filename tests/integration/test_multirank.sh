#!/usr/bin/env bash
# Multi-rank jobs (docs/protocol.md "Multi-rank jobs"): 4 consumer processes
# share one job over 2 workers. Each rank's digests equal the --local run of
# the same rank arithmetic; the ranks are disjoint and equal in length, and
# their union is the --local digests minus the n mod W positions drop_last
# leaves out of each epoch (or, with padding, plus the repeated ones). Again
# with a worker killed mid-epoch, and with a rank killed and restarted.
source "$(dirname "$0")/lib.sh"

W=4
make_images "$TMP/data" 3 30 # 90 samples: 22 per rank (drop), 23 (pad)
write_train_spec "$TMP/spec.json" 4

run() { # run NAME ARGS...: sorted digests in $TMP/NAME.s
    local name=$1
    shift
    "$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 \
        --digests "$TMP/$name" "$@"
    sort "$TMP/$name" >"$TMP/$name.s"
}
# key: epoch and index (the same sample), for disjointness.
keys() { awk '{print $1, $2}' "$@" | sort; }

run local --local
[ "$(wc -l <"$TMP/local.s")" -eq 360 ] || fail "local: expected 360 digests"
for r in $(seq 0 $((W - 1))); do
    run "lr$r" --local --rank "$r" --world-size $W
done
# drop (the default): equal shares, disjoint, all from the local run.
for r in $(seq 0 $((W - 1))); do
    [ "$(wc -l <"$TMP/lr$r.s")" -eq 88 ] || fail "local rank $r: expected 4 x 22 digests"
done
[ -z "$(keys "$TMP"/lr?.s | uniq -d)" ] || fail "local ranks overlap"
sort -m "$TMP"/lr?.s >"$TMP/lunion.s"
[ "$(comm -23 "$TMP/lunion.s" "$TMP/local.s" | wc -l)" -eq 0 ] \
    || fail "local ranks deliver samples the plain run does not"
for e in 0 1 2 3; do
    [ "$(awk -v e=$e '$1 == e' "$TMP/lunion.s" | wc -l)" -eq 88 ] \
        || fail "epoch $e: the ranks do not cover 88 of 90 samples"
done
echo "local ranks: 4 x 88 digests, disjoint, union = --local minus 2 per epoch"

# pad: every rank 23 per epoch; the union covers every sample.
sed 's/"batch_size": 8/"batch_size": 8, "rank_padding": "pad"/' "$TMP/spec.json" \
    >"$TMP/pad.json"
for r in $(seq 0 $((W - 1))); do
    "$BIN/sluice" run "$TMP/pad.json" --data-root "$TMP/data" --quiet --threads 1 --local \
        --rank "$r" --world-size $W --digests "$TMP/pad$r"
    [ "$(wc -l <"$TMP/pad$r")" -eq 92 ] || fail "pad rank $r: expected 4 x 23 digests"
done
cat "$TMP"/pad? | sort -u | cmp -s - "$TMP/local.s" || fail "pad: union is not every sample"
[ "$(cat "$TMP"/pad? | sort | uniq -d | wc -l)" -eq 8 ] || fail "pad: expected 2 repeats/epoch"
echo "local ranks with padding: 4 x 92 digests, union = --local, 2 repeats per epoch"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 4 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 5000
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done

ranks() { # ranks PREFIX OFFLOAD [ARGS...]: all W ranks at once, in the background
    local prefix=$1 offload=$2
    shift 2
    RANK_PIDS=()
    for r in $(seq 0 $((W - 1))); do
        "$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 \
            --dispatcher "$D_GRPC" --offload "$offload" --rank "$r" --world-size $W \
            --job-name "$prefix" --digests "$TMP/$prefix$r" "$@" &
        RANK_PIDS+=($!)
        PIDS+=($!)
    done
}
check_ranks() { # check_ranks PREFIX WHAT
    for r in $(seq 0 $((W - 1))); do
        sort "$TMP/$1$r" | cmp -s - "$TMP/lr$r.s" || {
            sort "$TMP/$1$r" | diff - "$TMP/lr$r.s" | head -5
            fail "$2: rank $r digests differ from its --local share"
        }
    done
    echo "$2: every rank's digests equal its --local share"
}

ranks plain all
for p in "${RANK_PIDS[@]}"; do wait "$p" || fail "a rank failed"; done
check_ranks plain "world size 4, 2 workers"
ranks mixed 2:0.25
for p in "${RANK_PIDS[@]}"; do wait "$p" || fail "a rank failed (mixed plan)"; done
check_ranks mixed "world size 4, split 2 share 0.25"

# A worker killed with SIGKILL mid-epoch.
ranks wkill all --max-rate 150
for _ in $(seq 1 200); do
    [ -f "$TMP/wkill0" ] && [ "$(wc -l <"$TMP/wkill0")" -ge 24 ] && break
    sleep 0.05
done
kill -0 "${RANK_PIDS[0]}" 2>/dev/null || fail "rank 0 ended before the worker was killed"
kill -9 "$W1_PID"
for p in "${RANK_PIDS[@]}"; do wait "$p" || fail "a rank failed after a worker died"; done
check_ranks wkill "worker killed mid-epoch"

# A rank killed with SIGKILL mid-epoch and started again: it resumes its
# share; the two runs together deliver exactly its share.
start_daemon W3 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
ranks rkill all --max-rate 100
victim=${RANK_PIDS[2]}
# /status shows each rank's part of the job and its progress: read while all
# four run (polled from their start; with tests side by side, ranks 1 and 3
# could be done by the time rank 2 had 30 samples).
seen=0
for _ in $(seq 1 200); do
    if curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c '
import json, sys
jobs = [j for j in json.load(sys.stdin)["jobs"] if j.get("rank", {}).get("job_name") == "rkill"]
ranks = sorted(j["rank"]["rank"] for j in jobs)
assert ranks == [0, 1, 2, 3], ranks
assert all(j["rank"]["world_size"] == 4 and "samples_done" in j["progress"] for j in jobs)
' 2>/dev/null; then
        seen=1
        break
    fi
    sleep 0.05
done
[ $seen = 1 ] || fail "/status does not show the 4 ranks with their progress"
for _ in $(seq 1 200); do
    [ -f "$TMP/rkill2" ] && [ "$(wc -l <"$TMP/rkill2")" -ge 30 ] && break
    sleep 0.05
done
kill -0 "$victim" 2>/dev/null || fail "rank 2 ended before it could be killed"
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
mv "$TMP/rkill2" "$TMP/rkill2.first"
"$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 \
    --dispatcher "$D_GRPC" --offload all --rank 2 --world-size $W --job-name rkill \
    --digests "$TMP/rkill2.second" || fail "the restarted rank failed"
for r in 0 1 3; do wait "${RANK_PIDS[$r]}" || fail "rank $r failed while rank 2 restarted"; done
first=$(wc -l <"$TMP/rkill2.first")
second=$(wc -l <"$TMP/rkill2.second")
[ "$second" -lt 88 ] || fail "the restarted rank delivered its whole share again ($second)"
[ -z "$(sort "$TMP/rkill2.second" | uniq -d)" ] || fail "the restarted rank repeated samples"
sort -u "$TMP/rkill2.first" "$TMP/rkill2.second" | cmp -s - "$TMP/lr2.s" \
    || fail "rank killed and restarted: union differs from its --local share"
dup=$(sort "$TMP/rkill2.first" "$TMP/rkill2.second" | uniq -d | wc -l)
cp "$TMP/rkill2.second" "$TMP/rkill2"
for r in 0 1 3; do
    sort "$TMP/rkill$r" | cmp -s - "$TMP/lr$r.s" || fail "rank $r digests differ (restart test)"
done
echo "rank killed after $first samples and restarted: it delivered $second more, union exact" \
    "($dup delivered but not yet acknowledged when it died were repeated)"

kill -0 "$D_PID" && kill -0 "$W2_PID" || fail "a daemon died"
echo "multirank: ok"
