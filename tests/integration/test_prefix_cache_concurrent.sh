#!/usr/bin/env bash
# Two concurrent cold jobs of one spec on one worker compute each sample
# once (docs/cache.md "Concurrent fillers"): the first lookup of a sample
# claims it, the other job's lookup waits for the entry and reads it.
#
# What is asserted, on a fresh worker and cache, over both jobs (240
# lookups of 120 samples): misses == 120 exactly (a miss is a computation:
# without claims, two jobs in step both miss the samples they meet while
# the other computes them, so misses > 120), claim_timeouts == 0 (no claim
# leaked or outlived its 10 s deadline), waited >= 1 (the jobs did overlap
# on a sample being computed: if they ran one after the other the test
# proves nothing, and fails rather than passes), hits + misses == 240,
# no store error, no corrupt entry, 120 entries and no claim file left, and
# both jobs' digests equal the uncached --local run's. A claim of a worker
# killed mid-run blocks nothing after its restart (no timeout, no wait).
source "$(dirname "$0")/lib.sh"

N=120
make_images "$TMP/data" 3 40
cat >"$TMP/v.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 7},
 "stages": [{"op": "decode_jpeg"}, {"op": "resize", "size": 72},
            {"op": "random_crop", "size": 64}, {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
            {"op": "to_chw"}],
 "batch_size": 8, "epochs": 1}
JSON
"$BIN/sluice" run "$TMP/v.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq "$N" ] || fail "local run: expected $N digests"

# The client's --json carries the new counters next to hits and misses.
"$BIN/sluice" run "$TMP/v.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --cache-dir "$TMP/lcache" --json >"$TMP/l.json"
/usr/bin/python3 -c "import json; c = json.load(open('$TMP/l.json'))['cache']
assert c['waited'] == 0 and c['claim_timeouts'] == 0 and c['misses'] == $N, c" ||
    fail "--local --json: cache.waited / claim_timeouts missing or wrong"

CACHE="$TMP/cache"
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 2000
start_worker() {
    start_daemon W "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
        --listen 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --cache-dir "$CACHE" \
        --cache-bytes 1000000000
    wait_live_workers "$D_HTTP" 1
}
start_worker
# counters: the worker's prefix cache totals as "hits misses waited
# claim_timeouts store_errors corrupt".
counters() { curl -sf "http://$W_HTTP/status" | /usr/bin/python3 -c 'import json,sys
c = json.load(sys.stdin)["cache"]
print(*(c[k] for k in ("hits", "misses", "waited", "claim_timeouts", "store_errors", "corrupt")))'
}
run_job() {
    "$BIN/sluice" run "$TMP/v.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 1 --offload all --digests "$TMP/$1" >/dev/null
}
entries() { find "$CACHE/samples" -type f ! -name '.*' | wc -l; }
claims() { find "$CACHE/samples" -name '.claim-*' | wc -l; }

run_job a &
pa=$!
run_job b &
pb=$!
wait $pa || fail "job a failed"
wait $pb || fail "job b failed"
for f in a b; do
    sort "$TMP/$f" | cmp -s - "$TMP/local.s" || fail "job $f: digests differ from --local"
done
read -r h m w t e c <<<"$(counters)"
echo "two concurrent cold jobs: $h hits ($w waited for the other job), $m misses, $t timeouts"
[ "$t" -eq 0 ] || fail "$t claim timeouts (a claim leaked or outlived its deadline)"
[ "$m" -eq "$N" ] || fail "$m misses over both jobs, expected $N (each sample computed once)"
[ $((h + m)) -eq $((2 * N)) ] || fail "$((h + m)) lookups, expected $((2 * N))"
[ "$w" -ge 1 ] || fail "no lookup waited: the jobs did not overlap, the test shows nothing"
[ "$e" -eq 0 ] && [ "$c" -eq 0 ] || fail "store errors $e, corrupt $c"
[ "$(entries)" -eq "$N" ] || fail "$(entries) entries, expected $N"
[ "$(claims)" -eq 0 ] || fail "$(claims) claim files left behind"
curl -sf "http://$W_HTTP/metrics" | grep -q "^sluice_worker_cache_waited_total $w\$" ||
    fail "/metrics lacks sluice_worker_cache_waited_total $w"
curl -sf "http://$W_HTTP/metrics" | grep -q '^sluice_worker_cache_claim_timeouts_total 0$' ||
    fail "/metrics lacks sluice_worker_cache_claim_timeouts_total"
echo "each sample computed once: $m misses for $N samples; digests equal --local"

# A worker killed while it computes holds a claim (one thread: one claim)
# whose file stays; after a restart the sample is claimed again at once.
# The worker is stopped (SIGSTOP) to look: a claim seen then is still held
# when the SIGKILL comes.
# A new, empty cache directory (the worker holds the old one open).
kill "$W_PID"
wait "$W_PID" 2>/dev/null || true
CACHE="$TMP/cache2"
start_worker
run_job killed 2>/dev/null &
cl=$!
for _ in $(seq 1 500); do
    kill -STOP "$W_PID"
    [ "$(entries)" -ge 10 ] && [ "$(claims)" -ge 1 ] && break
    kill -CONT "$W_PID"
    sleep 0.01
done
kill -9 "$W_PID"
wait $cl || true
left=$(claims)
[ "$left" -ge 1 ] || fail "the killed worker held no claim: the restart below shows nothing"
start_worker
t0=$(date +%s%N)
run_job after_kill
sort "$TMP/after_kill" | cmp -s - "$TMP/local.s" || fail "after the kill: digests differ"
read -r h m w t e c <<<"$(counters)"
[ "$t" -eq 0 ] || fail "after the kill: $t claim timeouts (the dead worker's claim blocked)"
[ "$(claims)" -eq 0 ] || fail "after the kill: $(claims) claim files left"
echo "worker killed with $left claim file(s) left: the restarted worker ran the job in" \
    "$((($(date +%s%N) - t0) / 1000000)) ms, no claim timeout, none left"
kill -0 "$D_PID" || fail "the dispatcher died"
echo "prefix cache, concurrent jobs: ok"
