#!/usr/bin/env bash
# decode_video through the whole system (issue #37) over real daemons on
# loopback: clips made here by Debian's ffmpeg (H.264, HEVC, VP9, AV1, VFR,
# BT.709, full range) as WebDataset members and as jsonl-named files,
# through decode_video (4 frames, random_offset), resize, tokenize and
# template. Every sample once per epoch with identical digests locally,
# fully offloaded, split between client and workers, over two ranks, with
# the planner's plan, with balanced and packed batching (packs within
# their token budget: the frames predicted from the header) and stopped
# then resumed;
# --dump shows 4 frames per clip at the resized size after the sample's
# still image, and the template's sequence counts the frames' tokens;
# another seed moves the frames. Every broken clip (zero bytes, truncated,
# garbage after the header, no video stream, an unsupported codec, frames
# over max_pixels, a decode over timeout_sec) is a counted skip with its
# reason, the same locally and on workers, while the good samples arrive.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/video_clips.sh"

DATA="$TMP/data"
make_clips "$DATA/clips"
"$ROOT/scripts/tokenizer-files" "$DATA/tokenizers" >/dev/null
ff=(ffmpeg -v error -y -nostdin)
B="$DATA/bad"
mkdir -p "$B"
: >"$B/empty.mp4"
"${ff[@]}" -f lavfi -i testsrc2=size=320x240:rate=25:duration=4 -c:v libx264 \
    -movflags +faststart "$B/fast.mp4"
head -c 60000 "$B/fast.mp4" >"$B/truncated.mp4"
head -c 50000 "$DATA/clips/vp9.webm" >"$B/truncated.webm"
/usr/bin/python3 - "$B/fast.mp4" "$B/garbage.mp4" <<'PY'
import random, sys
d = bytearray(open(sys.argv[1], "rb").read())
i = d.find(b"mdat") + 64
rnd = random.Random(7)
d[i:] = bytes(rnd.randrange(256) for _ in range(len(d) - i))
open(sys.argv[2], "wb").write(d)
PY
"${ff[@]}" -f lavfi -i sine=duration=1 -c:a aac "$B/audio.mp4"
"${ff[@]}" -f lavfi -i testsrc2=size=160x120:rate=25:duration=1 -c:v mpeg4 "$B/mpeg4.mp4"
"${ff[@]}" -f lavfi -i testsrc2=size=1280x720:rate=5:duration=1 -c:v libx264 "$B/big.mp4"
rm "$B/fast.mp4"

/usr/bin/python3 - "$DATA" <<'PY'
import io, json, os, sys, tarfile
from PIL import Image
root = sys.argv[1]
good = ["h264.mp4", "bt709.mp4", "vp9.webm", "hevc.mp4", "av1.mkv", "vfr.mkv", "full.mkv"]
bad = sorted(os.listdir(os.path.join(root, "bad")))
def add(t, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))
img = io.BytesIO()
Image.new("RGB", (48, 32), (200, 30, 60)).save(img, "JPEG", quality=90)
os.makedirs(os.path.join(root, "shards"))
os.makedirs(os.path.join(root, "badshards"))
with tarfile.open(os.path.join(root, "shards", "v-000.tar"), "w") as t, \
        open(os.path.join(root, "v.jsonl"), "w") as j:
    open(os.path.join(root, "still.jpg"), "wb").write(img.getvalue())
    for rep in range(2):
        for i, c in enumerate(good):
            key = "s%d_%d" % (rep, i)
            text = "clip %s number %d: what happens in it?" % (c, i)
            add(t, key + ".txt", text.encode())
            add(t, key + ".jpg", img.getvalue())
            add(t, key + "." + c.split(".")[1], open(os.path.join(root, "clips", c), "rb").read())
            j.write(json.dumps({"id": key, "text": text, "image": "still.jpg",
                                "video": "clips/" + c}) + "\n")
with tarfile.open(os.path.join(root, "badshards", "b-000.tar"), "w") as t:
    for i, c in enumerate(bad + ["h264.mp4"]):
        src = os.path.join(root, "clips" if c == "h264.mp4" else "bad", c)
        add(t, "b%d.txt" % i, ("broken clip %s" % c).encode())
        add(t, "b%d.%s" % (i, c.split(".")[1]), open(src, "rb").read())
PY
N=14
# The example spec (examples/video/) runs on this data as it is written.
mkdir -p "$DATA/video-shards"
ln -s ../shards/v-000.tar "$DATA/video-shards/v-000.tar"
"$BIN/sluice" run "$ROOT/examples/video/llava-video.json" --local --data-root "$DATA" --quiet \
    --threads 2 --epochs 1 --json >"$TMP/example.out" || fail "examples/video/llava-video.json"
grep -q '"samples":14,' "$TMP/example.out" || fail "example: $(cat "$TMP/example.out")"

spec() { # spec FILE TYPE PATH SEED [EXTRA_TOP_LEVEL]
    cat >"$1" <<JSON
{"source": {"type": "$2", "path": "$3", "seed": $4},
 "stages": [{"op": "decode_video", "frames": 4, "random_offset": true},
            {"op": "resize", "size": 64},
            {"op": "tokenize", "vocab": "tokenizers/cl100k_base.tiktoken",
             "encoding": "cl100k_base", "max_tokens": 64},
            {"op": "template", "image_token": 100258, "tokens_per_tile": 3, "eos": 100257}],
 "batch_size": 4, "epochs": 2${5:-}}
JSON
}
spec "$TMP/wds.json" webdataset shards 5
spec "$TMP/jsonl.json" jsonl v.jsonl 5
spec "$TMP/seed6.json" webdataset shards 6

local_run() { # local_run SPEC NAME [ARGS...]
    local s=$1 name=$2
    shift 2
    "$BIN/sluice" run "$s" --local --data-root "$DATA" --quiet --threads 2 \
        --digests "$TMP/$name.dig" --json "$@" >"$TMP/$name.out" || fail "$name: run failed"
    sort "$TMP/$name.dig" >"$TMP/$name.s"
}
local_run "$TMP/wds.json" wds --dump "$TMP/wds.dump"
[ "$(wc -l <"$TMP/wds.s")" -eq $((2 * N)) ] || fail "webdataset: $(wc -l <"$TMP/wds.s") digests"
[ "$(cut -d' ' -f1,2 "$TMP/wds.s" | sort -u | wc -l)" -eq $((2 * N)) ] || fail "duplicates"
/usr/bin/python3 - "$TMP/wds.dump" <<'PY' || fail "--dump: wrong frames"
import json, sys
src = {"h264": [240, 320], "bt709": [360, 640], "vp9": [242, 320], "hevc": [288, 352],
       "av1": [150, 250], "vfr": [240, 320], "full": [144, 176]}
good = ["h264", "bt709", "vp9", "hevc", "av1", "vfr", "full"]
dump = [json.loads(l) for l in open(sys.argv[1])]
assert len(dump) == 28, len(dump)
for d in dump:
    clip = good[int(d["key"].split("_")[1])]
    # the still image, then 4 frames; sizes are the sources' (h, w)
    assert d["images"] == [[32, 48]] + [src[clip]] * 4, (d["key"], d["images"])
    assert d["seq_len"] == len(d["tokens"]) + 3 * 5 + 1, d
print("dump: 28 samples, a still image and 4 frames each, template counted 5 images")
PY

# swscale scaled the frames while decoding: the resize unit only grew the
# still image (48x32 -> 96x64), by exactly that many bytes per sample.
/usr/bin/python3 - "$TMP/wds.out" <<'PY' || fail "resize sizes"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
u = {x["name"]: x for x in j["units"]}
grow = u["resize"]["out_bytes_per_sample"] - u["decode_video"]["out_bytes_per_sample"]
assert grow == 96 * 64 * 3 - 48 * 32 * 3, u
assert u["resize"]["out_bytes_per_sample"] < 5 * 64 * 120 * 3 + 4096, u
PY

local_run "$TMP/jsonl.json" jsonl --dump "$TMP/jsonl.dump"
/usr/bin/python3 - "$TMP/wds.dump" "$TMP/jsonl.dump" <<'PY' || fail "jsonl and webdataset differ"
import json, sys
def load(p):
    return {(d["epoch"], d["key"]): (d["tokens"], d["images"], d["seq_len"])
            for d in map(json.loads, open(p))}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys() and a == b
PY
local_run "$TMP/seed6.json" seed6
cmp -s "$TMP/seed6.s" "$TMP/wds.s" && fail "another seed gave the same frames"
echo "local: webdataset and jsonl identical; 4 frames per clip; another seed moves the frames"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 4 --worker-timeout-ms 3000 --heartbeat-ms 100 --client-timeout-ms 5000
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
for off in all 1:0.5 2:0.3; do
    remote "$TMP/wds.json" "wds.$off" "$off"
    cmp -s "$TMP/wds.$off.s" "$TMP/wds.s" || fail "--offload $off: digests differ from local"
done
grep -q '"remote":0}' "$TMP/wds.all.out" && fail "offload all: nothing came from workers"
remote "$TMP/jsonl.json" jsonl.all all
cmp -s "$TMP/jsonl.all.s" "$TMP/jsonl.s" || fail "jsonl offloaded: digests differ"
for r in 0 1; do
    "$BIN/sluice" run "$TMP/wds.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
        --threads 1 --offload all --world-size 2 --rank $r --job-name v2 \
        --digests "$TMP/rank$r.dig" &
    eval "R$r=\$!"
done
wait "$R0" || fail "rank 0 failed"
wait "$R1" || fail "rank 1 failed"
sort "$TMP/rank0.dig" "$TMP/rank1.dig" >"$TMP/ranks.s"
cmp -s "$TMP/ranks.s" "$TMP/wds.s" || fail "two ranks: union of digests differs"
echo "offloaded (all, 1:0.5, 2:0.3), jsonl offloaded and two ranks: identical digests"

# The planner's own plan (profiled: clips' costs from their headers) and
# balanced batching (frames counted as images in the trainer cost): the
# same samples, the same bytes.
remote "$TMP/wds.json" wds.auto auto
cmp -s "$TMP/wds.auto.s" "$TMP/wds.s" || fail "--offload auto: digests differ"
spec "$TMP/bal.json" webdataset shards 5 \
    ', "batching": {"mode": "balanced", "model": {"a": 1, "c": 20, "d": 10}}'
remote "$TMP/bal.json" bal 1:0.5
cmp -s "$TMP/bal.s" "$TMP/wds.s" || fail "balanced batching: other samples or bytes"
echo "auto plan and balanced batching: identical digests"

# Packed batching: packs of whole samples within a token budget, the
# lengths predicted before decoding (the frames a clip will give, from its
# container header, times tokens_per_tile). 40 tokens per image make the
# frames most of a sequence: had the prediction counted a clip as one
# image, packs would overflow the budget. Two ranks, locally and with the
# workers: every sample once per epoch, the bytes of a 40-token count run.
cat >"$TMP/pk.json" <<JSON
{"source": {"type": "webdataset", "path": "shards", "seed": 5},
 "stages": [{"op": "decode_video", "frames": 4, "random_offset": true},
            {"op": "resize", "size": 64},
            {"op": "tokenize", "vocab": "tokenizers/cl100k_base.tiktoken",
             "encoding": "cl100k_base", "max_tokens": 64},
            {"op": "template", "image_token": 100258, "tokens_per_tile": 40, "eos": 100257}],
 "batch_size": 4, "epochs": 2,
 "batching": {"mode": "packed", "microbatches": 2, "token_budget": 500,
              "model": {"a": 1, "c": 20, "d": 10}}}
JSON
sed 's/"batching": {"mode": "packed".*/"batching": {"mode": "count"}}/; /"model": {"a": 1, "c": 20/d' \
    "$TMP/pk.json" >"$TMP/pkc.json"
local_run "$TMP/pkc.json" pkc
for how in local remote; do
    for r in 0 1; do
        if [ $how = local ]; then
            set -- --local --threads 2
        else
            set -- --dispatcher "$D_GRPC" --threads 1 --offload 1:0.5 --job-name pk2
        fi
        "$BIN/sluice" run "$TMP/pk.json" "$@" --data-root "$DATA" --quiet --world-size 2 \
            --rank $r --digests "$TMP/pk.$how$r.dig" --dump "$TMP/pk.$how$r.dump" \
            2>"$TMP/pk.$how$r.err" &
        eval "R$r=\$!"
    done
    wait "$R0" || fail "packed $how: rank 0 failed: $(cat "$TMP/pk.${how}0.err")"
    wait "$R1" || fail "packed $how: rank 1 failed: $(cat "$TMP/pk.${how}1.err")"
    sort "$TMP/pk.${how}0.dig" "$TMP/pk.${how}1.dig" | cmp -s - "$TMP/pkc.s" ||
        fail "packed $how: not every sample once with the count run's bytes"
    /usr/bin/python3 - "$TMP/pk.${how}0.dump" "$TMP/pk.${how}1.dump" <<'PY' ||
import json, sys
packs = {}
for path in sys.argv[1:]:
    for d in map(json.loads, open(path)):
        assert len(d["images"]) == 5, d
        packs.setdefault((d["epoch"], d["rank"], d["step"], d["microbatch"]), []).append(d)
sizes = sorted(len(p) for p in packs.values())
for k, p in packs.items():
    total = sum(d["seq_len"] for d in p)
    assert total <= 500, (k, total, [d["seq_len"] for d in p])
assert max(sizes) > 1, sizes  # packs of several samples: the frames were predicted
print("packed: %d packs of %s samples, each within 500 tokens" % (len(packs), sizes))
PY
        fail "packed $how: a pack over its budget"
done
echo "packed batching (local, offloaded, 2 ranks): every sample once, the count run's bytes"

# Resume: a local run stopped after 3 batches, resumed through the workers,
# delivers the rest with the same frames (random offsets keyed by seed,
# epoch and index, never by who decodes).
"$BIN/sluice" run "$TMP/wds.json" --local --data-root "$DATA" --quiet --threads 2 \
    --digests "$TMP/ra.dig" --save-state "$TMP/video.state" --stop-after-batches 3 ||
    fail "the run to stop"
[ "$(wc -l <"$TMP/ra.dig")" -eq 12 ] || fail "stopped run: $(wc -l <"$TMP/ra.dig") samples"
remote "$TMP/wds.json" resumed 1:0.5 --resume "$TMP/video.state"
sort "$TMP/ra.dig" "$TMP/resumed.dig" | cmp -s - "$TMP/wds.s" || fail "resumed: digests differ"
echo "stopped after 12 samples, resumed offloaded: the rest, identical digests"

# Broken clips: counted skips with reasons, local and remote alike.
cat >"$TMP/bad.json" <<JSON
{"source": {"type": "webdataset", "path": "badshards", "seed": 1},
 "stages": [{"op": "decode_video", "frames": 2}], "max_pixels": 500000,
 "batch_size": 2, "epochs": 1}
JSON
cat >"$TMP/slow.json" <<JSON
{"source": {"type": "webdataset", "path": "shards", "seed": 1},
 "stages": [{"op": "decode_video", "frames": 8, "timeout_sec": 0.000001}],
 "batch_size": 2, "epochs": 1}
JSON
for s in bad slow; do
    "$BIN/sluice" run "$TMP/$s.json" --local --data-root "$DATA" --quiet --json \
        >"$TMP/$s.out" || fail "$s: the run failed"
    "$BIN/sluice" run "$TMP/$s.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
        --offload all --json >"$TMP/$s.remote.out" || fail "$s remote: the run failed"
done
/usr/bin/python3 - "$TMP" <<'PY' || fail "broken clips: wrong skips"
import json, sys
def get(name):
    j = json.loads(open(sys.argv[1] + "/" + name).read().strip().splitlines()[-1])
    return j["samples"], j["skipped"]["reasons"], j["skipped"]["recent"]
want = {"empty": 1, "truncated": 2, "corrupt": 1, "no_video_stream": 1, "other_codec": 1,
        "too_large": 1}
d, skips, recent = get("bad.out")
rd, rskips, _ = get("bad.remote.out")
assert skips == want, skips
assert d == 1, d  # the one good clip of the shard
assert (d, skips) == (rd, rskips), (d, skips, rd, rskips)
for r in recent:
    assert r["detail"], r
print("broken clips: %d delivered, skipped %s" % (d, skips))
d, skips, _ = get("slow.out")
rd, rskips, _ = get("slow.remote.out")
assert d == 0 and skips == {"decode_timeout": 14}, (d, skips)
assert (rd, rskips) == (d, skips), (rd, rskips)
print("timeout_sec: every clip a decode_timeout skip")
PY
kill -0 "$D_PID" && kill -0 "$W1_PID" && kill -0 "$W2_PID" || fail "a daemon died"
echo "video: all checks passed"
