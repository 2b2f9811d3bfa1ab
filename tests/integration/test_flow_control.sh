#!/usr/bin/env bash
# test: alone (run-integration.sh): judges a client's rate and a worker's RSS
# Invariant 3 (bounded memory) end to end: a client that consumes slowly
# (`sluice run --max-rate`) against a worker with a small --buffer-bytes.
# While the job runs, the worker's /status buffered_bytes never exceeds the
# bound plus one message, the buffer really fills (back-pressure reached the
# worker), the worker's RSS (/proc/PID/status) stays flat, the client keeps
# to its rate, and the job completes with the --local digests.
source "$(dirname "$0")/lib.sh"

BOUND=1048576                           # --buffer-bytes (the minimum allowed)
SAMPLE=$((128 * 128 * 3 * 4))           # one float32 128x128x3 sample
MSG=$((8 * (SAMPLE + 64) + 32))         # batch_size 8, per-sample and message framing
RATE=40                                 # samples/s the client takes

make_images "$TMP/data" 3 20
cat >"$TMP/spec.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 11},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 128},
            {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
            {"op": "to_chw"}],
 "batch_size": 8, "epochs": 3}
JSON
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
total=$(wc -l <"$TMP/local.s")

# Splits of 30 samples, 4 per worker: up to 120 samples (~23 MB) could wait
# at the worker if it did not stop at its bound.
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 30 --heartbeat-ms 100
# Under `make asan` freed memory sits in ASan's quarantine (256 MB by
# default) and RSS would grow with every message; a small quarantine keeps
# the RSS check meaningful there (other builds ignore the variable).
small_quarantine="quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}$small_quarantine" \
    start_daemon W "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 2 --buffer-bytes "$BOUND"

t0=$(date +%s.%N)
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --max-rate "$RATE" --digests "$TMP/slow" &
client=$!
PIDS+=("$client")
# One sampler process for the whole run: a curl and a Python start per sample
# took up to a second on a loaded machine, so too few samples were seen.
/usr/bin/python3 - "$W_HTTP" "$W_PID" "$client" "$TMP/samples" <<'PY' &
import json, os, sys, time, urllib.request
http, wpid, client, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
with open(out, "w") as f:
    while alive(client):
        try:
            s = json.load(urllib.request.urlopen("http://%s/status" % http, timeout=2))
            bb = max([j["buffered_bytes"] for j in s["jobs"]] or [0])
        except (OSError, ValueError):
            bb = 0
        with open("/proc/%s/status" % wpid) as st:
            rss = next(int(l.split()[1]) * 1024 for l in st if l.startswith("VmRSS:"))
        f.write("%d %d\n" % (bb, rss))
        f.flush()
        time.sleep(0.1)
PY
sampler=$!
PIDS+=("$sampler")
wait "$client" || fail "slow client failed"
wait "$sampler" || fail "sampler failed"
t1=$(date +%s.%N)
sort "$TMP/slow" | cmp -s - "$TMP/local.s" || fail "slow client: digests differ from --local"
echo "slow client: $total samples, digests identical to --local"

/usr/bin/python3 - "$TMP/samples" "$BOUND" "$MSG" "$t0" "$t1" "$total" "$RATE" <<'PY' ||
import sys
path, bound, msg, t0, t1, total, rate = sys.argv[1:]
bound, msg, total, rate = int(bound), int(msg), int(total), float(rate)
rows = [tuple(int(x) for x in line.split()) for line in open(path) if line.strip()]
assert len(rows) >= 15, "too few samples taken: %d" % len(rows)
bb = [r[0] for r in rows]
rss = [r[1] for r in rows]
print("samples %d, buffered max %d (bound %d + message %d), rss %.1f..%.1f MB"
      % (len(rows), max(bb), bound, msg, min(rss) / 2**20, max(rss) / 2**20))
assert max(bb) <= bound + msg, "buffered %d > bound %d + one message %d" % (max(bb), bound, msg)
# The client really was the bottleneck: the worker's buffer filled up.
assert max(bb) >= bound // 2, "buffer never filled (max %d): no back-pressure seen" % max(bb)
# Flat: after the first third, RSS grows by no more than allocator noise
# (an unbounded buffer would add ~200 KB per sample the client is behind).
warm = len(rss) // 3
grow = max(rss[warm:]) - max(rss[:warm])
assert grow <= 6 * 2**20, "worker RSS grew by %.1f MB after warm-up" % (grow / 2**20)
# The client kept to its rate (it is what made the test slow).
secs = float(t1) - float(t0)
assert secs >= 0.8 * total / rate, "client took %.1f s for %d samples at %g/s" % (secs, total, rate)
PY
    fail "bounds not kept"
kill -0 "$W_PID" 2>/dev/null || fail "worker died"
echo "flow control: ok"
