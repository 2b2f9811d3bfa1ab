#!/usr/bin/env bash
# The planner's prefix cache decision (docs/cache.md "When"): `sluice plan
# --explain` says on or off and why, with the numbers; --json has it. A
# 1-epoch job of a spec the dispatcher never saw: off (nothing reads it
# again); 2 epochs: on; the 1-epoch job again once the spec is known: on;
# "cache": "off": off whatever the numbers; a worker budget too small for a
# useful part of the output: off. The prefix here is decode + resize. The
# read-back cost is "assumed" until a worker's cache hits were timed (a
# cached job ran), "measured" after; a client's own cache's lookups reach
# the job's planner.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 20
cat >"$TMP/e2.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 7},
 "stages": [{"op": "decode_jpeg"}, {"op": "resize", "size": 72},
            {"op": "random_crop", "size": 64}, {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
            {"op": "to_chw"}],
 "batch_size": 8, "epochs": 2, "offload": "auto"}
JSON
sed 's/"epochs": 2/"epochs": 1/' "$TMP/e2.json" >"$TMP/e1.json"
sed 's/"epochs": 2/"epochs": 6/' "$TMP/e2.json" >"$TMP/e6.json"
sed 's/"offload": "auto"}/"offload": "auto", "cache": "off"}/' "$TMP/e2.json" >"$TMP/off.json"
# 512x512 pixels a sample: ~60 x 768 KB raw, far beyond 1 MB.
sed 's/"size": 72/"size": 512/' "$TMP/e2.json" >"$TMP/small.json"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 3000 --heartbeat-ms 100 --client-timeout-ms 5000
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --data-root "$TMP/data" --threads 1 --http none --cache-dir "$TMP/cache" \
    --cache-bytes 100000000
wait_live_workers "$D_HTTP" 1

plan() { # plan SPEC OUT [flags]: sluice plan into OUT
    local spec=$1 out=$2
    shift 2
    "$BIN/sluice" plan "$spec" --dispatcher "$D_GRPC" --data-root "$TMP/data" --threads 1 \
        "$@" >"$out" || fail "sluice plan $* ($spec) failed"
}
line() { grep '^prefix cache: ' "$1" || echo "(no prefix cache line)"; }
# The numbers: the prefix's compute and read-back cost, the output's size
# against the worker's 100000000 bytes (95.4 MB); nothing measured yet.
NUMS='computing units 0\.\.1 costs [0-9.]+ ms a sample, reading [0-9.]+ ms \(assumed\)'

# 1 epoch, spec never seen: nothing reads it again.
plan "$TMP/e1.json" "$TMP/e1.txt" --explain
grep -Eq "^prefix cache: off: $NUMS; nothing reads it again \(1 epoch, the spec not seen before\)$" \
    "$TMP/e1.txt" || fail "1 epoch, new spec: $(line "$TMP/e1.txt")"
echo "1 epoch, new spec: $(line "$TMP/e1.txt")"

# 2 epochs: on, the output fits.
plan "$TMP/e2.json" "$TMP/e2.txt" --explain
grep -Eq "^prefix cache: on: $NUMS; 100% of its [0-9.]+ [KM]B fit the workers' 95\.4 MB; read again: 2 epochs$" \
    "$TMP/e2.txt" || fail "2 epochs: $(line "$TMP/e2.txt")"
echo "2 epochs: $(line "$TMP/e2.txt")"
plan "$TMP/e2.json" "$TMP/e2.json.out" --json
/usr/bin/python3 - "$TMP/e2.json.out" <<'PY' || fail "--json: no cache decision or a wrong one"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["cache"]
assert c["decision"] == "on", c
assert c["reason"].startswith("on: computing units 0..1"), c
assert c["prefix_units"] == 2 and c["epochs"] == 2, c
assert c["budget_bytes"] == 100000000, c
assert c["compute_ms_per_sample"] > c["read_ms_per_sample"] > 0, c
assert 0 < c["total_bytes"] <= 100000000 and c["fit"] == 1, c
assert d["plan"]["cache_off"] is False, d["plan"]
PY

# The same 1-epoch job again: the dispatcher's profile cache knows the spec.
plan "$TMP/e1.json" "$TMP/e1b.txt" --explain
grep -Eq "^prefix cache: on: $NUMS; .*read again: the spec seen before$" "$TMP/e1b.txt" ||
    fail "1 epoch, known spec: $(line "$TMP/e1b.txt")"

# "cache": "off" wins.
plan "$TMP/off.json" "$TMP/off.txt" --explain
grep -q '^prefix cache: off: the spec says "cache": "off"$' "$TMP/off.txt" ||
    fail "\"cache\": \"off\": $(line "$TMP/off.txt")"

# A cached job on the worker (60 misses, 300 hits: more than a window of
# 256 timed hits): the next decision reads back at the measured cost.
"$BIN/sluice" run "$TMP/e6.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all >/dev/null || fail "the 6-epoch cached run failed"
MEASURED='computing units 0\.\.1 costs [0-9.]+ ms a sample, reading [0-9.]+ ms \(measured\)'
for _ in $(seq 1 50); do
    plan "$TMP/e2.json" "$TMP/m.txt" --explain
    grep -Eq "^prefix cache: on: $MEASURED; " "$TMP/m.txt" && break
    sleep 0.1 # the worker's last heartbeat
done
grep -Eq "^prefix cache: on: $MEASURED; 100% of its [0-9.]+ [KM]B fit the workers' 95\.4 MB; read again: 2 epochs$" \
    "$TMP/m.txt" || fail "after a cached job: $(line "$TMP/m.txt")"
plan "$TMP/e2.json" "$TMP/m.json" --json
/usr/bin/python3 - "$TMP/m.json" <<'PY' || fail "--json: the measured read cost missing"
import json, sys
c = json.load(open(sys.argv[1]))["cache"]
assert c["read_measured"] is True and c["worker_read_measured"] is True, c
assert 0 < c["read_ms_per_sample"] < c["compute_ms_per_sample"], c
PY
# The worker's figure in the dispatcher's /status.
curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c '
import json, sys
w = [w for w in json.load(sys.stdin)["workers"] if w["state"] == "live"][0]
r = w["cache_read"]
assert r is not None and r["hits"] >= 256 and r["entry_us"] + r["byte_ns"] > 0, r
print("worker cache_read: %.1f us an entry + %.3f ns a byte over %d hits" %
      (r["entry_us"], r["byte_ns"], r["hits"]))' || fail "/status: no cache_read for the worker"
echo "after a cached job: $(line "$TMP/m.txt")"

# The client's own cache reaches the planner: an auto job with --cache-dir
# (its local share runs through it); while it runs, the job's planner JSON
# in the dispatcher's /status counts the client's lookups (a closed job's
# has no planner object).
"$BIN/sluice" run "$TMP/e6.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --cache-dir "$TMP/lcache" --json >"$TMP/own.json" &
cpid=$!
cl=0
while kill -0 "$cpid" 2>/dev/null; do
    n=$(curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
print(max([j["planner"]["cache"]["client_lookups"] for j in s["jobs"] if j.get("planner")] + [0]))' ||
        echo 0)
    [ "$n" -gt "$cl" ] && cl=$n
    sleep 0.1
done
wait "$cpid" || fail "the auto run with the client's cache failed"
own=$(/usr/bin/python3 -c "import json; c=json.load(open('$TMP/own.json'))['cache']; print(c['hits'] + c['misses'])")
if [ "$own" -gt 40 ]; then
    # More than a few polls' worth ran locally: the planner must have heard.
    [ "$cl" -gt 0 ] || fail "the client looked up $own samples in its cache; the planner heard of none"
    echo "the client's own cache: $own lookups, the planner heard of $cl during the run"
else
    echo "the client's own cache: the plan ran $own samples locally (too few to check)"
fi

# A worker whose budget holds under 5 % of the output: off.
kill "$W1_PID"
wait_live_workers "$D_HTTP" 0
start_daemon W2 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --data-root "$TMP/data" --threads 1 --http none --cache-dir "$TMP/cache2" \
    --cache-bytes 1048576
wait_live_workers "$D_HTTP" 1
# The 512-px prefix's read-back can cost about what computing it does (the
# read cost is fitted from the cached job above): "not cheaper" may come
# first. Either way it is off, and the budget reached the planner (--json).
plan "$TMP/small.json" "$TMP/small.txt" --explain
grep -Eq "^prefix cache: off: [^;]+(\(assumed\)|\(measured\)); (not cheaper|only [0-9]+% of its [0-9.]+ [KM]B fit the workers' 1\.0 MB \(at least 5% must\))$" \
    "$TMP/small.txt" || fail "small budget: $(line "$TMP/small.txt")"
plan "$TMP/small.json" "$TMP/small.json.out" --json
/usr/bin/python3 - "$TMP/small.json.out" <<'PY' || fail "small budget --json: $(cat "$TMP/small.json.out")"
import json, sys
c = json.load(open(sys.argv[1]))["cache"]
assert c["decision"] == "off", c
assert c["budget_bytes"] == 1048576, c
assert 0 < c["fit"] < 0.05, c
PY
echo "small budget: $(line "$TMP/small.txt")"
echo "ok"
