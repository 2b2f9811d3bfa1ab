#!/usr/bin/env bash
# The planner on loopback (docs/planner.md): `sluice plan --explain` prints
# a row for every split K, --json carries inputs and outputs; an auto job
# picks a plan and delivers the --local digests; a re-submitted job reuses
# the cached profiles; adding a worker mid-job re-plans (the plan version
# in /status goes up) and the digests still match; fastflow runs too; the
# per-sample overhead measured while running reaches the next plan. The
# jobs are short (180 samples on loopback): the short-job guard would start
# them on a fixed plan without planning, so the auto and fastflow ones run
# with --always-profile (test_short_job_guard.sh tests the guard).
source "$(dirname "$0")/lib.sh"


make_images "$TMP/data" 3 30
write_train_spec "$TMP/spec.json" 2 ', "offload": "auto"'

"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 1 \
    --digests "$TMP/local" --epochs 8
sort "$TMP/local" >"$TMP/local8.s"
awk '$1 < 2' "$TMP/local8.s" >"$TMP/local2.s"
[ "$(wc -l <"$TMP/local2.s")" -eq 180 ] || fail "local run: expected 180 digests"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 3000
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --data-root "$TMP/data" --threads 1 --http none
wait_live_workers "$D_HTTP" 1

# The first plan from this client probes its link; later ones reuse the
# probe the dispatcher keeps for DISP_LINK_TTL_MS (docs/planner.md "Cache").
"$BIN/sluice" plan "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --json >"$TMP/plan0.json" || fail "sluice plan --json (first) failed"
py 'import json,sys
i = json.load(open(sys.argv[1]))["inputs"]
assert i["links_cached"] is False, i
assert i["classes"][0]["bandwidth_bytes_per_sec"] > 0, i
' "$TMP/plan0.json" || fail "the first plan did not probe its link"

# sluice plan --explain: the table has K = 0..4 (4 units: decode+crop fused,
# flip, normalize, to_chw) and the "off" row, a marked choice and FastFlow.
"$BIN/sluice" plan "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --explain >"$TMP/explain.txt" || fail "sluice plan --explain failed"
cat "$TMP/explain.txt"
for k in 0 1 2 3 4 off; do
    grep -qE "^[ *] *$k  " "$TMP/explain.txt" || fail "plan --explain: no row for K=$k"
done
grep -qE '^\*' "$TMP/explain.txt" || fail "plan --explain: no chosen row"
grep -q '^choice: ' "$TMP/explain.txt" || fail "plan --explain: no choice line"
grep -q '^fastflow: ' "$TMP/explain.txt" || fail "plan --explain: no fastflow line"
# The codec measured by the client: compressible boundaries get a row of
# their own, marked "+zstd" (docs/planner.md "Compression").
grep -qE '^[ *] *[1-4]  .*\+zstd' "$TMP/explain.txt" || fail "plan --explain: no +zstd row"

"$BIN/sluice" plan "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --json >"$TMP/plan.json" || fail "sluice plan --json failed"
py 'import json,sys
d = json.load(open(sys.argv[1]))
plain = [c for c in d["candidates"] if not c["compress"]]
assert len(plain) == 6, d["candidates"]
assert all(c["split"] >= 1 for c in d["candidates"] if c["compress"]), d["candidates"]
ratio = d["inputs"]["codec_ratio_at_split"]
assert len(ratio) == 5 and ratio[0] == 1.0 and ratio[1] > 1.0, ratio  # JPEG bytes never; the uint8 crop shrinks
assert d["inputs"]["client_profile"]["samples"] > 0
assert d["inputs"]["classes"][0]["workers"] == 1
assert d["inputs"]["classes"][0]["bandwidth_bytes_per_sec"] > 0
first = json.load(open(sys.argv[2]))["inputs"]["classes"][0]["bandwidth_bytes_per_sec"]
assert d["inputs"]["links_cached"] is True, d["inputs"]  # the first plan probe, reused
assert d["inputs"]["classes"][0]["bandwidth_bytes_per_sec"] == first, (d["inputs"], first)
assert d["fastflow"]["candidates"][2]["applicable"] is False
cp = d["inputs"]["client_profile"]
assert len(cp["cost_model_coef"]) == 6, cp  # the fitted per-sample cost model (costmodel.h)
assert cp["cost_model_error"] is None or cp["cost_model_error"] >= 0, cp
assert cp["size_cost_error"] is None or cp["size_cost_error"] >= 0, cp
c = d["candidates"][d["chosen"]]
print("plan --json: chose split %d, share %.3f, %.0f samples/s, bound by %s" %
      (c["split"], c["local_share"], c["predicted_samples_per_sec"], c["binding"]))
' "$TMP/plan.json" "$TMP/plan0.json" || fail "plan --json: unexpected document"
# Usage errors exit 2.
set +e
"$BIN/sluice" plan "$TMP/spec.json" >/dev/null 2>&1
[ $? -eq 2 ] || fail "plan without --dispatcher: exit status is not 2"
set -e

remote() { # remote NAME OFFLOAD EPOCHS [EXTRA...]
    local name=$1 mode=$2 epochs=$3
    shift 3
    "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 1 --offload "$mode" --epochs "$epochs" --digests "$TMP/$name" --json "$@" \
        >"$TMP/$name.json"
    sort "$TMP/$name" >"$TMP/$name.s"
}

# auto: a plan with a prediction, the --local digests.
remote auto auto 2 --always-profile
cmp -s "$TMP/auto.s" "$TMP/local2.s" || fail "auto: digests differ from --local"
py 'import json,sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["mode"] == "auto", p
assert p["predicted_samples_per_sec"] > 0 and p["binding"], p
print("auto: split %d, local share %.3f, predicted %.0f samples/s (%s); profiled in %.2f s;"
      " digests identical to --local" % (p["split"], p["local_share"],
      p["predicted_samples_per_sec"], p["binding"], p["profile_seconds"]))
' "$TMP/auto.json" || fail "auto: no plan in --json"

# fastflow: Algorithm 1's plan, the --local digests.
remote ff fastflow 2 --always-profile
cmp -s "$TMP/ff.s" "$TMP/local2.s" || fail "fastflow: digests differ from --local"
py 'import json,sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["mode"] == "fastflow", p
print("fastflow: split %d, local share %.3f, predicted %.0f samples/s; digests identical" %
      (p["split"], p["local_share"], p["predicted_samples_per_sec"]))
' "$TMP/ff.json" || fail "fastflow: no plan in --json"

# A fixed plan profiles nothing, but the client profile the dispatcher
# cached for this spec on this host gives it the cost model: its splits
# are cut by costs from each file's header (client/lib/costs.h).
remote fixed all 2
cmp -s "$TMP/fixed.s" "$TMP/local2.s" || fail "fixed plan: digests differ from --local"
py 'import json,sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["mode"] == "all", p
assert p["sample_costs"] == "header model", p
assert "predicted_samples_per_sec" not in p, p  # nothing was predicted
print("fixed plan after a cached profile: sample costs from the %s; digests identical"
      % p["sample_costs"])
' "$TMP/fixed.json" || fail "fixed plan: sample costs not from the cached cost model"

# A worker joins mid-job: the dispatcher re-plans (version 2 in /status),
# the new plan applies to splits not yet handed out, the digests still match.
remote replan auto 8 --max-rate 150 --always-profile &
client=$!
PIDS+=("$client")
for _ in $(seq 1 100); do
    v=$(curl -sf "http://$D_HTTP/status" | py 'import json,sys
j = json.load(sys.stdin)["jobs"]
print(j[0]["plan"]["version"] if j else 0)')
    [ "$v" -ge 1 ] && break
    sleep 0.05
done
[ "$v" -ge 1 ] || fail "the re-plan job did not show up in /status"
start_daemon W2 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --data-root "$TMP/data" --threads 1 --http none
replanned=0
for _ in $(seq 1 100); do
    v=$(curl -sf "http://$D_HTTP/status" | py 'import json,sys
j = json.load(sys.stdin)["jobs"]
print(j[0]["plan"]["version"] if j else 0)')
    if [ "$v" -ge 2 ]; then
        replanned=1
        break
    fi
    kill -0 "$client" 2>/dev/null || break
    sleep 0.05
done
[ "$replanned" = 1 ] || fail "no re-plan in /status after a worker joined"
echo "worker joined: /status shows plan version $v"
wait "$client" || fail "re-plan job failed"
cmp -s "$TMP/replan.s" "$TMP/local8.s" || {
    diff "$TMP/replan.s" "$TMP/local8.s" | head -5
    fail "re-planned job: digests differ from --local"
}
py 'import json,sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["version"] >= 2, p
print("re-planned job: the client saw plan version %d; digests identical to --local" %
      p["version"])
' "$TMP/replan.json" || fail "the client did not see the re-plan"
grep -q 're-plan v2 (workers changed' "$TMP/D.err" || fail "dispatcher did not log the re-plan"

# The per-sample overhead the clients measured while running is kept with
# the cached client profile: the next plan of the spec on this host starts
# with it (docs/planner.md "Inputs").
"$BIN/sluice" plan "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --json >"$TMP/plan2.json" || fail "sluice plan --json (again) failed"
py 'import json,sys
i = json.load(open(sys.argv[1]))["inputs"]
prof = i["client_profile"]
assert prof.get("sample_overhead_ms", 0) > 0, prof
assert abs(i["sample_overhead_ms"] - prof["sample_overhead_ms"]) < 1e-9, i
print("cached client profile: %.3f ms per-sample overhead measured while running" %
      i["sample_overhead_ms"])
' "$TMP/plan2.json" || fail "the measured per-sample overhead did not reach the next plan"
echo "PASS"
