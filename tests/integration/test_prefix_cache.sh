#!/usr/bin/env bash
# The prefix cache (docs/cache.md) over real daemons on loopback: a worker
# with --cache-dir keeps the output of a spec's deterministic prefix per
# sample; the digests equal the uncached --local run's, cold and warm,
# offloaded and local; bad cache states -- truncated entries, entries of
# another format version, a full disk, a worker killed mid-write -- are
# never served and never fail a sample; two concurrent jobs of one spec
# share the entries; a cache big enough evicts nothing, one smaller than the
# data set's entries evicts, and says so in the worker's /status and
# /metrics, the dispatcher's job /status and `sluice run --json`.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 20
# decode + resize draw nothing: the prefix; the crop and flip draw.
cat >"$TMP/v.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 7},
 "stages": [{"op": "decode_jpeg"}, {"op": "resize", "size": 72},
            {"op": "random_crop", "size": 64}, {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
            {"op": "to_chw"}],
 "batch_size": 8, "epochs": 2}
JSON
sed 's/"epochs": 2}/"epochs": 2, "cache": "off"}/' "$TMP/v.json" >"$TMP/v_off.json"
sed 's/"size": 72/"size": 70/' "$TMP/v.json" >"$TMP/v2.json"
# ~200 KB an entry: 60 of them are ~12 MB, far beyond a 1 MiB cache.
sed 's/"size": 72/"size": 256/' "$TMP/v.json" >"$TMP/big.json"

"$BIN/sluice" run "$TMP/v.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq 120 ] || fail "local run: expected 120 digests"
"$BIN/sluice" run "$TMP/v2.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local2"
sort "$TMP/local2" >"$TMP/local2.s"

# A bad cache value is a spec error: exit 2, naming the field.
sed 's/"epochs": 2}/"epochs": 2, "cache": "yes"}/' "$TMP/v.json" >"$TMP/bad.json"
run_rc "$TMP/bad.err" "$BIN/sluice" run "$TMP/bad.json" --local --data-root "$TMP/data" --quiet
[ "$RC" -eq 2 ] || fail "\"cache\": \"yes\": exit $RC, expected 2"
grep -q 'cache' "$TMP/bad.err" || fail "\"cache\": \"yes\": error does not name the field"

# The client's own samples (--local here): cold, then warm from the cache.
for run in cold warm; do
    "$BIN/sluice" run "$TMP/v.json" --local --data-root "$TMP/data" --quiet --threads 2 \
        --cache-dir "$TMP/lcache" --digests "$TMP/l_$run" --json >"$TMP/l_$run.json"
    sort "$TMP/l_$run" | cmp -s - "$TMP/local.s" || fail "--local $run: digests differ"
done
lc() { /usr/bin/python3 -c "import json,sys; print(json.load(open('$1'))['cache']['$2'])"; }
[ "$(lc "$TMP/l_cold.json" misses)" -ge 60 ] || fail "--local cold: fewer than 60 misses"
[ "$(lc "$TMP/l_warm.json" hits)" -eq 120 ] || fail "--local warm: not every sample a hit"
[ "$(lc "$TMP/l_warm.json" misses)" -eq 0 ] || fail "--local warm: misses"
echo "--local with --cache-dir: digests equal, cold and warm (120 hits)"

CACHE="$TMP/cache"
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 2000
start_worker() {
    start_daemon W "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
        --listen 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --cache-dir "$CACHE" \
        --cache-bytes "${1:-100000000}"
    wait_live_workers "$D_HTTP" 1
}
start_worker

# cache FIELD: the worker's total of a prefix cache counter.
cache() { curl -sf "http://$W_HTTP/status" | /usr/bin/python3 -c \
    "import json,sys; print(json.load(sys.stdin)['cache']['$1'])"; }
# remote SPEC NAME [WANT]: an offloaded run whose digests must equal WANT's.
remote() {
    local want=${3:-$TMP/local.s}
    "$BIN/sluice" run "$TMP/$1.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 1 --offload all --digests "$TMP/$2" --json >"$TMP/$2.json" ||
        fail "$2: the run failed"
    sort "$TMP/$2" >"$TMP/$2.s"
    cmp -s "$TMP/$2.s" "$want" || fail "$2: digests differ from the uncached --local run"
}
entries() { find "$CACHE/samples" -type f ! -name '.*' | wc -l; }

# Cold: epoch 1 computes and stores the 60 samples, epoch 2 hits them.
remote v cold
h=$(cache hits) m=$(cache misses)
[ "$m" -eq 60 ] || fail "cold: $m misses, expected 60"
[ "$h" -eq 60 ] || fail "cold: $h hits, expected 60 (the second epoch)"
[ "$(entries)" -eq 60 ] || fail "cold: $(entries) entries, expected 60"
# Warm: the same spec again, every sample a hit.
remote v warm
[ "$(cache misses)" -eq 60 ] || fail "warm: new misses"
[ "$(cache hits)" -eq 180 ] || fail "warm: $(cache hits) hits, expected 180"
grep -q 'sluice_worker_cache_hits_total 180' <(curl -sf "http://$W_HTTP/metrics") ||
    fail "/metrics lacks the hits"
echo "cold and warm runs: digests equal to the uncached run; 60 misses, 180 hits (60 of the cold run's second epoch)"
# The dispatcher hears of them with the heartbeats (its totals, the job's
# /status), and the client's --json shows what it last heard during the run.
dh=""
for _ in $(seq 1 100); do
    dh=$(curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c \
        'import json,sys; print(json.load(sys.stdin)["totals"]["cache"]["hits"])')
    [ "$dh" = 180 ] && break
    sleep 0.05
done
[ "$dh" = 180 ] || fail "dispatcher totals: $dh cache hits, expected 180"
wh=$(/usr/bin/python3 -c "import json; print(json.load(open('$TMP/warm.json'))['cache']['workers']['hits'])")
[ "$wh" -gt 0 ] || fail "--json: no worker cache hits heard during the warm run"
echo "dispatcher: 180 hits in its totals; the warm run's --json heard $wh of its 120"
# A cache big enough for the data set evicts nothing, and every place says 0.
[ "$(cache evictions)" -eq 0 ] && [ "$(cache bytes_evicted)" -eq 0 ] ||
    fail "a big enough cache evicted: $(cache evictions) entries"
grep -q '^sluice_worker_cache_evictions_total 0$' <(curl -sf "http://$W_HTTP/metrics") ||
    fail "/metrics: evictions not 0 (or missing)"
grep -q '^sluice_worker_cache_evicted_bytes_total 0$' <(curl -sf "http://$W_HTTP/metrics") ||
    fail "/metrics: evicted bytes not 0 (or missing)"
de=$(curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c \
    'import json,sys; c=json.load(sys.stdin)["totals"]["cache"]; print(c["evictions"], c["bytes_evicted"])')
[ "$de" = "0 0" ] || fail "dispatcher totals: evictions, bytes $de, expected 0 0"
we=$(/usr/bin/python3 -c "import json; w=json.load(open('$TMP/warm.json'))['cache']['workers']; print(w['evictions'], w['bytes_evicted'])")
[ "$we" = "0 0" ] || fail "--json: workers' evictions, bytes $we, expected 0 0"

# Half the samples on the client (its own cache), half on the worker.
"$BIN/sluice" run "$TMP/v.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload 6:0.5 --cache-dir "$TMP/lcache" --digests "$TMP/share" \
    --json >"$TMP/share.json" || fail "local share run failed"
sort "$TMP/share" | cmp -s - "$TMP/local.s" || fail "local share: digests differ"
[ "$(lc "$TMP/share.json" hits)" -gt 0 ] || fail "local share: the client's cache was not used"
[ "$(lc "$TMP/share.json" misses)" -eq 0 ] || fail "local share: the client's cache missed"
echo "local share + offloaded: digests equal, the client's share from its cache"

# "cache": "off" neither reads nor writes.
h0=$(cache hits) m0=$(cache misses)
remote v_off off
[ "$(cache hits)" -eq "$h0" ] && [ "$(cache misses)" -eq "$m0" ] || fail "cache off used the cache"

# Truncated entries, then entries of another format version: never served.
for f in $(find "$CACHE/samples" -type f ! -name '.*' | head -20); do
    truncate -s -7 "$f"
done
for f in $(find "$CACHE/samples" -type f ! -name '.*' | tail -20); do
    printf '\x09' | dd of="$f" bs=1 seek=4 conv=notrunc status=none # version byte
done
remote v damaged
c=$(cache corrupt)
[ "$c" -eq 40 ] || fail "damaged: $c entries refused, expected 40"
remote v repaired
[ "$(cache corrupt)" -eq 40 ] || fail "repaired: entries were not replaced"
echo "truncated and other-version entries: refused ($c), recomputed, replaced"

# Two concurrent jobs of one (new) spec share the entries.
"$BIN/sluice" run "$TMP/v2.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --digests "$TMP/c1" &
c1=$!
"$BIN/sluice" run "$TMP/v2.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --digests "$TMP/c2" &
c2=$!
wait $c1 || fail "concurrent job 1 failed"
wait $c2 || fail "concurrent job 2 failed"
for f in c1 c2; do
    sort "$TMP/$f" | cmp -s - "$TMP/local2.s" || fail "concurrent $f: digests differ"
done
[ "$(entries)" -eq 120 ] || fail "concurrent: $(entries) entries, expected 120"
echo "two concurrent jobs of one spec: digests equal, one entry per sample"

# A worker killed mid-write (SIGKILL during a cold run): after a restart no
# partial entry is served and the digests are right.
# The worker restarts on the emptied directory first: one that had it open
# when it was removed would write into the removed one, unseen here.
kill -9 "$W_PID"
wait "$W_PID" 2>/dev/null || true
rm -rf "$CACHE/samples"
start_worker
"$BIN/sluice" run "$TMP/v.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --digests "$TMP/killed" >/dev/null 2>&1 &
cl=$!
for _ in $(seq 1 500); do
    [ "$(entries)" -ge 10 ] && break
    sleep 0.02
done
n=$(entries)
[ "$n" -ge 10 ] && [ "$n" -lt 60 ] || fail "kill mid-write: $n entries when the worker was to be killed"
kill -0 "$cl" 2>/dev/null || fail "kill mid-write: the job ended before the kill"
kill -9 "$W_PID"
wait $cl || true
start_worker
remote v after_kill
[ "$(cache corrupt)" -eq 0 ] || fail "after the kill: a refused entry (partial?)"
echo "worker killed mid-write ($n of 60 entries written): restarted, digests equal, nothing partial served"

# A cache smaller than the data set's entries (1 MiB for ~12 MB): it evicts,
# counted in entries and bytes, in the worker's /status and /metrics, the
# dispatcher's job (from the heartbeats) and the run's --json (as the
# dispatcher last said during the run); the digests stay right.
kill "$W_PID"
wait "$W_PID" 2>/dev/null || true
CACHE="$TMP/tinycache"
start_worker 1048576
# Four epochs: the --json is what the client last heard, and a job of a few
# hundred milliseconds under load could end before a heartbeat with an
# eviction in it reached the dispatcher (seen: 0 0 in 2 of 4 loaded runs).
sed 's/"epochs": 2}/"epochs": 4}/' "$TMP/big.json" >"$TMP/big4.json"
"$BIN/sluice" run "$TMP/big4.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local_big"
sort "$TMP/local_big" >"$TMP/local_big.s"
remote big4 tiny "$TMP/local_big.s"
ev=$(cache evictions) eb=$(cache bytes_evicted)
[ "$ev" -gt 0 ] || fail "small cache: no eviction counted in the worker's /status"
[ "$eb" -gt "$((ev * 1000))" ] || fail "small cache: $ev evictions but only $eb bytes"
metrics=$(curl -sf "http://$W_HTTP/metrics")
grep -q "^sluice_worker_cache_evictions_total $ev\$" <<<"$metrics" ||
    fail "small cache: /metrics evictions differ from /status ($ev)"
grep -q '^sluice_worker_cache_evicted_bytes_total [1-9]' <<<"$metrics" ||
    fail "small cache: /metrics evicted bytes not counted"
# The job in the dispatcher's /status (open or closed in the last minute),
# once the worker's last heartbeat is in.
dj=""
for _ in $(seq 1 100); do
    dj=$(curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
jobs = s.get("jobs", []) + s.get("closed_jobs", [])
print(sum(j.get("cache", {}).get("evictions", 0) for j in jobs))')
    [ "$dj" = "$ev" ] && break
    sleep 0.05
done
[ "$dj" = "$ev" ] || fail "small cache: the dispatcher's jobs show $dj evictions, the worker $ev"
jw=$(/usr/bin/python3 -c "import json; w=json.load(open('$TMP/tiny.json'))['cache']['workers']; print(w['evictions'], w['bytes_evicted'])")
[ "${jw% *}" -gt 0 ] && [ "${jw#* }" -gt 0 ] || fail "small cache: --json workers' evictions, bytes: $jw"
echo "small cache (1 MiB): $ev entries ($eb bytes) evicted: worker /status, /metrics, dispatcher job ($dj), --json ($jw); digests equal"

# A full disk: a 256 KiB tmpfs as the cache (or, where mounting is not
# allowed, a samples directory that vanished): stores fail, are counted and
# logged once, and no sample fails.
kill "$W_PID"
wait "$W_PID" 2>/dev/null || true
CACHE="$TMP/small"
mkdir -p "$CACHE"
if mount -t tmpfs -o size=256k tmpfs "$CACHE" 2>/dev/null; then
    # On failure: the daemons first (the worker holds files there), then
    # the mount, then the usual cleanup.
    trap 'rc=$?; for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; sleep 0.3
          umount "$TMP/small" 2>/dev/null || true; (exit $rc); cleanup' EXIT INT TERM
    how="a 256 KiB tmpfs"
    start_worker 100000000
else
    how="a removed samples directory"
    start_worker 100000000
    rm -rf "$CACHE/samples"
fi
remote v full
e=$(cache store_errors)
[ "$e" -gt 0 ] || fail "full disk ($how): no store error counted"
n=$(grep -c 'storing an entry failed' "$TMP/W.err" || true)
[ "$n" -eq 1 ] || fail "full disk: the failure was logged $n times, expected once"
if [ "$how" = "a 256 KiB tmpfs" ]; then
    kill "$W_PID"
    wait "$W_PID" 2>/dev/null || true
    umount "$CACHE" || fail "cannot unmount the test's tmpfs"
fi
echo "full disk ($how): $e store errors counted, logged once, digests equal"
kill -0 "$D_PID" || fail "the dispatcher died"
echo "prefix cache: ok"
