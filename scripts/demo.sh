#!/usr/bin/env bash
# make demo: a dispatcher and two workers on loopback, one job offloaded to
# them, its throughput and plan; then the same job locally for comparison.
# Everything started here is stopped on exit, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
BIN="$BUILD/bin"
DATA="$BUILD/demo-data"
WORK="$(mktemp -d /tmp/sluice-demo.XXXXXX)"
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

if [ ! -d "$DATA/train" ]; then
    echo "== generating a small image set in $DATA"
    /usr/bin/python3 scripts/make-dataset --out "$DATA" --classes 4 --per-class 100 --seed 1
fi

cat >"$WORK/spec.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 42},
 "stages": [{"op": "decode_jpeg"},
            {"op": "random_resized_crop", "size": 224},
            {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
            {"op": "to_chw"}],
 "batch_size": 32, "epochs": 2}
JSON

listen_addr() { # waits for the daemon's first stdout line, prints grpc=...
    local out=$1 pid=$2
    for _ in $(seq 1 200); do
        if grep -q '^listening ' "$out" 2>/dev/null; then
            sed -nE '1s/.*grpc=([^ ]+).*/\1/p' "$out"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || { echo "daemon exited; its log:" >&2; cat "${out%.out}.err" >&2; return 1; }
        sleep 0.05
    done
    echo "daemon did not start" >&2
    return 1
}

echo "== starting sluice-dispatcher and two sluice-workers on 127.0.0.1"
"$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 --journal none \
    >"$WORK/d.out" 2>"$WORK/d.err" &
PIDS+=($!)
DISP=$(listen_addr "$WORK/d.out" $!)
HTTP=$(sed -nE '1s/.*http=([^ ]+).*/\1/p' "$WORK/d.out")
for i in 1 2; do
    "$BIN/sluice-worker" --dispatcher "$DISP" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
        --data-root "$DATA" --threads 1 >"$WORK/w$i.out" 2>"$WORK/w$i.err" &
    PIDS+=($!)
    listen_addr "$WORK/w$i.out" $! >/dev/null
done
echo "   dispatcher grpc=$DISP status=http://$HTTP/status"

echo "== sluice run --offload all (every stage on the workers)"
"$BIN/sluice" run "$WORK/spec.json" --dispatcher "$DISP" --data-root "$DATA" --offload all \
    --threads 1 --json >"$WORK/remote.json"
echo "== sluice run --local (every stage here)"
"$BIN/sluice" run "$WORK/spec.json" --local --data-root "$DATA" --threads 1 --json \
    >"$WORK/local.json"

/usr/bin/python3 - "$WORK/remote.json" "$WORK/local.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = json.load(open(sys.argv[2]))
print()
print("%-22s %10s %12s %8s  %s" % ("run", "samples", "samples/s", "skipped", "plan"))
for name, j in (("offloaded (2 workers)", r), ("local (1 thread)", l)):
    p = j["plan"]
    print("%-22s %10d %12.1f %8d  %s split=%d local_share=%.2f" % (
        name, j["samples"], j["samples_per_sec"], j["skipped"]["total"], p["mode"],
        p["split"], p["local_share"]))
PY
echo
echo "status endpoint while it ran: curl http://$HTTP/status"
