#!/usr/bin/env bash
# Packed batching ("batching": {"mode": "packed"}, docs/records.md) over real
# daemons: two ranks of a multimodal job get, per global step, exactly M
# packs each (the last step may be short) with sample counts that differ
# between ranks and packs; every sample exactly once per epoch across the
# ranks, the same bytes as the count-based run; a far more even trainer
# cost per step than count-based shares (from --dump's delivered lengths);
# Python sees each pack's step, microbatch and loss-normalisation counts
# (the global count equal on both ranks, the sum of the ranks' counts); and
# each rank's digests equal its --local share through a worker killed, the
# dispatcher killed and restarted on its journal, and a rank killed and
# restarted; a saved state resumed
# on 3 and on 2 ranks re-packs what is left, every sample once. Broken specs:
# exit 2 naming the field.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 160 \
    --per-shard 32 --size-scale 0.2 --seed 23 --quiet
"$ROOT/scripts/tokenizer-files" "$DATA/tokenizers" >/dev/null
W=2
EPOCHS=2
spec() { # spec FILE BATCHING-JSON
    cat >"$1" <<JSON
{"source": {"type": "webdataset", "path": "mm-shards", "seed": 9},
 "stages": [{"op": "decode_image"},
            {"op": "image_tiles", "tile": 32, "max_tiles": 6},
            {"op": "tokenize", "vocab": "tokenizers/cl100k_base.tiktoken", "max_tokens": 400},
            {"op": "template", "image_token": 100258, "tokens_per_tile": 16, "eos": 100257},
            {"op": "normalize", "on": "device"}],
 "batch_size": 8, "epochs": $EPOCHS, "deterministic": true,
 "batching": $2}
JSON
}
spec "$TMP/pk.json" '{"mode": "packed", "microbatches": 2, "token_budget": 1200,
                      "model": {"a": 1, "b": 0.002, "c": 20, "d": 16}}'
spec "$TMP/cnt.json" '{"mode": "count"}'

# Broken specs: refused before anything runs, naming the field.
bad() { # bad NAME BATCHING-JSON EXPECTED-TEXT
    spec "$TMP/bad.json" "$2"
    set +e
    "$BIN/sluice" run "$TMP/bad.json" --local --data-root "$DATA" --quiet 2>"$TMP/bad.err"
    local rc=$?
    set -e
    [ $rc -eq 2 ] || fail "$1: exit $rc, not 2"
    grep -q "$3" "$TMP/bad.err" || { cat "$TMP/bad.err"; fail "$1: no '$3' in the error"; }
}
bad "no budget" '{"mode": "packed"}' 'token_budget'
bad "zero budget" '{"mode": "packed", "token_budget": 0}' 'token_budget'
bad "budget under the fixed tokens" '{"mode": "packed", "token_budget": 1}' \
    "token_budget: must be larger than the template's fixed tokens"
bad "microbatches 0" '{"mode": "packed", "token_budget": 100, "microbatches": 0}' 'microbatches'
bad "negative tile budget" '{"mode": "packed", "token_budget": 100, "tile_budget": -1}' \
    'tile_budget'
bad "tile budget when balanced" '{"mode": "balanced", "tile_budget": 4}' 'tile_budget'

local_rank() { # local_rank SPEC NAME R
    "$BIN/sluice" run "$1" --local --data-root "$DATA" --quiet --threads 2 --world-size $W \
        --rank "$3" --digests "$TMP/$2.dig" --dump "$TMP/$2.dump" || fail "$2: run failed"
    sort "$TMP/$2.dig" >"$TMP/$2.s"
}
for r in 0 1; do
    local_rank "$TMP/pk.json" "lp$r" $r
    local_rank "$TMP/cnt.json" "lc$r" $r
done
sort -m "$TMP/lp0.s" "$TMP/lp1.s" >"$TMP/lp.s"
[ "$(wc -l <"$TMP/lp.s")" -eq $((160 * EPOCHS)) ] || fail "packed: not every sample delivered"
[ -z "$(awk '{print $1, $2}' "$TMP/lp.s" | uniq -d)" ] || fail "a sample delivered twice"
# Count-based with drop: 160 / 2 ranks, nothing dropped: the same samples and bytes.
sort -m "$TMP/lc0.s" "$TMP/lc1.s" >"$TMP/lc.s"
cmp -s "$TMP/lp.s" "$TMP/lc.s" || fail "packed and count-based deliver different samples/bytes"

/usr/bin/python3 - "$TMP/lp0.dump" "$TMP/lp1.dump" "$TMP/lc0.dump" "$TMP/lc1.dump" <<'PY' ||
import json, sys
def cost(d):
    return d["seq_len"] + 0.002 * d["seq_len"] ** 2 + 20 * sum(d["tiles"]) + 16
packs, load = {}, {}
for r, path in enumerate(sys.argv[1:3]):
    for d in map(json.loads, open(path)):
        assert d["rank"] == r and d["microbatch"] in (0, 1), d
        packs.setdefault((d["epoch"], d["step"], r, d["microbatch"]), []).append(d)
        load.setdefault((d["epoch"], d["step"]), [0.0, 0.0])[r] += cost(d)
steps = sorted({k[:2] for k in packs})
last = {e: max(s for ee, s in steps if ee == e) for e, _ in steps}
counts = set()
for e, s in steps:
    have = [(r, m) for r in (0, 1) for m in (0, 1) if (e, s, r, m) in packs]
    if s != last[e]:
        assert len(have) == 4, ("step without every pack", e, s, have)
    counts.add(tuple(len(packs.get((e, s, r, m), [])) for r in (0, 1) for m in (0, 1)))
assert len({c for t in counts for c in t}) > 1, "every pack the same count: not packed"
full = [v for (e, s), v in load.items() if s != last[e]]
pk = sum(max(v) / (sum(v) / 2) for v in full) / len(full)
# Count-based: each rank's next 16 samples (2 x batch 8) make a step.
cl = {}
for r, path in enumerate(sys.argv[3:5]):
    seen = {}
    for d in map(json.loads, open(path)):
        k = seen[d["epoch"]] = seen.get(d["epoch"], -1) + 1
        cl.setdefault((d["epoch"], k // 16), [0.0, 0.0])[r] += cost(d)
cn = [max(v) / (sum(v) / 2) for v in cl.values() if min(v) > 0]
cn = sum(cn) / len(cn)
print("local: %d steps; delivered-cost imbalance packed %.3f, count-based %.3f"
      % (len(steps), pk, cn))
assert pk < cn, (pk, cn)
PY
    fail "packed steps: packs per step or balance"

# --json: the schedule's numbers.
"$BIN/sluice" run "$TMP/pk.json" --local --data-root "$DATA" --quiet --world-size $W --rank 0 \
    --json >"$TMP/run.json" || fail "--json run failed"
/usr/bin/python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))["balance"]
assert 0.5 < b["pack_fill"] <= 1.0 and b["imbalance_mean"] >= 1.0, b
print("json: imbalance %.3f, pack fill %.3f, oversize %d"
      % (b["imbalance_mean"], b["pack_fill"], b["oversize"]))' "$TMP/run.json" ||
    fail "--json lacks the pack balance"

# Python: every RecordBatch is one pack with its counts.
(
python_env
"$PY" - "$TMP/pk.json" "$DATA" <<'PY'
import sys
import sluice
per_rank = []
for rank in (0, 1):
    seen = {}
    with sluice.Loader(None, sys.argv[1], data_root=sys.argv[2], world_size=2, rank=rank,
                       epochs=1) as ld:
        for b in ld:
            p = b.pack
            assert p is not None and len(set(b.steps.tolist())) == 1, (p, b.steps)
            assert p["step"] == int(b.steps[0]) and p["microbatch"] == int(b.microbatches[0])
            assert p["tokens"] > 0 and p["rank_step_tokens"] >= p["tokens"], p
            seen.setdefault(p["step"], [0, None, None])
            seen[p["step"]][0] += p["tokens"]
            seen[p["step"]][1] = p["rank_step_tokens"]
            seen[p["step"]][2] = p["global_step_tokens"]
    for step, (tok, rank_tok, glob) in seen.items():
        assert tok == rank_tok, (step, tok, rank_tok)  # the rank's packs sum to its count
    per_rank.append(seen)
for step in per_rank[0]:
    if step in per_rank[1]:
        a, b = per_rank[0][step], per_rank[1][step]
        assert a[2] == b[2] == a[1] + b[1], (step, a, b)  # one global count, both ranks'
print("python: %d steps; packs carry step, microbatch and token counts" % len(per_rank[0]))
PY
) || fail "Python: packed batches"

# ---- resume (docs/records.md "Packed batching"): 2 ranks stop after 5 and 9 packs
# and save their states; 3 ranks resume from them (what is left re-packed for 3),
# and again 2: before + after is every epoch once, with the uninterrupted bytes.
for r in 0 1; do
    "$BIN/sluice" run "$TMP/pk.json" --local --data-root "$DATA" --quiet --threads 1 \
        --world-size 2 --rank $r --digests "$TMP/sa$r" --save-state "$TMP/st$r" \
        --stop-after-batches $((5 + 4 * r)) || fail "packed resume: rank $r of 2"
done
for r in 0 1 2; do
    "$BIN/sluice" run "$TMP/pk.json" --local --data-root "$DATA" --quiet --threads 1 \
        --world-size 3 --rank $r --resume "$TMP/st0" --resume "$TMP/st1" \
        --digests "$TMP/sb$r" --dump "$TMP/sb$r.dump" || fail "packed resume: rank $r of 3"
done
cat "$TMP"/sa? "$TMP"/sb? | sort | cmp -s - "$TMP/lp.s" ||
    fail "packed resume 2 -> 3: not every sample once with the uninterrupted bytes"
/usr/bin/python3 - "$TMP"/sb?.dump <<'PY' || fail "packed resume 2 -> 3: not packs of 3 ranks"
import json, sys
steps = {}
for r, path in enumerate(sys.argv[1:]):
    for d in map(json.loads, open(path)):
        assert d["rank"] == r, d
        steps.setdefault((d["epoch"], d["step"]), set()).add((r, d["microbatch"]))
full = [k for k, v in steps.items() if len(v) == 6]
assert len(full) >= 2, steps  # every rank 2 packs in the re-packed steps
PY
for r in 0 1; do
    "$BIN/sluice" run "$TMP/pk.json" --local --data-root "$DATA" --quiet --threads 1 \
        --world-size 2 --rank $r --resume "$TMP/st0" --resume "$TMP/st1" \
        --digests "$TMP/sc$r" || fail "packed resume 2 -> 2: rank $r"
done
cat "$TMP"/sa? "$TMP"/sc? | sort | cmp -s - "$TMP/lp.s" ||
    fail "packed resume 2 -> 2: not every sample once"
echo "packed resume: 2 ranks stopped after 5 and 9 packs, resumed on 3 and on 2 ranks:" \
    "every sample once, the uninterrupted bytes"

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0));
print(s.getsockname()[1])')
dispatcher() { # dispatcher NAME
    start_daemon "$1" "$BIN/sluice-dispatcher" --listen "127.0.0.1:$port" --http 127.0.0.1:0 \
        --journal "$TMP/journal" --split-size 32 --worker-timeout-ms 1500 --heartbeat-ms 100 \
        --client-timeout-ms 20000
}
dispatcher D
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "127.0.0.1:$port" \
        --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-root "$DATA" --threads 1
done
wait_live_workers "$D_HTTP" 2
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
rank() { # rank R DIGESTS: one rank in the background, pid in RANK_PID
    "$BIN/sluice" run "$TMP/pk.json" --data-root "$DATA" --quiet --threads 1 \
        --dispatcher "127.0.0.1:$port" --offload 2:0.5 --rank "$1" --world-size $W \
        --job-name pk --max-rate 20 --digests "$2" &
    RANK_PID=$!
    PIDS+=("$RANK_PID")
}
rank 0 "$TMP/r0"
R0=$RANK_PID
rank 1 "$TMP/r1"
R1=$RANK_PID
for _ in $(seq 1 400); do
    [ "$(lines "$TMP/r0")" -ge 40 ] && [ "$(lines "$TMP/r1")" -ge 40 ] && break
    sleep 0.05
done
# Visible: each rank's predicted load, imbalance and pack fill in /status and /metrics.
for _ in $(seq 1 100); do
    curl -sf "http://$D_HTTP/metrics" >"$TMP/metrics.txt" || true
    [ "$(grep -c '^sluice_job_pack_fill_ratio{' "$TMP/metrics.txt")" -ge 2 ] && break
    sleep 0.1
done
grep -q '^sluice_job_pack_oversize_samples{' "$TMP/metrics.txt" || fail "/metrics lacks oversize"
curl -sf "http://$D_HTTP/status" >"$TMP/status.json"
/usr/bin/python3 - "$TMP/status.json" <<'PY' || fail "/status lacks the ranks' pack balance"
import json, sys
jobs = [j for j in json.load(open(sys.argv[1]))["jobs"] if j.get("balance")]
assert len(jobs) == 2, len(jobs)
for j in jobs:
    b = j["balance"]
    assert 0.5 < b["pack_fill"] <= 1.0 and b["oversize"] >= 0 and b["step_load"] > 0, b
print("status: pack fill %s" % [round(j["balance"]["pack_fill"], 3) for j in jobs])
PY
[ "$(lines "$TMP/r0")" -lt 150 ] || fail "rank 0 was nearly done before the worker was killed"
kill -9 "$W2_PID"
echo "worker 2 killed after $(lines "$TMP/r0") + $(lines "$TMP/r1") samples"
for _ in $(seq 1 400); do
    [ "$(lines "$TMP/r0")" -ge 100 ] && break
    sleep 0.05
done
kill -0 "$R0" 2>/dev/null && kill -0 "$R1" 2>/dev/null || fail "a rank ended before the restart"
kill -9 "$D_PID"
echo "dispatcher killed after $(lines "$TMP/r0") + $(lines "$TMP/r1") samples"
sleep 0.5
dispatcher D2
# Rank 1 killed after the restart and started again: the dispatcher's record of
# what it consumed gives the new process the rest of its share.
at=$(lines "$TMP/r1")
for _ in $(seq 1 400); do
    [ "$(lines "$TMP/r1")" -ge $((at + 8)) ] && break
    sleep 0.05
done
[ "$(lines "$TMP/r1")" -ge $((at + 8)) ] || fail "rank 1 did not continue after the restart"
kill -9 "$R1"
wait "$R1" 2>/dev/null || true
mv "$TMP/r1" "$TMP/r1.first"
"$BIN/sluice" run "$TMP/pk.json" --data-root "$DATA" --quiet --threads 1 \
    --dispatcher "127.0.0.1:$port" --offload 2:0.5 --rank 1 --world-size $W --job-name pk \
    --digests "$TMP/r1.second" || { cat "$TMP/D2.err"; fail "the restarted rank 1 failed"; }
wait "$R0" || { cat "$TMP/D2.err"; fail "rank 0 failed"; }
[ -z "$(sort "$TMP/r1.second" | uniq -d)" ] || fail "the restarted rank repeated samples"
sort "$TMP/r0" >"$TMP/r0.s"
cmp -s "$TMP/r0.s" "$TMP/lp0.s" || {
    diff "$TMP/r0.s" "$TMP/lp0.s" | head -5
    fail "rank 0: digests differ from its --local packed share"
}
# Rank 1: a pack handed out is consumed (docs/protocol.md "Resume"), and kill -9
# may land between the hand-out and the digests line: the new process must not
# deliver it again, so at most that one pack is missing from the file -- and
# nothing else, and nothing twice.
sort -u "$TMP/r1.first" "$TMP/r1.second" >"$TMP/r1.s"
/usr/bin/python3 - "$TMP/r1.s" "$TMP/lp1.s" "$TMP/lp1.dump" <<'PY' ||
import json, sys
got = set(open(sys.argv[1]).read().splitlines())
want = set(open(sys.argv[2]).read().splitlines())
assert got <= want, ("delivered but not in the local share", sorted(got - want)[:3])
missing = {tuple(l.split()[:2]) for l in want - got}
packs = {(d["epoch"], d["step"], d["microbatch"])
         for d in map(json.loads, open(sys.argv[3]))
         if (str(d["epoch"]), str(d["index"])) in missing}
assert len(packs) <= 1, ("samples missing from more than one pack", sorted(packs))
print("rank 1: %d of %d samples in the files (%d of the pack in flight at the kill)"
      % (len(got), len(want), len(missing)))
PY
    fail "rank 1: digests differ from its --local packed share"
echo "distributed: worker killed, dispatcher restarted, rank 1 restarted: each rank's digests" \
    "= its --local share"
kill -0 "$D2_PID" && kill -0 "$W1_PID" || fail "a daemon died"
echo "packed: ok"
