#!/usr/bin/env bash
# Compressed samples (docs/protocol.md "Compressed samples") over real daemons
# on loopback: with "compress": "zstd" the workers send float32 (zstd) and
# uint8 (delta + zstd) samples compressed, the client's digests equal the
# --local ones, and fewer bytes cross the wire; a worker that damages every
# compressed payload (the test-only SLUICE_TEST_CORRUPT_COMPRESSED) breaks
# its streams, its splits are retried on the healthy worker, and the run
# still completes with the same digests and no daemon dies.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 20
write_train_spec "$TMP/f32.json" 2 ', "compress": "zstd"'
write_train_spec "$TMP/f32_raw.json" 2
# uint8 HWC output: no normalize / to_chw, so the delta filter applies.
cat >"$TMP/u8.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 7},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 64},
            {"op": "flip", "p": 0.5}],
 "batch_size": 8, "epochs": 2, "compress": "zstd"}
JSON
sed 's/, "compress": "zstd"//' "$TMP/u8.json" >"$TMP/u8_raw.json"

for s in f32 u8; do
    "$BIN/sluice" run "$TMP/$s.json" --local --data-root "$TMP/data" --quiet --threads 2 \
        --digests "$TMP/$s.local"
    sort "$TMP/$s.local" >"$TMP/$s.local.s"
    [ "$(wc -l <"$TMP/$s.local.s")" -eq 120 ] || fail "$s local run: expected 120 digests"
done

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 2000
start_daemon W1 "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --data-root "$TMP/data" --threads 1

sent() { curl -sf "http://$W1_HTTP/status" | /usr/bin/python3 -c \
    'import json,sys; print(json.load(sys.stdin)["bytes_sent"])'; }
remote() { # remote SPEC NAME
    "$BIN/sluice" run "$TMP/$1.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 1 --offload all --digests "$TMP/$2" --json >"$TMP/$2.json" ||
        fail "$2: the run failed"
    sort "$TMP/$2" >"$TMP/$2.s"
}

for s in f32 u8; do
    b0=$(sent)
    remote "${s}_raw" "$s.raw"
    b1=$(sent)
    remote "$s" "$s.z"
    b2=$(sent)
    cmp -s "$TMP/$s.raw.s" "$TMP/$s.local.s" || fail "$s uncompressed: digests differ"
    cmp -s "$TMP/$s.z.s" "$TMP/$s.local.s" || fail "$s compressed: digests differ from --local"
    grep -q '"local":0,' "$TMP/$s.z.json" || fail "$s: offload all ran samples locally"
    grep -q '"compress":true' "$TMP/$s.z.json" || fail "$s: --json plan does not say compress"
    grep -q '"compress":false' "$TMP/$s.raw.json" || fail "$s: --json plan says compress"
    raw=$((b1 - b0)) z=$((b2 - b1))
    [ "$z" -lt "$raw" ] || fail "$s: compressed run sent $z bytes, uncompressed $raw"
    echo "$s: compressed digests identical to --local; bytes on the wire $raw -> $z"
done

# A worker that corrupts every compressed payload, beside a healthy one.
SLUICE_TEST_CORRUPT_COMPRESSED=1 start_daemon WBAD "$BIN/sluice-worker" --http 127.0.0.1:0 \
    --dispatcher "$D_GRPC" --listen 127.0.0.1:0 --data-root "$TMP/data" --threads 1
remote u8 u8.bad
cmp -s "$TMP/u8.bad.s" "$TMP/u8.local.s" || {
    diff "$TMP/u8.bad.s" "$TMP/u8.local.s" | head -5
    fail "corrupting worker: digests differ from --local"
}
broken=$(curl -sf "http://$WBAD_HTTP/status" | /usr/bin/python3 -c \
    'import json,sys; print(json.load(sys.stdin)["streams_broken"])')
[ "$broken" -gt 0 ] || fail "the corrupting worker's streams never broke (was it used?)"
kill -0 "$D_PID" && kill -0 "$W1_PID" && kill -0 "$WBAD_PID" || fail "a daemon died"
echo "corrupt compressed payloads: $broken broken streams, split retried, digests identical"
echo "compress: ok"
