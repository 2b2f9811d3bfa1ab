#!/usr/bin/env bash
# Weighted mixing of data sources ("mix", docs/mixing.md) over real daemons:
# a webdataset and a jsonl source (scripts/make-dataset --multimodal makes
# both), then three sources. Local: every epoch holds each source's share
# within one sample in every prefix of the delivered order, no source
# repeats under "first_exhausted", per-source counts and shares in --json,
# a "source" on every --dump line; two ranks deliver the one rank's multiset
# of samples and bytes. /status and /metrics show each source's positions
# and share. Offloaded through workers, one of them killed: the
# same multiset again (exactly once), also through a dispatcher restart on
# its journal. Resume 4 -> 2 ranks: exactly the rest; after a weight
# change each source goes on where it was; after another change: refused. Broken specs and sources: exit 2 naming
# the field or the source.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 96 \
    --per-shard 24 --size-scale 0.2 --seed 31 --quiet
"$ROOT/scripts/tokenizer-files" "$DATA/tokenizers" >/dev/null
: >"$DATA/empty.jsonl"
EPOCHS=2
STAGES='[{"op": "decode_image"},
         {"op": "image_tiles", "tile": 32, "max_tiles": 4},
         {"op": "tokenize", "vocab": "tokenizers/cl100k_base.tiktoken", "max_tokens": 300},
         {"op": "template", "image_token": 100258, "tokens_per_tile": 16, "eos": 100257},
         {"op": "normalize", "on": "device"}]'
TOKENIZE='{"op": "tokenize", "vocab": "tokenizers/cl100k_base.tiktoken", "max_tokens": 300}'
TEMPLATE='{"op": "template", "image_token": 100258, "tokens_per_tile": 16, "eos": 100257}'
CAPS='{"name": "caps", "weight": 3, "source": {"type": "webdataset", "path": "mm-shards"}}'
DOCS='{"name": "docs", "weight": 1, "source": {"type": "jsonl", "path": "mm.jsonl"}}'
ONE='{"name": "one", "weight": 2, "source": {"type": "webdataset",
       "path": "mm-shards/shard-000001.tar"}}'
spec() { # spec FILE MIX-JSON [EXTRA]
    cat >"$1" <<JSON
{"mix": $2, "stages": $STAGES, "batch_size": 8, "epochs": $EPOCHS, "deterministic": true${3:-}}
JSON
}
spec "$TMP/two.json" "{\"sources\": [$CAPS, $DOCS], \"seed\": 4, \"stop\": \"first_exhausted\"}"
spec "$TMP/three.json" "{\"sources\": [$CAPS, $DOCS, $ONE], \"seed\": 5}"

# Broken specs and sources: refused before anything runs, exit 2, naming it.
bad() { # bad NAME MIX-JSON EXPECTED-TEXT [EXTRA]
    spec "$TMP/bad.json" "$2" "${4:-}"
    set +e
    "$BIN/sluice" run "$TMP/bad.json" --local --data-root "$DATA" --quiet 2>"$TMP/bad.err"
    local rc=$?
    set -e
    [ $rc -eq 2 ] || { cat "$TMP/bad.err"; fail "$1: exit $rc, not 2"; }
    grep -qF "$3" "$TMP/bad.err" || { cat "$TMP/bad.err"; fail "$1: no '$3' in the error"; }
}
src() { # src NAME WEIGHT TYPE PATH
    echo "{\"name\": \"$1\", \"weight\": $2, \"source\": {\"type\": \"$3\", \"path\": \"$4\"}}"
}
bad "weight 0" "{\"sources\": [$(src a 0 jsonl mm.jsonl)]}" 'mix.sources[0].weight: must be'
bad "weight < 0" "{\"sources\": [$(src a -2 jsonl mm.jsonl)]}" 'mix.sources[0].weight: must be'
bad "weight NaN" "{\"sources\": [$(src a '"NaN"' jsonl mm.jsonl)]}" \
    'mix.sources[0].weight: must be a finite number > 0, got "NaN"'
bad "all zero" "{\"sources\": [$CAPS, $DOCS], \"schedule\": [{\"from_step\": 3,
     \"weights\": {\"caps\": 0, \"docs\": 0}}]}" 'mix.schedule[0].weights: must give some source'
bad "duplicate names" "{\"sources\": [$CAPS, $CAPS]}" 'mix.sources[1].name: duplicate'
bad "empty name" "{\"sources\": [$(src '' 1 jsonl mm.jsonl)]}" 'mix.sources[0].name: must be'
bad "mix and source" "{\"sources\": [$CAPS]}" 'mix: and "source" both given' \
    ', "source": {"type": "jsonl", "path": "mm.jsonl"}'
bad "schedule backwards" "{\"sources\": [$CAPS, $DOCS], \"schedule\": [{\"from_step\": 9,
     \"weights\": {\"caps\": 1}}, {\"from_step\": 2, \"weights\": {\"docs\": 1}}]}" \
    'mix.schedule[1].from_step: must be larger'
bad "a source's stage not the job's" "{\"sources\": [{\"name\": \"a\", \"weight\": 1,
     \"stages\": [{\"op\": \"flip\"}], \"source\": {\"type\": \"jsonl\", \"path\": \"mm.jsonl\"}}]}" \
    'mix.sources[0].stages[0]: this "flip" stage is not one of the job'"'"'s "stages"'
bad "a source's stages out of order" "{\"sources\": [$CAPS, {\"name\": \"t\", \"weight\": 1,
     \"stages\": [$TEMPLATE, $TOKENIZE],
     \"source\": {\"type\": \"jsonl\", \"path\": \"mm.jsonl\"}}]}" \
    'mix.sources[1].stages[1]: '
bad "a source leaving out tokenize" "{\"sources\": [$CAPS, {\"name\": \"t\", \"weight\": 1,
     \"stages\": [$TEMPLATE], \"source\": {\"type\": \"jsonl\", \"path\": \"mm.jsonl\"}}]}" \
    'mix.sources[1].stages: leaves out the job'"'"'s stage 2 ("tokenize"): the sources must make one sample kind, so a record source may leave out only image stages'
bad "empty source" "{\"sources\": [$CAPS, $(src nothing 1 jsonl empty.jsonl)]}" \
    'mix.sources[1] ("nothing"): jsonl '"'"'empty.jsonl'"'"' has no samples'
bad "unreadable source" "{\"sources\": [$CAPS, $(src gone 1 jsonl gone.jsonl)]}" \
    'mix.sources[1] ("gone"): '
echo "bad specs and sources: exit 2, named"

# Local, two sources: P = min(96 / 0.75, 96 / 0.25) = 128 positions an epoch.
"$BIN/sluice" run "$TMP/two.json" --local --data-root "$DATA" --quiet --threads 2 \
    --digests "$TMP/l2.dig" --dump "$TMP/l2.dump" --json >"$TMP/l2.json" ||
    fail "local two-source run failed"
[ "$(wc -l <"$TMP/l2.dig")" -eq $((128 * EPOCHS)) ] || fail "two sources: not 128 an epoch"
check_shares() { # check_shares DUMP JSON W1 W2 ...: prefixes within one, --json agrees
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
dump, summary, w = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3:]]
total = sum(w)
lines = [json.loads(l) for l in open(dump)]
names = []
for d in lines:
    assert "source" in d, d
    if d["source"] not in names:
        names.append(d["source"])
by_epoch = {}
for d in lines:
    by_epoch.setdefault(d["epoch"], []).append(d)
order = json.load(open(summary))["mix"]
names = [s["name"] for s in order["sources"]]
for e, ds in by_epoch.items():
    got = dict.fromkeys(names, 0)
    for i, d in enumerate(ds):
        got[d["source"]] += 1
        for n, wn in zip(names, w):
            assert abs(got[n] - wn / total * (i + 1)) <= 1.0, (e, i, n, got)
    assert len(ds) == order["samples_per_epoch"], (len(ds), order)
counts = {s["name"]: s["samples"] for s in order["sources"]}
for n, wn in zip(names, w):
    want = wn / total * len(lines)
    assert abs(counts[n] - want) <= len(by_epoch), (n, counts, want)
print("shares: %s over %d epochs of %d" % (counts, len(by_epoch), order["samples_per_epoch"]))
PY
}
check_shares "$TMP/l2.dump" "$TMP/l2.json" 3 1 || fail "two sources: shares"
# first_exhausted: no sample twice within an epoch.
[ -z "$(awk '{print $1, $2}' "$TMP/l2.dig" | sort | uniq -d)" ] || fail "a sample repeats"

# Three sources (all_exhausted by default: the small one wraps).
"$BIN/sluice" run "$TMP/three.json" --local --data-root "$DATA" --quiet --threads 2 \
    --digests "$TMP/l3.dig" --dump "$TMP/l3.dump" --json >"$TMP/l3.json" ||
    fail "local three-source run failed"
check_shares "$TMP/l3.dump" "$TMP/l3.json" 3 1 2 || fail "three sources: shares"

# The config example (conf/mix-multimodal.json): its schedule moves 0.7 / 0.3 to
# 0.5 / 0.5 at step 20 (position 160 of the 320 that all_exhausted gives 96 + 96).
"$BIN/sluice" run "$ROOT/conf/mix-multimodal.json" --local --data-root "$DATA" --quiet \
    --threads 2 --json >"$TMP/conf.json" || fail "conf/mix-multimodal.json failed"
/usr/bin/python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["mix"]
assert m["samples_per_epoch"] == 320, m
assert [s["samples"] for s in m["sources"]] == [112 + 80, 48 + 80], m' "$TMP/conf.json" ||
    fail "the schedule did not change the mix at its step"

# Two ranks: together the one rank's samples and bytes (128 divides by 2).
for r in 0 1; do
    "$BIN/sluice" run "$TMP/two.json" --local --data-root "$DATA" --quiet --threads 2 \
        --world-size 2 --rank $r --digests "$TMP/r$r.dig" || fail "rank $r failed"
done
sort "$TMP/r0.dig" "$TMP/r1.dig" >"$TMP/ranks.s"
sort "$TMP/l2.dig" >"$TMP/l2.s"
cmp -s "$TMP/ranks.s" "$TMP/l2.s" || fail "2 ranks deliver other samples than 1 rank"
echo "2 ranks == 1 rank: $(wc -l <"$TMP/ranks.s") samples"

# Image sources of two kinds (an imagefolder and tar shards, the same JPEGs
# in two layouts): one rank and two ranks deliver the same multiset.
make_images "$TMP/img" 3 12 both
cat >"$TMP/img.json" <<'JSON'
{"mix": {"sources": [{"name": "folder", "weight": 1, "source": {"type": "imagefolder",
                                                                 "path": "train"}},
                     {"name": "shards", "weight": 2, "source": {"type": "tar", "path": "shards"}}],
         "seed": 2},
 "stages": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 32}, {"op": "to_chw"}],
 "batch_size": 6, "epochs": 1}
JSON
"$BIN/sluice" run "$TMP/img.json" --local --data-root "$TMP/img" --quiet --threads 2 \
    --digests "$TMP/i1.dig" --json >"$TMP/i1.json" || fail "image mix failed"
for r in 0 1; do
    "$BIN/sluice" run "$TMP/img.json" --local --data-root "$TMP/img" --quiet --threads 2 \
        --world-size 2 --rank $r --digests "$TMP/i2$r.dig" || fail "image mix rank $r failed"
done
sort "$TMP/i1.dig" >"$TMP/i1.s"
sort "$TMP/i20.dig" "$TMP/i21.dig" | cmp -s - "$TMP/i1.s" || fail "image mix: 2 ranks != 1 rank"
/usr/bin/python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["mix"]
assert m["samples_per_epoch"] == 108, m  # all_exhausted: 36 / (1/3)
assert [s["samples"] for s in m["sources"]] == [36, 72], m' "$TMP/i1.json" ||
    fail "image mix: other counts"
echo "images (imagefolder + tar): 2 ranks == 1 rank, counts 36 + 72"

# Python: stats()["mix"] has the CLI's per-source counts (sluice.Loader over
# the two-source records mix; sluice.torch over the image mix).
python_env
$PY - "$TMP" "$DATA" <<'PY' || fail "Python stats()[\"mix\"]"
import json, sys
import sluice
tmp, data = sys.argv[1:3]
cli = json.load(open(tmp + "/l2.json"))["mix"]
with sluice.Loader(None, tmp + "/two.json", data_root=data, threads=2) as ld:
    n = 0
    for b in ld:
        n += len(b.indices)
        if n == 64:  # part way: the counts so far
            part = ld.stats()["mix"]
            assert sum(s["samples"] for s in part["sources"]) == 64, part
    st = ld.stats()["mix"]
assert [s["name"] for s in st["sources"]] == ["caps", "docs"], st
assert [s["samples"] for s in st["sources"]] == [s["samples"] for s in cli["sources"]], (st, cli)
assert [s["samples"] for s in st["sources"]] == [192, 64], st
assert st["samples_per_epoch"] == 128 and st["sources"][0]["weight_share"] == 0.75, st
assert abs(st["sources"][1]["share"] - 0.25) < 1e-9, st
assert ld.stats()["mix"] == st  # after close: the final numbers
one = sluice.Loader(None, tmp + "/img.json", data_root=tmp + "/img")
assert "mix" in one.stats() and one.stats()["mix"]["sources"][0]["samples"] == 0
one.close()
print("Loader.stats()['mix']: %s" % [(s["name"], s["samples"]) for s in st["sources"]])
PY
if $PY -c 'import torch' 2>/dev/null; then
    $PY - "$TMP" <<'PY' || fail "sluice.torch stats()[\"mix\"]"
import sys
import torch
import sluice, sluice.torch
tmp = sys.argv[1]
ds = sluice.torch.IterableDataset(None, tmp + "/img.json", data_root=tmp + "/img")
n = sum(len(y) for _, y in torch.utils.data.DataLoader(ds, batch_size=None))
m = ds.stats()["mix"]
assert n == 108 and [s["samples"] for s in m["sources"]] == [36, 72], (n, m)
print("sluice.torch stats()['mix']: %s" % [(s["name"], s["samples"]) for s in m["sources"]])
PY
else
    echo "SKIP: python3-torch is not installed: sluice.torch's stats not tested"
fi

# Balanced and packed batching over the blend: 2 ranks, the same multiset again.
for b in '{"mode": "balanced"}' '{"mode": "packed", "microbatches": 2, "token_budget": 1200}'; do
    spec "$TMP/bat.json" "{\"sources\": [$CAPS, $DOCS], \"seed\": 4, \"stop\": \"first_exhausted\"}" \
        ", \"batching\": $b"
    for r in 0 1; do
        "$BIN/sluice" run "$TMP/bat.json" --local --data-root "$DATA" --quiet --threads 2 \
            --world-size 2 --rank $r --digests "$TMP/b$r.dig" || fail "$b rank $r failed"
    done
    sort "$TMP/b0.dig" "$TMP/b1.dig" | cmp -s - "$TMP/l2.s" || fail "$b: other samples"
done
echo "balanced and packed batching over the mix: the same samples and bytes"

# Per-source stages (docs/mixing.md): a text-only source with only the text
# stages. Its samples skip the image units and come out as they would
# through them (no images: nothing for those to do), so the run is the run
# without per-source stages; 2 ranks under balanced and packed batching give
# the one rank's multiset; offloaded below gives the local bytes. A source
# whose samples do have images fails them, naming the source.
text_only_jsonl "$DATA/mm.jsonl" "$DATA/text.jsonl"
TEXT="{\"name\": \"text\", \"weight\": 1, \"stages\": [$TOKENIZE, $TEMPLATE],
       \"source\": {\"type\": \"jsonl\", \"path\": \"text.jsonl\"}}"
TEXT_ALL='{"name": "text", "weight": 1, "source": {"type": "jsonl", "path": "text.jsonl"}}'
spec "$TMP/own.json" "{\"sources\": [$CAPS, $TEXT], \"seed\": 6}"
spec "$TMP/notown.json" "{\"sources\": [$CAPS, $TEXT_ALL], \"seed\": 6}"
"$BIN/sluice" run "$TMP/own.json" --local --data-root "$DATA" --quiet --threads 2 \
    --digests "$TMP/own.dig" --json >"$TMP/own.out" || fail "per-source stages: run failed"
"$BIN/sluice" run "$TMP/notown.json" --local --data-root "$DATA" --quiet --threads 2 \
    --digests "$TMP/notown.dig" || fail "the same mix without per-source stages failed"
sort "$TMP/own.dig" >"$TMP/own.s"
[ "$(wc -l <"$TMP/own.s")" -eq $((128 * EPOCHS)) ] || fail "per-source stages: not 128 an epoch"
sort "$TMP/notown.dig" | cmp -s - "$TMP/own.s" ||
    fail "per-source stages: other bytes than the job's stages give a text-only source"
for b in '{"mode": "balanced"}' '{"mode": "packed", "microbatches": 2, "token_budget": 1200}'; do
    spec "$TMP/ownb.json" "{\"sources\": [$CAPS, $TEXT], \"seed\": 6}" ", \"batching\": $b"
    for r in 0 1; do
        "$BIN/sluice" run "$TMP/ownb.json" --local --data-root "$DATA" --quiet --threads 2 \
            --world-size 2 --rank $r --digests "$TMP/ob$r.dig" ||
            fail "per-source stages, $b rank $r failed"
    done
    sort "$TMP/ob0.dig" "$TMP/ob1.dig" | cmp -s - "$TMP/own.s" ||
        fail "per-source stages, $b: other samples"
done
TEXT_IMG="{\"name\": \"text\", \"weight\": 1, \"stages\": [$TOKENIZE, $TEMPLATE],
       \"source\": {\"type\": \"jsonl\", \"path\": \"mm.jsonl\"}}"
spec "$TMP/ownimg.json" "{\"sources\": [$CAPS, $TEXT_IMG], \"seed\": 6}"
"$BIN/sluice" run "$TMP/ownimg.json" --local --data-root "$DATA" --quiet --threads 2 \
    --json >"$TMP/ownimg.out" 2>/dev/null || true
grep -q 'mix source \\"text\\" leaves out image stages, but its sample [0-9]* has images' \
    "$TMP/ownimg.out" || { head -c 600 "$TMP/ownimg.out"; fail "images in a text source: not named"; }
echo "per-source stages: a text-only source skips the image units; 2 ranks == 1 rank" \
    "under balanced and packed; images there fail naming the source"

# Resume on another world size: 4 ranks stop at different batches, 2 ranks
# resume from their states; what the 4 took and the 2 deliver is the
# uninterrupted run's multiset. A weight change is another spec: refused.
states=()
for r in 0 1 2 3; do
    "$BIN/sluice" run "$TMP/two.json" --local --data-root "$DATA" --quiet --threads 1 \
        --rank $r --world-size 4 --digests "$TMP/ra$r.dig" --save-state "$TMP/st$r" \
        --stop-after-batches $((r + 1)) || fail "rank $r of 4 (saving) failed"
    states+=(--resume "$TMP/st$r")
done
for r in 0 1; do
    "$BIN/sluice" run "$TMP/two.json" --local --data-root "$DATA" --quiet --threads 1 \
        --rank $r --world-size 2 --digests "$TMP/rb$r.dig" "${states[@]}" ||
        fail "rank $r of 2 (resuming) failed"
done
sort "$TMP"/ra?.dig "$TMP"/rb?.dig | cmp -s - "$TMP/l2.s" ||
    fail "resumed 4 -> 2 ranks: not the uninterrupted samples, each once"
echo "resumed 4 -> 2 ranks: the uninterrupted samples and bytes, each once"
# A weight change across the resume (docs/mixing.md "Resume"): 4 ranks stop
# at one step under 3:1, 2 ranks resume under 1:1. Each source goes on
# where it was: in epoch 0 no sample of a source twice before all of its
# samples were delivered, the epoch is the new weights' 192 positions; epoch 1
# is the new blend's whole.
sed 's/"weight": 3/"weight": 1/' "$TMP/two.json" >"$TMP/reweighted.json"
states=()
for r in 0 1 2 3; do
    "$BIN/sluice" run "$TMP/two.json" --local --data-root "$DATA" --quiet --threads 1 \
        --rank $r --world-size 4 --dump "$TMP/wa$r.dump" --save-state "$TMP/wst$r" \
        --stop-after-batches 2 || fail "rank $r of 4 (saving, 3:1) failed"
    states+=(--resume "$TMP/wst$r")
done
for r in 0 1; do
    "$BIN/sluice" run "$TMP/reweighted.json" --local --data-root "$DATA" --quiet --threads 1 \
        --rank $r --world-size 2 --dump "$TMP/wb$r.dump" --digests "$TMP/wb$r.dig" \
        "${states[@]}" ||
        fail "rank $r of 2 (resuming with 1:1) failed"
done
/usr/bin/python3 - "$TMP" <<'PY' || fail "resumed 4 -> 2 ranks after a weight change"
import collections, glob, json, sys
before = [json.loads(l) for f in sorted(glob.glob(sys.argv[1] + "/wa?.dump")) for l in open(f)]
after = [json.loads(l) for f in sorted(glob.glob(sys.argv[1] + "/wb?.dump")) for l in open(f)]
assert len(before) == 4 * 2 * 8 and all(d["epoch"] == 0 for d in before), len(before)
for e, want_len in ((0, 192), (1, 192)):
    ds = [d for d in before + after if d["epoch"] == e]
    assert len(ds) == want_len, (e, len(ds))
    for name in ("caps", "docs"):
        c = collections.Counter(d["index"] for d in ds if d["source"] == name)
        size = 96
        # each pass whole before the next: counts differ by at most one,
        # and a sample twice only once every one of the source's was there
        assert max(c.values()) - min(c.values()) <= 1, (e, name, c)
        assert max(c.values()) == 1 or len(c) == size, (e, name, len(c))
    got = collections.Counter(d["source"] for d in ds)
    print("epoch %d after the weight change: %s" % (e, dict(got)))
# epoch 0: 48 caps + 16 docs under 3:1, then 64 + 64 under 1:1 (caps wraps)
e0 = collections.Counter(d["source"] for d in before + after if d["epoch"] == 0)
assert e0 == {"caps": 112, "docs": 80}, e0
e1 = collections.Counter(d["source"] for d in after if d["epoch"] == 1)
assert e1 == {"caps": 96, "docs": 96}, e1
PY
echo "resumed 4 -> 2 ranks after a weight change: each source on where it was, exactly once"
# A state whose recorded weights are broken (re-checksummed, so only the
# weights are wrong): refused naming them, exit 2.
for r in 0 1 2 3; do
    /usr/bin/python3 - "$TMP/wst$r" "$TMP/badw$r" <<'PY'
import hashlib, json, sys
head, body, _ = open(sys.argv[1]).read().split("\n", 2)
o = json.loads(body)
o["mix"]["weights"] = [-1.0, 1.0]
text = "%s\n%s\n" % (head, json.dumps(o, sort_keys=True, separators=(",", ":")))
open(sys.argv[2], "w").write(text + "sha256 %s\n" % hashlib.sha256(text.encode()).hexdigest())
PY
done
set +e
"$BIN/sluice" run "$TMP/reweighted.json" --local --data-root "$DATA" --quiet --rank 0 \
    --world-size 2 --resume "$TMP/badw0" --resume "$TMP/badw1" --resume "$TMP/badw2" \
    --resume "$TMP/badw3" 2>"$TMP/badw.err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -qF 'state 0: damaged (its "mix" weights)' "$TMP/badw.err" ||
    { cat "$TMP/badw.err"; fail "a state with broken weights: exit $rc"; }
echo "a state with broken weights: refused, named"
# Another change than the weights is still another spec: refused.
sed 's/"seed": 4/"seed": 5/' "$TMP/two.json" >"$TMP/reseeded.json"
set +e
"$BIN/sluice" run "$TMP/reseeded.json" --local --data-root "$DATA" --quiet --rank 0 \
    --world-size 2 "${states[@]}" 2>"$TMP/resume.err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'saved by a job of another spec' "$TMP/resume.err" ||
    { cat "$TMP/resume.err"; fail "resume after a seed change: exit $rc"; }

# Offloaded: two workers, one killed halfway; exactly once, the local bytes.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0));
print(s.getsockname()[1])')
dispatcher() { # dispatcher NAME: on one port and journal, so a restart is the same one
    start_daemon "$1" "$BIN/sluice-dispatcher" --listen "127.0.0.1:$port" --http 127.0.0.1:0 \
        --journal "$TMP/journal" --split-size 16 --worker-timeout-ms 1500 --heartbeat-ms 100 \
        --client-timeout-ms 20000
}
dispatcher D
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$DATA" --threads 1
done
wait_live_workers "$D_HTTP" 2
"$BIN/sluice" run "$TMP/two.json" --data-root "$DATA" --quiet --threads 1 \
    --dispatcher "127.0.0.1:$port" --offload all --digests "$TMP/off.dig" --max-rate 80 \
    --json >"$TMP/off.json" &
RUN_PID=$!
PIDS+=("$RUN_PID")
for _ in $(seq 1 400); do
    [ -f "$TMP/off.dig" ] && [ "$(wc -l <"$TMP/off.dig")" -ge 60 ] && break
    sleep 0.05
done
# Visible on the dispatcher: each source's positions of the epoch and share.
curl -sf "http://$D_HTTP/status" >"$TMP/status.json" || fail "/status"
curl -sf "http://$D_HTTP/metrics" >"$TMP/metrics.txt" || fail "/metrics"
/usr/bin/python3 - "$TMP/status.json" <<'PY' || fail "/status lacks the mix"
import json, sys
jobs = [j for j in json.load(open(sys.argv[1]))["jobs"] if j.get("mix")]
assert len(jobs) == 1, jobs
m = jobs[0]["mix"]
got = {s["name"]: (s["epoch_samples"], s["share"], s["source_samples"]) for s in m["sources"]}
assert m["samples_per_epoch"] == 128 and got == {"caps": (96, 0.75, 96), "docs": (32, 0.25, 96)}, m
print("status: %s" % got)
PY
grep -q '^sluice_job_source_epoch_samples{job="[0-9]*",tenant="",source="caps"} 96$' \
    "$TMP/metrics.txt" || fail "/metrics lacks caps' samples"
grep -q '^sluice_job_source_share_ratio{job="[0-9]*",tenant="",source="docs"} 0.2500$' \
    "$TMP/metrics.txt" || { grep source "$TMP/metrics.txt"; fail "/metrics lacks docs' share"; }
kill -9 "$W2_PID"
echo "worker 2 killed after $(wc -l <"$TMP/off.dig") samples"
for _ in $(seq 1 400); do
    [ "$(wc -l <"$TMP/off.dig")" -ge 150 ] && break
    sleep 0.05
done
kill -9 "$D_PID"
echo "dispatcher killed after $(wc -l <"$TMP/off.dig") samples"
sleep 0.5
dispatcher D2
wait "$RUN_PID" || { cat "$TMP/D2.err"; fail "offloaded run failed"; }
sort "$TMP/off.dig" >"$TMP/off.s"
cmp -s "$TMP/off.s" "$TMP/l2.s" ||
    fail "offloaded (worker killed, dispatcher restarted): other samples or bytes"
/usr/bin/python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["sources"]["remote"] > 0, o["sources"]
assert [s["samples"] for s in o["mix"]["sources"]] == [192, 64], o["mix"]' "$TMP/off.json" ||
    fail "offloaded: not remote, or other per-source counts"
echo "offloaded, a worker killed, the dispatcher restarted on its journal:" \
    "$(wc -l <"$TMP/off.s") samples, the local bytes"

# The weight change's resume offloaded: the workers and the dispatcher lay the
# carried epoch out as the client does (the same samples and bytes).
wpids=()
for r in 0 1; do
    SLUICE_JOB_SECRET=mix2-weight-change-test "$BIN/sluice" run "$TMP/reweighted.json" --data-root "$DATA" \
        --quiet --threads 1 \
        --dispatcher "127.0.0.1:$port" --offload all --rank $r --world-size 2 \
        --digests "$TMP/wo$r.dig" "${states[@]}" --max-rate 25 &
    wpids+=($!)
    PIDS+=($!)
done
# /status while the ranks are in the carried epoch 0 (--max-rate 25: ~2.5 s
# of it): each source's positions are the carried epoch's -- 48 + 16
# consumed under 3:1, then 64 + 64 under 1:1 -- not the 1:1 blend's 96 + 96
# from position 0.
seen=0
for _ in $(seq 1 200); do
    curl -sf "http://$D2_HTTP/status" >"$TMP/wstatus.json" || break
    seen=$(/usr/bin/python3 - "$TMP/wstatus.json" <<'PY'
import json, sys
jobs = [j for j in json.load(open(sys.argv[1]))["jobs"]
        if j.get("mix") and j.get("state") == "active" and j.get("epoch") == 0]
for j in jobs:
    got = {s["name"]: s["epoch_samples"] for s in j["mix"]["sources"]}
    if got != {"caps": 112, "docs": 80}:
        print("bad %s" % got)
        sys.exit(0)
print(len(jobs))
PY
)
    case "$seen" in bad*) fail "/status after a weight change across the resume: $seen" ;; esac
    [ "$seen" -ge 1 ] 2>/dev/null && break
    sleep 0.05
done
[ "$seen" -ge 1 ] 2>/dev/null || {
    /usr/bin/python3 -c '
import json, sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    print({k: j.get(k) for k in ("id", "state", "epoch", "mix")})' "$TMP/wstatus.json"
    fail "/status: no resumed job seen in its carried epoch 0 ($seen)"
}
echo "/status of the resumed epoch: caps 112, docs 80 (the carried epoch's counts)"
for p in "${wpids[@]}"; do
    wait "$p" || fail "offloaded resume after a weight change failed"
done
sort "$TMP"/wo?.dig | cmp -s - <(sort "$TMP"/wb?.dig) ||
    fail "offloaded resume after a weight change: other samples or bytes than local"
echo "offloaded resume after a weight change: the local samples and bytes"
"$BIN/sluice" run "$TMP/own.json" --data-root "$DATA" --quiet --threads 1 \
    --dispatcher "127.0.0.1:$port" --offload all --digests "$TMP/ownoff.dig" \
    --json >"$TMP/ownoff.json" || fail "per-source stages offloaded failed"
sort "$TMP/ownoff.dig" | cmp -s - "$TMP/own.s" ||
    fail "per-source stages offloaded: other samples or bytes than local"
/usr/bin/python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["sources"]["remote"] > 0, o["sources"]' "$TMP/ownoff.json" ||
    fail "per-source stages offloaded: nothing came from a worker"
echo "per-source stages offloaded: the local samples and bytes"

# Per-source costs (sluice plan --json "mix_costs"): each source profiled on
# its own samples; the text source's left-out units cost exactly nothing,
# and the blend's cost is the share-weighted sum (no speed is asserted:
# scripts/bench-mix measures).
"$BIN/sluice" plan "$TMP/own.json" --dispatcher "127.0.0.1:$port" --data-root "$DATA" \
    --json >"$TMP/ownplan.json" || fail "sluice plan of the per-source stages mix failed"
/usr/bin/python3 - "$TMP/ownplan.json" <<'PY' || fail "sluice plan --json: mix_costs"
import json, sys
m = json.load(open(sys.argv[1]))["mix_costs"]
src = {s["name"]: s for s in m["sources"]}
assert list(src) == ["caps", "text"], m
assert src["caps"]["weight_share"] == 0.75 and src["text"]["weight_share"] == 0.25, m
assert src["caps"]["samples"] > 0 and src["text"]["samples"] == 8, m  # text.jsonl: 8 samples
assert len(src["text"]["unit_ms"]) == 4, m  # decode_image, image_tiles, tokenize, template
assert src["text"]["unit_ms"][0] == 0.0 and src["text"]["unit_ms"][1] == 0.0, m
assert all(u > 0 for u in src["caps"]["unit_ms"]), m
want = 0.75 * src["caps"]["cpu_ms_per_sample"] + 0.25 * src["text"]["cpu_ms_per_sample"]
assert abs(m["blend_cpu_ms_per_sample"] - want) < 1e-9, (m, want)
assert abs(sum(src["caps"]["unit_ms"]) - src["caps"]["cpu_ms_per_sample"]) < 1e-9, m
print("mix_costs: %s" % {n: round(s["cpu_ms_per_sample"], 4) for n, s in src.items()})
PY
echo "PASS test_mix"
