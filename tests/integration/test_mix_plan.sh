#!/usr/bin/env bash
# The planner and a mix's weights (docs/planner.md "Mixed jobs", issue 34):
# the client sends each source's costs; `sluice plan --explain` shows them
# and the weights used; an auto job whose schedule moves the weight from an
# expensive image source to a cheap text-only source is re-planned at that
# step with the text-heavy costs, and the plan moves toward local.
#
# The consumer rate given to the planner sits between what the client
# alone does on the image-heavy mix and on the text-heavy one, each taken
# from the per-source costs the dispatcher's planner reports for this very
# machine (no speed is assumed): image-heavy, a worker must help; text-heavy,
# the client alone keeps up. The bytes are the --local run's either way.
# The auto job is short (the short-job guard would start it on a fixed
# plan, never re-planned): it runs with --always-profile.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
make_mix_data "$DATA"
caps_text_spec "$TMP/spec.json" 19 1 3 160 4 1 19 8
local_digests "$TMP/spec.json" "$DATA" "$TMP/local"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 5000
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --data-root "$DATA" --threads 1 --http none
wait_live_workers "$D_HTTP" 1

# The first plan of this mix on this host profiles each source; the
# dispatcher caches the costs (mix_cost_cache.h) and every later plan or
# run of the same spec here takes them back instead of profiling again.
"$BIN/sluice" plan "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$DATA" --threads 1 \
    --json >"$TMP/plan0.json" || fail "the first sluice plan --json failed"
py 'import json, sys; m = json.load(open(sys.argv[1]))["mix"]
assert m["costs_cached"] is False, m' "$TMP/plan0.json" ||
    fail "the first plan of the mix did not profile its sources"

# --explain: each source's costs as the planner took them, and the weights.
"$BIN/sluice" plan "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$DATA" --threads 1 \
    --explain >"$TMP/explain.txt" || fail "sluice plan --explain failed"
grep -q '^mix: the planner.s costs per source' "$TMP/explain.txt" ||
    { cat "$TMP/explain.txt"; fail "plan --explain: no per-source costs"; }
grep -qE '^  caps +0\.950 ' "$TMP/explain.txt" || fail "plan --explain: no caps row at 0.95"
grep -qE '^  text +0\.050 ' "$TMP/explain.txt" || fail "plan --explain: no text row at 0.05"
sed -n '/^mix:/,$p' "$TMP/explain.txt"

# --json: the planner's "mix"; the text source skips the image units (0 ms
# there), and the job's unit costs are the weighted sum at step 0.
"$BIN/sluice" plan "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$DATA" --threads 1 \
    --json >"$TMP/plan.json" || fail "sluice plan --json failed"
rate=$(py '
import json, math, sys
m = json.load(open(sys.argv[1]))["mix"]
src = {s["name"]: s for s in m["sources"]}
caps, text = src["caps"], src["text"]
assert m["step"] == 0 and abs(caps["weight_share"] - 0.95) < 1e-9, m
# from the cache: the numbers of the first plan exactly
m0 = json.load(open(sys.argv[2]))["mix"]
assert m["costs_cached"] is True and m["sources"] == m0["sources"], (m, m0)
assert text["unit_ms"][0] == 0.0 and text["unit_ms"][1] == 0.0, text
# bytes per boundary: the units text skips pass its record on unchanged;
# an image decodes to more bytes than its file
tb, cb = text["bytes_per_sample"], caps["bytes_per_sample"]
assert len(tb) == 5 and tb[0] > 0 and tb[1] == tb[0] and tb[2] == tb[0], tb
assert cb[1] > cb[0] > 0, cb
# the samples of the blend profile by source: both, summing to 1
ps = [caps["profiled_share"], text["profiled_share"]]
assert all(0 < p < 1 for p in ps) and abs(sum(ps) - 1) < 1e-9, ps
for u, ms in enumerate(m["unit_ms"]):
    want = 0.95 * caps["unit_ms"][u] + 0.05 * text["unit_ms"][u]
    assert abs(ms - want) <= 1e-9 * max(1.0, want), (u, ms, want)
heavy = 0.95 * (caps["cpu_ms_per_sample"] + caps["read_ms"]) + \
        0.05 * (text["cpu_ms_per_sample"] + text["read_ms"])
light = 0.05 * (caps["cpu_ms_per_sample"] + caps["read_ms"]) + \
        0.95 * (text["cpu_ms_per_sample"] + text["read_ms"])
assert heavy > 4 * light, (heavy, light)  # an image costs more than text
print("%.0f" % (1e3 / math.sqrt(heavy * light)))' "$TMP/plan.json" "$TMP/plan0.json") ||
    fail "sluice plan --json: the planner's mix costs"
echo "consumer rate for the planner: $rate samples/s"

"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
    --threads 1 --consumer-rate "$rate" --always-profile --digests "$TMP/auto.dig" \
    --json >"$TMP/auto.json" || fail "auto run failed"
sort "$TMP/auto.dig" | cmp -s - "$TMP/local.s" || fail "auto run: other samples or bytes"
grep -E 'job [0-9]+: (planned|re-plan)' "$TMP/D.err" || true
# The run's planner took the cached per-source costs too.
grep -qE "job [0-9]+: mix of 2 sources planned with per-source costs from the dispatcher.s cache" \
    "$TMP/D.err" || fail "the auto run profiled the mix's sources again"
py '
import json, re, sys
log = open(sys.argv[1]).read()
first = re.search(r"planned \(auto\): split (\d+)/\d+\S*, local share ([0-9.]+)", log)
again = re.search(r"re-plan v\d+ \(mix weights at step (\d+): caps 0\.95 text 0\.05 -> "
                  r"caps 0\.05 text 0\.95\): split (\d+) -> (\d+)\S*, local share ([0-9.]+) -> "
                  r"([0-9.]+)", log)
assert first and again, "no submit plan or no re-plan at the weight change"
split0, share0 = int(first.group(1)), float(first.group(2))
step, split1, share1 = int(again.group(1)), int(again.group(3)), float(again.group(5))
assert step >= 4, step
local0 = split0 == 0 or share0 >= 1.0
local1 = split1 == 0 or share1 >= 1.0
assert not local0, "the image-heavy mix was planned all local"
assert local1 or share1 > share0, (share0, share1)
print("plan: split %d share %.3f at submission; at step %d: split %d share %.3f" %
      (split0, share0, step, split1, share1))
# The client ran its last splits on the new plan (its version number may
# lag: the job can end before the reply to its next rate report carries it).
o = json.load(open(sys.argv[2]))["plan"]
assert (o["split"] == 0 or o["local_share"] >= 1.0) if local1 else \
    abs(o["local_share"] - share1) < 1e-3, (o, split1, share1)' "$TMP/D.err" "$TMP/auto.json" ||
    fail "the weight change did not move the plan toward local"
echo "PASS test_mix_plan"
