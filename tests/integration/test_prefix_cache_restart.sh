#!/usr/bin/env bash
# The prefix cache (docs/cache.md) with the guarantees that outlive a
# process: a dispatcher killed mid-job and restarted on its journal, and a
# job stopped and resumed from its saved state, both with workers whose
# cache is warm for some samples and cold for others. Every sample is
# delivered exactly once with the bytes of the uncached --local run.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 30
cat >"$TMP/v.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 3},
 "stages": [{"op": "decode_jpeg"}, {"op": "resize", "size": 72},
            {"op": "random_crop", "size": 64}, {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
            {"op": "to_chw"}],
 "batch_size": 8, "epochs": 4}
JSON
"$BIN/sluice" run "$TMP/v.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq 360 ] || fail "local run: expected 360 digests"

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0));
print(s.getsockname()[1])')
dispatcher() { # dispatcher NAME
    start_daemon "$1" "$BIN/sluice-dispatcher" --listen "127.0.0.1:$port" --http 127.0.0.1:0 \
        --journal "$TMP/journal" --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 \
        --client-timeout-ms 20000
}
dispatcher D
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "127.0.0.1:$port" \
        --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 \
        --cache-dir "$TMP/cache$i"
done
hits() { curl -sf "http://$1/status" | /usr/bin/python3 -c \
    'import json,sys; print(json.load(sys.stdin)["cache"]["hits"])'; }

# Dispatcher killed in the second epoch (the caches hold the first's).
"$BIN/sluice" run "$TMP/v.json" --dispatcher "127.0.0.1:$port" --data-root "$TMP/data" \
    --quiet --threads 1 --offload all --digests "$TMP/remote" &
client=$!
PIDS+=("$client")
for _ in $(seq 1 400); do
    [ -f "$TMP/remote" ] && [ "$(wc -l <"$TMP/remote")" -ge 130 ] && break
    sleep 0.05
done
kill -0 "$client" 2>/dev/null || fail "the job ended before the dispatcher could be killed"
kill -9 "$D_PID"
echo "dispatcher killed after $(wc -l <"$TMP/remote") samples"
sleep 1
dispatcher D2
wait "$client" || { cat "$TMP/D2.err"; fail "client failed across the dispatcher restart"; }
sort "$TMP/remote" | cmp -s - "$TMP/local.s" || fail "dispatcher restarted: digests differ"
h=$(($(hits "$W1_HTTP") + $(hits "$W2_HTTP")))
[ "$h" -gt 0 ] || fail "dispatcher restarted: the workers' caches were never hit"
echo "dispatcher killed and restarted: digests equal to the uncached run ($h cache hits)"

# Stopped after a few batches with its state saved, then resumed: the
# union is the uncached run, nothing twice.
"$BIN/sluice" run "$TMP/v.json" --dispatcher "127.0.0.1:$port" --data-root "$TMP/data" \
    --quiet --threads 1 --offload all --digests "$TMP/a" --save-state "$TMP/st" \
    --stop-after-batches 17 --job-name stop || fail "the stopped run failed"
"$BIN/sluice" run "$TMP/v.json" --dispatcher "127.0.0.1:$port" --data-root "$TMP/data" \
    --quiet --threads 1 --offload all --digests "$TMP/b" --resume "$TMP/st" \
    --job-name resumed || fail "the resumed run failed"
cat "$TMP/a" "$TMP/b" | sort | cmp -s - "$TMP/local.s" ||
    fail "stopped + resumed != the uncached run ($(cat "$TMP/a" "$TMP/b" | wc -l) digests)"
echo "stopped and resumed with warm caches: every sample once, digests equal"
echo "prefix cache across restarts: ok"
