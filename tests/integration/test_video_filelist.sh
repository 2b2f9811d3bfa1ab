#!/usr/bin/env bash
# decode_video over a filelist (issue #37): a list naming clips (H.264,
# VP9, HEVC, AV1, variable frame rate; one ".MOV" with a space in its
# name: extensions match in any case) and a still image. With decode_video
# the entries are records: the path as the key, the label, the clip's
# sampled frames (the still: one image). The frames equal PyAV's at the
# sampled indices (Python binding, local); the digests are the same
# locally, fully offloaded, split between client and workers, over two
# ranks (their equal shares), with balanced batching (costs from the clips'
# headers) and stopped then resumed offloaded. A
# broken clip (zero bytes, truncated) is a counted skip with its reason,
# locally and on workers; a mix of filelists with decode_video is refused
# naming the op. 64 frames per clip cross the wire (as source bytes when a
# processed record is over the worker's message bound, processed under a
# larger one) with the local bytes; 300 is a spec error.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/video_clips.sh"
python_env

DATA="$TMP/data"
make_clips "$DATA/clips"
cp "$DATA/clips/bt709.mp4" "$DATA/clips/Big Buck.MOV"
"$PY" - "$DATA/still.jpg" <<'PY'
import sys
from PIL import Image
Image.new("RGB", (48, 32), (200, 30, 60)).save(sys.argv[1], "JPEG", quality=90)
PY
cat >"$DATA/list.txt" <<'LIST'
# clips and a still, one label each
clips/h264.mp4 0
clips/vp9.webm 1
clips/hevc.mp4 2
clips/av1.mkv 3
clips/vfr.mkv 4
clips/Big Buck.MOV 5
still.jpg 6
LIST
N=7

# The example spec (examples/video/) runs on this list as it is written.
cp "$DATA/list.txt" "$DATA/clips.txt"
"$BIN/sluice" run "$ROOT/examples/video/kinetics-filelist.json" --local --data-root "$DATA" \
    --quiet --threads 2 --epochs 1 --json >"$TMP/example.out" ||
    fail "examples/video/kinetics-filelist.json"
grep -q '"samples":7,' "$TMP/example.out" || fail "example: $(cat "$TMP/example.out")"

# Frames against PyAV's: uniform, no offset, no resize.
cat >"$TMP/oracle.json" <<'JSON'
{"source": {"type": "filelist", "path": "list.txt", "seed": 1},
 "stages": [{"op": "decode_video", "frames": 6}], "batch_size": 3, "epochs": 1}
JSON
"$PY" - "$TMP/oracle.json" "$DATA" "$ROOT/tests/integration/video_oracle.py" "$TMP" <<'PY' ||
import os, subprocess, sys
import numpy as np
import sluice
spec, data, oracle, tmp = sys.argv[1:5]
seen = {}
with sluice.Loader(None, spec, data_root=data, threads=2) as ld:
    for b in ld.batches():
        for i in range(len(b)):
            imgs = b.images[b.image_offsets[i]:b.image_offsets[i + 1]]
            seen[b.keys[i]] = (int(b.labels[i]), [np.array(x) for x in imgs])
assert len(seen) == 7, sorted(seen)
for key, (label, imgs) in sorted(seen.items()):
    if key == "still.jpg":
        assert label == 6 and len(imgs) == 1 and imgs[0].shape == (32, 48, 3), (label, imgs)
        continue
    assert len(imgs) == 6, (key, len(imgs))
    raw = os.path.join(tmp, "pyav.raw")
    out = subprocess.run([sys.executable, oracle, os.path.join(data, key), raw, "uniform", "6"],
                         check=True, capture_output=True, text=True).stdout.split()
    h, w = int(out[2]), int(out[3])
    want = np.fromfile(raw, dtype=np.uint8).reshape(6, h, w, 3)
    got = np.stack(imgs)
    assert got.shape == want.shape, (key, got.shape, want.shape)
    assert np.array_equal(got, want), (key, int(np.abs(got.astype(int) - want).max()))
print("filelist: 6 clips x 6 frames byte-equal to PyAV's, the still one image")
PY
    fail "frames differ from PyAV's"

cat >"$TMP/v.json" <<'JSON'
{"source": {"type": "filelist", "path": "list.txt", "seed": 5},
 "stages": [{"op": "decode_video", "frames": 4, "random_offset": true},
            {"op": "resize", "size": 64}],
 "batch_size": 2, "epochs": 2}
JSON
"$BIN/sluice" run "$TMP/v.json" --local --data-root "$DATA" --quiet --threads 2 \
    --digests "$TMP/local.dig" --dump "$TMP/local.dump" --json >"$TMP/local.out" ||
    fail "local run failed"
sort "$TMP/local.dig" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq $((2 * N)) ] || fail "local: $(wc -l <"$TMP/local.s") digests"
"$PY" - "$TMP/local.dump" <<'PY' || fail "--dump: wrong samples"
import json, sys
dump = [json.loads(l) for l in open(sys.argv[1])]
assert len(dump) == 14, len(dump)
labels = {"clips/h264.mp4": 0, "clips/vp9.webm": 1, "clips/hevc.mp4": 2, "clips/av1.mkv": 3,
          "clips/vfr.mkv": 4, "clips/Big Buck.MOV": 5, "still.jpg": 6}
for d in dump:
    assert d["label"] == labels[d["key"]], d
    n = 1 if d["key"] == "still.jpg" else 4
    assert len(d["images"]) == n, d
print("dump: 14 samples, keys and labels from the list, 4 frames per clip")
PY

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 2 --worker-timeout-ms 3000 --heartbeat-ms 100 --client-timeout-ms 5000
for w in W1 W2; do
    start_daemon $w "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
        --listen 127.0.0.1:0 --data-root "$DATA" --threads 1
done
wait_live_workers "$D_HTTP" 2
remote() { # remote SPEC NAME OFFLOAD [ARGS...]
    local s=$1 name=$2 off=$3
    shift 3
    "$BIN/sluice" run "$s" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet --threads 1 \
        --offload "$off" --digests "$TMP/$name.dig" --json "$@" >"$TMP/$name.out" ||
        fail "$name: run failed"
    sort "$TMP/$name.dig" >"$TMP/$name.s"
}
for off in all 1:0.5; do
    remote "$TMP/v.json" "off.$off" "$off"
    cmp -s "$TMP/off.$off.s" "$TMP/local.s" || fail "--offload $off: digests differ from local"
done
grep -q '"remote":0}' "$TMP/off.all.out" && fail "offload all: nothing came from workers"
for r in 0 1; do
    "$BIN/sluice" run "$TMP/v.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
        --threads 1 --offload all --world-size 2 --rank $r --job-name fl2 \
        --digests "$TMP/rank$r.dig" &
    eval "R$r=\$!"
done
wait "$R0" || fail "rank 0 failed"
wait "$R1" || fail "rank 1 failed"
# Equal shares: 3 of the 7 samples per rank and epoch (the 7th is left
# out, as DistributedSampler's drop_last), each with the local bytes.
sort "$TMP/rank0.dig" "$TMP/rank1.dig" >"$TMP/ranks.s"
[ "$(sort -u "$TMP/ranks.s" | wc -l)" -eq 12 ] || fail "two ranks: $(wc -l <"$TMP/ranks.s") digests"
[ -z "$(comm -23 "$TMP/ranks.s" "$TMP/local.s")" ] || fail "two ranks: digests differ from local"
/usr/bin/python3 - "$TMP/v.json" "$TMP/bal.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["batching"] = {"mode": "balanced", "model": {"a": 1, "c": 20, "d": 10}}
json.dump(s, open(sys.argv[2], "w"))
PY
remote "$TMP/bal.json" bal 1:0.5
cmp -s "$TMP/bal.s" "$TMP/local.s" || fail "balanced batching: other samples or bytes"
# Resume: a local run stopped after 3 batches, resumed with the workers,
# delivers the rest with the same bytes.
"$BIN/sluice" run "$TMP/v.json" --local --data-root "$DATA" --quiet --threads 2 \
    --digests "$TMP/ra.dig" --save-state "$TMP/fl.state" --stop-after-batches 3 ||
    fail "the run to stop"
[ "$(wc -l <"$TMP/ra.dig")" -eq 6 ] || fail "stopped run: $(wc -l <"$TMP/ra.dig") samples"
remote "$TMP/v.json" resumed 1:0.5 --resume "$TMP/fl.state"
sort "$TMP/ra.dig" "$TMP/resumed.dig" | cmp -s - "$TMP/local.s" || fail "resumed: digests differ"
echo "filelist: local = offloaded (all, 1:0.5) = two ranks = balanced = stopped and resumed"

# Broken clips in a list: counted skips with reasons, local and remote.
: >"$DATA/clips/empty.mp4"
head -c 50000 "$DATA/clips/vp9.webm" >"$DATA/clips/cut.webm"
printf 'clips/empty.mp4 0\nclips/cut.webm 1\nclips/h264.mp4 2\n' >"$DATA/bad.txt"
cat >"$TMP/bad.json" <<'JSON'
{"source": {"type": "filelist", "path": "bad.txt", "seed": 1},
 "stages": [{"op": "decode_video", "frames": 2}], "batch_size": 1, "epochs": 1}
JSON
"$BIN/sluice" run "$TMP/bad.json" --local --data-root "$DATA" --quiet --json >"$TMP/bad.out" ||
    fail "bad: the run failed"
remote "$TMP/bad.json" bad.remote all
/usr/bin/python3 - "$TMP/bad.out" "$TMP/bad.remote.out" <<'PY' || fail "broken clips: wrong skips"
import json, sys
def get(p):
    j = json.loads(open(p).read().strip().splitlines()[-1])
    return j["samples"], j["skipped"]["reasons"]
a, b = get(sys.argv[1]), get(sys.argv[2])
assert a == (1, {"empty": 1, "truncated": 1}), a
assert a == b, (a, b)
print("broken clips in a list: %d delivered, skipped %s, local and remote" % a)
PY

# A mix of filelists is images only: decode_video there is refused.
cat >"$TMP/mix.json" <<'JSON'
{"mix": {"sources": [{"name": "a", "source": {"type": "filelist", "path": "list.txt"}},
                     {"name": "b", "source": {"type": "filelist", "path": "bad.txt"}}]},
 "stages": [{"op": "decode_video", "frames": 2}], "batch_size": 1, "epochs": 1}
JSON
if "$BIN/sluice" run "$TMP/mix.json" --local --data-root "$DATA" --quiet >"$TMP/mix.out" 2>&1; then
    fail "a mix of filelists with decode_video ran"
fi
grep -q "decode_video needs a multimodal source (webdataset or jsonl) or a filelist outside a \
mix" "$TMP/mix.out" || fail "mix: the error does not say why: $(cat "$TMP/mix.out")"
# 64 frames per clip (over the old 32): full-size frames of AV1 250x150
# (7.2 MB, under the workers' default 8 MiB message) and HEVC 352x288 and
# H.264 320x240 (19.5 and 14.7 MB: sent as source bytes and decoded by the
# client, docs/protocol.md "Samples too big to send"); then a worker whose
# messages hold 32 MiB sends every record processed. The same digests
# everywhere; 64 images per clip in --dump.
printf 'clips/av1.mkv 0\nclips/hevc.mp4 1\nclips/h264.mp4 2\n' >"$DATA/list64.txt"
cat >"$TMP/f64.json" <<'JSON'
{"source": {"type": "filelist", "path": "list64.txt", "seed": 2},
 "stages": [{"op": "decode_video", "frames": 64, "random_offset": true}],
 "batch_size": 1, "epochs": 1}
JSON
"$BIN/sluice" run "$TMP/f64.json" --local --data-root "$DATA" --quiet --threads 2 \
    --digests "$TMP/f64.dig" --dump "$TMP/f64.dump" >/dev/null || fail "64 frames: local run"
sort "$TMP/f64.dig" >"$TMP/f64.s"
[ "$(wc -l <"$TMP/f64.s")" -eq 3 ] || fail "64 frames local: $(wc -l <"$TMP/f64.s") samples"
"$PY" -c 'import json, sys
d = [json.loads(l) for l in open(sys.argv[1])]
assert sorted(len(x["images"]) for x in d) == [64, 64, 64], d' "$TMP/f64.dump" ||
    fail "64 frames: not 64 images per clip"
unprocessed() { # unprocessed HTTP...: the workers' samples_sent_unprocessed, summed
    local n=0 h
    for h in "$@"; do
        n=$((n + $(curl -sf "http://$h/status" | /usr/bin/python3 -c \
            'import json,sys; print(json.load(sys.stdin)["samples_sent_unprocessed"])')))
    done
    echo "$n"
}
raw0=$(unprocessed "$W1_HTTP" "$W2_HTTP")
remote "$TMP/f64.json" f64.all all
cmp -s "$TMP/f64.all.s" "$TMP/f64.s" || fail "64 frames offloaded: digests differ from local"
raw1=$(unprocessed "$W1_HTTP" "$W2_HTTP")
[ $((raw1 - raw0)) -eq 2 ] || fail "64 frames: $((raw1 - raw0)) records sent unprocessed, not 2"
start_daemon D2 "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 1 --worker-timeout-ms 3000 --heartbeat-ms 100 --client-timeout-ms 5000
start_daemon W3 "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D2_GRPC" \
    --listen 127.0.0.1:0 --data-root "$DATA" --threads 1 --max-message-bytes 33554432
wait_live_workers "$D2_HTTP" 1
"$BIN/sluice" run "$TMP/f64.json" --dispatcher "$D2_GRPC" --data-root "$DATA" --quiet \
    --threads 1 --offload all --digests "$TMP/f64.big.dig" --json >"$TMP/f64.big.out" ||
    fail "64 frames, 32 MiB messages: run failed"
sort "$TMP/f64.big.dig" | cmp -s - "$TMP/f64.s" || fail "64 frames, 32 MiB messages: digests"
grep -q '"remote":3}' "$TMP/f64.big.out" || fail "64 frames: $(cat "$TMP/f64.big.out")"
[ "$(unprocessed "$W3_HTTP")" -eq 0 ] || fail "64 frames: a record went unprocessed at 32 MiB"
echo "64 frames per clip: local = offloaded (2 records too big sent raw at 8 MiB, none at 32 MiB)"

# Beyond the limit: a clear spec error naming the field.
sed 's/"frames": 64/"frames": 300/' "$TMP/f64.json" >"$TMP/f300.json"
if "$BIN/sluice" run "$TMP/f300.json" --local --data-root "$DATA" --quiet >"$TMP/f300.out" 2>&1
then
    fail "frames 300 ran"
fi
grep -q 'stages\[0\].frames: must be an integer in 1..256' "$TMP/f300.out" ||
    fail "frames 300: $(cat "$TMP/f300.out")"
kill -0 "$D_PID" && kill -0 "$W1_PID" && kill -0 "$W2_PID" || fail "a daemon died"
echo "video filelist: all checks passed"
