#!/usr/bin/env bash
# Balanced batching ("batching": {"mode": "balanced"}, docs/records.md) over
# real daemons: two ranks of a multimodal job get, per step, the same number
# of samples at a far more even trainer cost than count-based shares (from
# --dump's sequence lengths and tiles), locally and through workers; every
# sample is delivered exactly once per epoch across the ranks, the same bytes
# as the count-based run; each rank's digests equal its --local share (the
# workers compute the same schedule) through a worker killed, the dispatcher
# killed and restarted on its journal, and a rank killed and restarted.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 192 \
    --per-shard 32 --size-scale 0.2 --seed 21 --quiet
"$ROOT/scripts/tokenizer-files" "$DATA/tokenizers" >/dev/null
W=2
EPOCHS=3
spec() { # spec FILE MODE
    cat >"$1" <<JSON
{"source": {"type": "webdataset", "path": "mm-shards", "seed": 9},
 "stages": [{"op": "decode_image"},
            {"op": "image_tiles", "tile": 32, "max_tiles": 6},
            {"op": "tokenize", "vocab": "tokenizers/cl100k_base.tiktoken", "max_tokens": 400},
            {"op": "template", "image_token": 100258, "tokens_per_tile": 16},
            {"op": "normalize", "on": "device"}],
 "batch_size": 4, "epochs": $EPOCHS, "deterministic": true,
 "batching": {"mode": "$2", "microbatches": 2, "model": {"a": 1, "c": 20, "d": 10}}}
JSON
}
spec "$TMP/bal.json" balanced
spec "$TMP/cnt.json" count

local_rank() { # local_rank SPEC NAME R
    "$BIN/sluice" run "$1" --local --data-root "$DATA" --quiet --threads 2 --world-size $W \
        --rank "$3" --digests "$TMP/$2.dig" --dump "$TMP/$2.dump" || fail "$2: run failed"
    sort "$TMP/$2.dig" >"$TMP/$2.s"
}
for r in 0 1; do
    local_rank "$TMP/bal.json" "lb$r" $r
    local_rank "$TMP/cnt.json" "lc$r" $r
done
sort -m "$TMP/lb0.s" "$TMP/lb1.s" >"$TMP/lb.s"
sort -m "$TMP/lc0.s" "$TMP/lc1.s" >"$TMP/lc.s"
[ "$(wc -l <"$TMP/lb.s")" -eq $((192 * EPOCHS)) ] || fail "balanced: not every sample delivered"
cmp -s "$TMP/lb.s" "$TMP/lc.s" || fail "balanced and count-based deliver different samples/bytes"
[ -z "$(awk '{print $1, $2}' "$TMP/lb.s" | uniq -d)" ] || fail "a sample delivered twice"

imbalance() { # imbalance PREFIX: mean over steps of max/mean rank cost, from the dumps
    /usr/bin/python3 - "$TMP/${1}0.dump" "$TMP/${1}1.dump" <<'PY'
import json, sys
per = {}
for r, path in enumerate(sys.argv[1:]):
    rows = [json.loads(l) for l in open(path)]
    seen = {}
    for d in rows:
        # balanced dumps carry the step; count-based steps are a rank's next 8 samples
        # (deterministic order: the k-th delivered of an epoch is position k)
        k = seen[d["epoch"]] = seen.get(d["epoch"], -1) + 1
        key = (d["epoch"], d.get("step", k // 8))
        if "rank" in d:
            assert d["rank"] == r and d["microbatch"] in (0, 1), d
        per.setdefault(key, [0.0, 0.0, 0, 0])
        per[key][r] += d["seq_len"] + 20 * sum(d["tiles"]) + 10
        per[key][2 + r] += 1
imb = []
for v in per.values():
    if v[2] == v[3] == 8:  # full steps; both ranks the same count
        imb.append(max(v[:2]) / (sum(v[:2]) / 2))
print("%.4f %d" % (sum(imb) / len(imb), len(imb)))
PY
}
read -r ib nb <<<"$(imbalance lb)"
read -r ic nc <<<"$(imbalance lc)"
echo "local: mean imbalance per step balanced $ib ($nb steps), count-based $ic ($nc steps)"
/usr/bin/python3 -c "import sys; b, c = float('$ib'), float('$ic'); sys.exit(0 if b < c and b < 1.10 else 1)" ||
    fail "balanced steps not more even ($ib vs $ic)"

# Python: each RecordBatch says its step and microbatch (every batch one
# microbatch of one step, in order); a loop reporting step times fits the
# trainer model (here a synthetic trainer: seconds from the samples' shapes).
# In a subshell: python_env's LD_PRELOAD (ASan builds) must not reach curl below.
(
python_env
"$PY" - "$TMP/bal.json" "$DATA" <<'PY'
import sys
import numpy as np
import sluice
with sluice.Loader(None, sys.argv[1], data_root=sys.argv[2], world_size=2, rank=0,
                   epochs=1) as ld:
    step_of, tokens, samples = [], 0.0, 0
    for b in ld:
        assert b.steps is not None and len(set(b.steps.tolist())) == 1, b.steps
        assert len(set(b.microbatches.tolist())) == 1, b.microbatches
        step_of.append((int(b.steps[0]), int(b.microbatches[0])))
        tokens += float(np.diff(b.cu_seqlens).sum())
        samples += len(b)
        if b.microbatches[0] == 1:  # the step's last microbatch: the step is done
            ld.report_step(2e-4 * tokens + 1e-3 * samples)
            tokens, samples = 0.0, 0
    assert step_of == sorted(step_of), step_of[:6]
    st = ld.stats()
    assert st["trainer_steps"] >= 8 and st["trainer_fitted"], st["trainer_steps"]
    assert st["trainer_error"] < 0.01, st["trainer_error"]  # the model is exact here
    assert abs(st["trainer_coef"][0] - 2e-4) < 1e-6, st["trainer_coef"]
    print("python: %d microbatches in step order; trainer model fitted from %d steps "
          "(error %.3f)" % (len(step_of), st["trainer_steps"], st["trainer_error"]))
    try:
        ld.report_step(-1.0)
        raise SystemExit("a negative step time was accepted")
    except sluice.SluiceError:
        pass
PY
) || fail "Python: balanced batches / report_step"

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
        --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-root "$DATA" --threads 1
done
wait_live_workers "$D_HTTP" 2
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
rank() { # rank R DIGESTS [OFFLOAD]: one rank in the background, pid in RANK_PID
    "$BIN/sluice" run "$TMP/bal.json" --data-root "$DATA" --quiet --threads 1 \
        --dispatcher "127.0.0.1:$port" --offload "${3:-all}" --rank "$1" --world-size $W \
        --job-name bal --max-rate 40 --digests "$2" &
    RANK_PID=$!
    PIDS+=("$RANK_PID")
}
rank 0 "$TMP/r0" 2:0.5
R0=$RANK_PID
rank 1 "$TMP/r1.first" 2:0.5
R1=$RANK_PID
for _ in $(seq 1 400); do
    [ "$(lines "$TMP/r0")" -ge 60 ] && [ "$(lines "$TMP/r1.first")" -ge 60 ] && break
    sleep 0.05
done
# Visible: the dispatcher shows each rank's predicted load per step and the
# schedule's imbalance (/status jobs[].balance, /metrics).
# (Whole documents into files: grep -q on a pipe would SIGPIPE curl under pipefail.)
for _ in $(seq 1 100); do
    curl -sf "http://$D_HTTP/metrics" >"$TMP/metrics.txt" || true
    [ "$(grep -c '^sluice_job_step_imbalance_ratio{' "$TMP/metrics.txt")" -ge 2 ] && break
    sleep 0.1
done
curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c '
import json, sys
jobs = [j for j in json.load(sys.stdin)["jobs"] if j.get("balance")]
assert len(jobs) == 2, len(jobs)
for j in jobs:
    b = j["balance"]
    assert 1.0 <= b["imbalance_mean"] <= b["imbalance_max"] and b["step_load"] > 0, b
print("status: balance %s" % [round(j["balance"]["imbalance_mean"], 4) for j in jobs])' ||
    fail "/status lacks the ranks' balance"
grep -q '^sluice_job_step_load{' "$TMP/metrics.txt" || fail "/metrics lacks step_load"
kill -9 "$W2_PID"
echo "worker 2 killed after $(lines "$TMP/r0") + $(lines "$TMP/r1.first") samples"
for _ in $(seq 1 400); do
    [ "$(lines "$TMP/r0")" -ge 150 ] && break
    sleep 0.05
done
kill -0 "$R0" 2>/dev/null && kill -0 "$R1" 2>/dev/null || fail "a rank ended too early"
kill -9 "$D_PID"
echo "dispatcher killed after $(lines "$TMP/r0") + $(lines "$TMP/r1.first") samples"
sleep 0.5
dispatcher D2
at=$(lines "$TMP/r1.first")
for _ in $(seq 1 400); do
    [ "$(lines "$TMP/r1.first")" -ge $((at + 20)) ] && break
    sleep 0.05
done
[ "$(lines "$TMP/r1.first")" -ge $((at + 20)) ] || fail "rank 1 did not continue after the restart"
kill -9 "$R1"
wait "$R1" 2>/dev/null || true
"$BIN/sluice" run "$TMP/bal.json" --data-root "$DATA" --quiet --threads 1 \
    --dispatcher "127.0.0.1:$port" --offload 2:0.5 --rank 1 --world-size $W --job-name bal \
    --digests "$TMP/r1.second" || { cat "$TMP/D2.err"; fail "the restarted rank 1 failed"; }
wait "$R0" || { cat "$TMP/D2.err"; fail "rank 0 failed"; }
sort "$TMP/r0" >"$TMP/r0.s"
cmp -s "$TMP/r0.s" "$TMP/lb0.s" || {
    diff "$TMP/r0.s" "$TMP/lb0.s" | head -5
    fail "rank 0: digests differ from its --local balanced share"
}
[ -z "$(sort "$TMP/r1.second" | uniq -d)" ] || fail "the restarted rank repeated samples"
sort -u "$TMP/r1.first" "$TMP/r1.second" >"$TMP/r1.s"
cmp -s "$TMP/r1.s" "$TMP/lb1.s" || {
    diff "$TMP/r1.s" "$TMP/lb1.s" | head -5
    fail "rank 1: digests differ from its --local balanced share"
}
echo "distributed: worker killed, dispatcher restarted, rank 1 restarted: each rank's" \
    "digests = its --local balanced share"
kill -0 "$D2_PID" && kill -0 "$W1_PID" || fail "a daemon died"
echo "balanced: ok"

# ---- resume (docs/protocol.md "Resume"): 2 ranks stop at steps 3 and 5 and
# save their states; 3 ranks resume from them (the rest re-packed for 3), and
# again 2: before + after is every epoch once, with the uninterrupted bytes.
for r in 0 1; do
    "$BIN/sluice" run "$TMP/bal.json" --local --data-root "$DATA" --quiet --threads 1 \
        --world-size 2 --rank $r --digests "$TMP/sa$r" --save-state "$TMP/st$r" \
        --stop-after-batches $((6 + 4 * r)) || fail "balanced resume: rank $r of 2"
done
for r in 0 1 2; do
    "$BIN/sluice" run "$TMP/bal.json" --local --data-root "$DATA" --quiet --threads 1 \
        --world-size 3 --rank $r --resume "$TMP/st0" --resume "$TMP/st1" \
        --digests "$TMP/sb$r" --dump "$TMP/sb$r.dump" || fail "balanced resume: rank $r of 3"
done
cat "$TMP"/sa? "$TMP"/sb? | sort | cmp -s - "$TMP/lb.s" \
    || fail "balanced resume 2 -> 3: not every sample once with the uninterrupted bytes"
for r in 0 1; do
    "$BIN/sluice" run "$TMP/bal.json" --local --data-root "$DATA" --quiet --threads 1 \
        --world-size 2 --rank $r --resume "$TMP/st0" --resume "$TMP/st1" \
        --digests "$TMP/sc$r" || fail "balanced resume 2 -> 2: rank $r"
done
cat "$TMP"/sa? "$TMP"/sc? | sort | cmp -s - "$TMP/lb.s" \
    || fail "balanced resume 2 -> 2: not every sample once"
echo "balanced resume: 2 ranks stopped at steps 3 and 5, resumed on 3 and on 2 ranks:" \
    "every sample once, the uninterrupted bytes"
