#!/usr/bin/env bash
# No rank starves (docs/protocol.md "Multi-rank jobs", spreading): world size
# 2 over 2 workers whose per-job buffers (1 MiB, ~20 samples) are smaller than
# a split (32 samples), so the buffers of a slow rank fill.
# Rank 0's consumer crawls (--max-rate), so its buffers on both workers fill
# and stay full; rank 1 must still get its whole share at full speed. Not a
# timing assertion: rank 1 must finish before a generous timeout, while rank 0
# is still far from done (if a full job held the workers, rank 1 could only
# finish behind rank 0). Then rank 0 finishes and the two ranks' digests are
# disjoint, equal-length and their union equals the --local digests.
source "$(dirname "$0")/lib.sh"

W=2
make_images "$TMP/data" 4 80 # 320 samples: 160 per rank
write_train_spec "$TMP/spec.json" 1
SHARE=160

"$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 --local \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq $((W * SHARE)) ] || fail "local: expected $((W * SHARE)) digests"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 32 --heartbeat-ms 100
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --buffer-bytes 1048576
done

rank() { # rank R ARGS...: one rank of job "starve"
    local r=$1
    shift
    "$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 \
        --dispatcher "$D_GRPC" --offload all --rank "$r" --world-size $W --job-name starve \
        --digests "$TMP/r$r" "$@"
}

# Rank 0 at 6 samples/s: its whole share takes ~27 s.
rank 0 --max-rate 6 &
P0=$!
PIDS+=($P0)
# Wait until rank 0 runs and its buffers have had time to fill.
for _ in $(seq 1 200); do
    [ -f "$TMP/r0" ] && [ "$(wc -l <"$TMP/r0")" -ge 8 ] && break
    sleep 0.05
done
[ -f "$TMP/r0" ] && [ "$(wc -l <"$TMP/r0")" -ge 8 ] || fail "rank 0 did not start delivering"
full=0
for _ in $(seq 1 100); do
    for h in "$W1_HTTP" "$W2_HTTP"; do
        b=$(curl -sf "http://$h/status" | /usr/bin/python3 -c '
import json, sys
print(max([j["buffered_bytes"] for j in json.load(sys.stdin)["jobs"]] + [0]))')
        [ "$b" -ge 524288 ] && full=1
    done
    [ $full = 1 ] && break
    sleep 0.05
done
[ $full = 1 ] || fail "rank 0's buffer on the workers never filled (test does not test)"

rank 1 &
P1=$!
PIDS+=($P1)
for _ in $(seq 1 1200); do # 120 s
    kill -0 $P1 2>/dev/null || break
    sleep 0.1
done
kill -0 $P1 2>/dev/null && fail "rank 1 did not complete its share in 120 s while rank 0 was slow"
wait $P1 || fail "rank 1 failed"
at=$(wc -l <"$TMP/r0")
kill -0 $P0 2>/dev/null || fail "rank 0 finished before rank 1: the test did not overlap them"
[ "$at" -lt $((SHARE / 2)) ] \
    || fail "rank 0 had $at of $SHARE when rank 1 finished: the test did not overlap them"
echo "rank 1 completed its $SHARE samples while rank 0 (paused at 6/s, buffers full) had $at"

wait $P0 || fail "rank 0 failed"
for r in 0 1; do
    [ "$(wc -l <"$TMP/r$r")" -eq $SHARE ] || fail "rank $r: expected $SHARE digests"
done
keys() { awk '{print $1, $2}' "$@" | sort; }
[ -z "$(keys "$TMP/r0" "$TMP/r1" | uniq -d)" ] || fail "the ranks overlap"
sort "$TMP/r0" "$TMP/r1" | cmp -s - "$TMP/local.s" || fail "union of the ranks is not --local"
echo "ranks disjoint, $SHARE each, union = --local"
kill -0 "$D_PID" && kill -0 "$W1_PID" && kill -0 "$W2_PID" || fail "a daemon died"
echo "multirank_starve: ok"
