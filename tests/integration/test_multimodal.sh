#!/usr/bin/env bash
# Multimodal records end to end (docs/records.md) over real daemons on
# loopback: a skewed LLaVA-style set (scripts/make-dataset --multimodal) as
# WebDataset shards and as a jsonl manifest, through decode_image,
# image_tiles, tokenize (cl100k_base ranks) and template. Every sample is
# delivered exactly once per epoch with the same digests locally, fully
# offloaded, split between client and workers, and over two ranks; a worker
# killed mid-run loses nothing; --dump shows tokens, image sizes, tiles and
# sequence lengths; and every broken input (invalid UTF-8, no text, a member
# that is not an image, corrupt and truncated images, a truncated shard, a
# malformed manifest line, a path out of the root, a missing file) is a
# counted skip with its reason while the good samples around it arrive.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 96 \
    --per-shard 16 --size-scale 0.2 --broken --seed 11 --quiet
"$ROOT/scripts/tokenizer-files" "$DATA/tokenizers" >/dev/null
N=96

spec() { # spec FILE TYPE PATH [EXTRA_STAGE_JSON]
    cat >"$1" <<JSON
{"source": {"type": "$2", "path": "$3", "seed": 5},
 "stages": [{"op": "decode_image"},
            {"op": "image_tiles", "tile": 32, "max_tiles": 6, "thumbnail": true},
            {"op": "tokenize", "vocab": "tokenizers/cl100k_base.tiktoken",
             "encoding": "cl100k_base", "max_tokens": 300},
            {"op": "template", "image_token": 100258, "tokens_per_tile": 4, "eos": 100257},
            {"op": "normalize", "on": "device"}${4:-}],
 "batch_size": 8, "epochs": 2}
JSON
}
spec "$TMP/wds.json" webdataset mm-shards
spec "$TMP/jsonl.json" jsonl mm.jsonl

local_run() { # local_run SPEC NAME [ARGS...]
    local s=$1 name=$2
    shift 2
    "$BIN/sluice" run "$s" --local --data-root "$DATA" --quiet --threads 2 \
        --digests "$TMP/$name.dig" --json "$@" >"$TMP/$name.out" || fail "$name: run failed"
    sort "$TMP/$name.dig" >"$TMP/$name.s"
}

local_run "$TMP/wds.json" wds --dump "$TMP/wds.dump"
[ "$(wc -l <"$TMP/wds.s")" -eq $((2 * N)) ] || fail "webdataset: $(wc -l <"$TMP/wds.s") digests, want $((2 * N))"
# Exactly once per epoch: every (epoch, index) once, keys as the shards name them.
[ "$(cut -d' ' -f1,2 "$TMP/wds.s" | sort -u | wc -l)" -eq $((2 * N)) ] || fail "duplicates"
/usr/bin/python3 - "$TMP/wds.dump" "$DATA" <<'PY' || fail "--dump disagrees with the data set"
import json, sys, tarfile, glob, os
dump = [json.loads(l) for l in open(sys.argv[1])]
assert len(dump) == 192, len(dump)
meta = {}
for shard in sorted(glob.glob(os.path.join(sys.argv[2], "mm-shards", "*.tar"))):
    for m in tarfile.open(shard):
        if m.name.endswith(".json"):
            j = json.load(tarfile.open(shard).extractfile(m))
            meta[j["id"]] = j
for d in dump:
    m = meta[d["key"]]
    assert len(d["images"]) == m["n_images"], (d["key"], d["images"], m["n_images"])
    # image_sizes in the metadata are [width, height]; the dump says [h, w].
    for hw, wh in zip(d["images"], m["image_sizes"]):
        assert hw == [wh[1], wh[0]], (d["key"], hw, wh)
    assert len(d["tiles"]) == len(d["images"])
    for t in d["tiles"]:
        assert 1 <= t <= 7, t  # up to 6 + the thumbnail
    assert 0 < len(d["tokens"]) <= 300
    assert d["seq_len"] == len(d["tokens"]) + 4 * sum(d["tiles"]) + 1, d
print("dump: %d samples, %d images, %d tiles, max seq_len %d" % (
    len(dump), sum(len(d["images"]) for d in dump), sum(sum(d["tiles"]) for d in dump),
    max(d["seq_len"] for d in dump)))
PY

# The jsonl layout holds the same samples: the same tokens, images, tiles.
local_run "$TMP/jsonl.json" jsonl --dump "$TMP/jsonl.dump"
[ "$(wc -l <"$TMP/jsonl.s")" -eq $((2 * N)) ] || fail "jsonl: wrong digest count"
/usr/bin/python3 - "$TMP/wds.dump" "$TMP/jsonl.dump" <<'PY' || fail "jsonl and webdataset differ"
import json, sys
def load(p):
    return {d["key"]: (d["tokens"], d["images"], d["tiles"], d["seq_len"])
            for d in map(json.loads, open(p))}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), set(a) ^ set(b)
for k in a:
    assert a[k] == b[k], k
PY

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 3000
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
for off in all 1:0.5 3:0.3; do
    remote "$TMP/wds.json" "wds.$off" "$off"
    cmp -s "$TMP/wds.$off.s" "$TMP/wds.s" || fail "webdataset --offload $off: digests differ"
done
grep -q '"remote":0}' "$TMP/wds.all.out" && fail "offload all: nothing came from workers"
remote "$TMP/jsonl.json" jsonl.all all
cmp -s "$TMP/jsonl.all.s" "$TMP/jsonl.s" || fail "jsonl offloaded: digests differ"
echo "local, offloaded (all, 1:0.5, 3:0.3) and jsonl: identical digests"

remote "$TMP/wds.json" wds.auto auto
cmp -s "$TMP/wds.auto.s" "$TMP/wds.s" || fail "webdataset --offload auto: digests differ"
echo "auto: $(/usr/bin/python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["plan"]
print("split %d share %.2f" % (p["split"], p["local_share"]))' "$TMP/wds.auto.out"), identical digests"

# Two ranks: disjoint shares whose union is the whole epoch (96 divides by 2).
for r in 0 1; do
    "$BIN/sluice" run "$TMP/wds.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
        --threads 1 --offload all --world-size 2 --rank $r --job-name mm2 \
        --digests "$TMP/rank$r.dig" &
    eval "R$r=\$!"
done
wait "$R0" || fail "rank 0 failed"
wait "$R1" || fail "rank 1 failed"
sort "$TMP/rank0.dig" "$TMP/rank1.dig" >"$TMP/ranks.s"
cmp -s "$TMP/ranks.s" "$TMP/wds.s" || fail "two ranks: union of digests differs from one consumer"
echo "two ranks: disjoint shares, union identical"

# A worker killed mid-run: its splits are retried, nothing lost or doubled.
"$BIN/sluice" run "$TMP/wds.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
    --threads 1 --offload all --max-rate 60 --digests "$TMP/kill.dig" &
RUN=$!
sleep 1
kill -9 "$W2_PID"
wait "$RUN" || fail "run with a killed worker failed"
sort "$TMP/kill.dig" >"$TMP/kill.s"
cmp -s "$TMP/kill.s" "$TMP/wds.s" || fail "worker killed: digests differ"
echo "worker killed mid-run: identical digests"

# Broken inputs: counted skips with reasons; the good samples arrive.
spec "$TMP/bad_wds.json" webdataset mm-broken
spec "$TMP/bad_jsonl.json" jsonl mm-broken.jsonl
for s in bad_wds bad_jsonl; do
    "$BIN/sluice" run "$TMP/$s.json" --local --data-root "$DATA" --quiet --epochs 1 \
        --json >"$TMP/$s.out" || fail "$s: the run failed"
    "$BIN/sluice" run "$TMP/$s.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
        --offload all --epochs 1 --json >"$TMP/$s.remote.out" || fail "$s remote: the run failed"
done
/usr/bin/python3 - "$TMP" <<'PY' || fail "broken inputs: wrong skips"
import json, sys
def get(name):
    j = json.loads(open(sys.argv[1] + "/" + name).read().strip().splitlines()[-1])
    return j["samples"], j["skipped"]["reasons"]
for name, want in (("bad_wds", {"bad_text", "no_text", "not_jpeg", "corrupt", "truncated"}),
                   ("bad_jsonl", {"bad_manifest", "outside_root", "io", "no_text"})):
    d, skips = get(name + ".out")
    rd, rskips = get(name + ".remote.out")
    missing = want - set(skips)
    assert not missing, (name, "missing reasons", missing, skips)
    assert d > 0, (name, "no good sample delivered")
    assert (d, skips) == (rd, rskips), (name, "local and remote differ", d, skips, rd, rskips)
    print("%s: %d delivered, skipped %s" % (name, d, skips))
PY
kill -0 "$D_PID" && kill -0 "$W1_PID" || fail "a daemon died"

# A worker that damages every record it sends (test-only SLUICE_TEST_CORRUPT_RECORDS):
# the client checks each received record whole and counts it a corrupt skip; nothing
# crashes and every other sample arrives once.
kill -9 "$W1_PID"
SLUICE_TEST_CORRUPT_RECORDS=1 start_daemon WBAD "$BIN/sluice-worker" --http 127.0.0.1:0 \
    --dispatcher "$D_GRPC" --listen 127.0.0.1:0 --data-root "$DATA" --threads 1
"$BIN/sluice" run "$TMP/wds.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
    --threads 1 --offload 1:0.5 --epochs 1 --json >"$TMP/badrec.out" ||
    fail "damaged records: the run failed"
/usr/bin/python3 - "$TMP/badrec.out" <<'PY' || fail "damaged records: wrong counts"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
bad = j["skipped"]["reasons"].get("corrupt", 0)
assert 0 < bad <= j["sources"]["remote"], j
assert j["samples"] + bad == 96, (j["samples"], bad)
assert any("record" in k["detail"] for k in j["skipped"]["recent"]), j["skipped"]["recent"][:2]
print("damaged records: %d corrupt skips, %d delivered" % (bad, j["samples"]))
PY
kill -0 "$D_PID" && kill -0 "$WBAD_PID" || fail "a daemon died"

# A worker whose messages hold 72 KiB: many-image samples' tiles do not fit, so it
# sends their source bytes (smaller) for the client to finish -- nothing skipped,
# same bytes.
kill -9 "$WBAD_PID"
start_daemon WSMALL "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
    --listen 127.0.0.1:0 --data-root "$DATA" --threads 1 --max-message-bytes 73728
wait_live_workers "$D_HTTP" 1
remote "$TMP/wds.json" wds.small all
cmp -s "$TMP/wds.small.s" "$TMP/wds.s" || fail "72 KiB messages: digests differ from --local"
/usr/bin/python3 -c 'import json, sys
u = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["units"]
assert u[0]["samples"] > 0, u  # this client decoded what the worker could not send
print("72 KiB messages: %d samples finished here" % u[0]["samples"])' "$TMP/wds.small.out" ||
    fail "72 KiB messages: no sample was finished here"
grep -q '"fallback"' "$TMP/wds.small.out" && fail "72 KiB messages: the job fell back to the client"
raw=$(curl -sf "http://$WSMALL_HTTP/status" | /usr/bin/python3 -c \
    'import json,sys; print(json.load(sys.stdin)["samples_sent_unprocessed"])')
[ "$raw" -gt 0 ] || fail "72 KiB messages: the worker reports none sent unprocessed"
curl -sf "http://$WSMALL_HTTP/metrics" >"$TMP/wmetrics.txt" # whole: no SIGPIPE under pipefail
grep -q "^sluice_worker_samples_sent_unprocessed_total $raw" "$TMP/wmetrics.txt" ||
    fail "72 KiB messages: /metrics lacks the count"
echo "72 KiB messages: oversized samples sent unprocessed and finished here, identical digests"

# The Python binding's RecordBatch: ragged arrays consistent with each other and
# with --dump, views of the library's memory.
python_env
"$PY" - "$TMP/wds.json" "$DATA" "$TMP/wds.dump" <<'PY' || fail "RecordBatch"
import json, sys
import numpy as np
import sluice
dump = {(d["epoch"], d["key"]): d for d in map(json.loads, open(sys.argv[3]))}
seen = 0
with sluice.Loader(None, sys.argv[1], data_root=sys.argv[2], epochs=1, threads=2) as ld:
    for b in ld:
        assert isinstance(b, sluice.RecordBatch), type(b)
        n = len(b)
        assert b.cu_seqlens.shape == (n + 1,) and b.cu_seqlens[-1] == len(b.input_ids)
        assert (np.diff(b.cu_seqlens) == b.seq_lens).all()
        assert b.token_offsets[-1] == len(b.tokens)
        assert b.tiles.dtype == np.uint8 and b.tiles.shape[1:] == (3, 32, 32), b.tiles.shape
        assert b.tiles.shape[0] == b.tile_offsets[-1] == b.tiles_per_image.sum()
        assert b.normalize is not None and len(b.normalize[0]) == 3
        assert b.tiles.base is not None  # a view, not a copy
        for i in range(n):
            d = dump[(b.epoch, b.keys[i])]
            ids = b.input_ids[b.cu_seqlens[i]:b.cu_seqlens[i + 1]]
            assert len(ids) == d["seq_len"] and ids[-1] == 100257
            toks = b.tokens[b.token_offsets[i]:b.token_offsets[i + 1]]
            assert toks.tolist() == d["tokens"], b.keys[i]
            hw = b.image_hw[b.image_offsets[i]:b.image_offsets[i + 1]].tolist()
            assert hw == d["images"], (hw, d["images"])
            assert isinstance(b.metas[i], dict) and b.texts[i]
        seen += n
assert seen == 96, seen
print("RecordBatch: %d samples, arrays consistent with --dump" % seen)
PY

# The PyTorch consumer of examples/ runs on this data (torch on the CPU).
"$PY" "$ROOT/examples/multimodal/train.py" --spec "$TMP/wds.json" --data-root "$DATA" \
    --epochs 1 >"$TMP/train.out" || fail "examples/multimodal/train.py failed"
grep -q '^trained on 96 samples' "$TMP/train.out" || {
    cat "$TMP/train.out"
    fail "the example consumer did not see every sample"
}
echo "multimodal: ok"
