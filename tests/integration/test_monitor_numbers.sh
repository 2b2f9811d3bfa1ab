#!/usr/bin/env bash
# Monitoring numbers (docs/reference/status.md "What the numbers mean",
# issue #38 item 2): a running job's measured rate in /status and
# `sluice status` is the rate its training loop gets (not a batch-quantised
# window: 64 or 128 for 115/s), its stall is a fraction in [0, 1], and a
# resumed job's passed-over positions are counted as resumed, never as
# skips (/status, `sluice status`, /metrics).
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

make_images "$TMP/data" 4 100 # 400 small samples
cat >"$TMP/spec.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 3},
 "stages": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 16}, {"op": "to_chw"}],
 "batch_size": 64, "epochs": 4}
JSON
S="$BIN/sluice"
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --heartbeat-ms 200 --split-size 50

# ---- 2b, 2a: a loop taking 115 samples/s in batches of 64 (one every 0.56 s,
# so a 1 s report window holds one batch or two).
"$S" run "$TMP/spec.json" --data-root "$TMP/data" --dispatcher "$D_GRPC" --offload off \
    --threads 1 --max-rate 115 --job-name paced 2>"$TMP/paced.err" &
RUN=$!
PIDS+=("$RUN")
: >"$TMP/polls"
: >"$TMP/status.txt"
for _ in $(seq 1 60); do
    sleep 0.25
    curl -sf "http://$D_HTTP/status" | jq -c '.jobs[0] | select(. != null) |
        [.age_sec, .plan.measured_samples_per_sec, .rates.wait_fraction, .stall_percent]' \
        >>"$TMP/polls" || true
    [ -s "$TMP/status.txt" ] || [ "$(wc -l <"$TMP/polls")" -lt 12 ] \
        || "$S" status --dispatcher "$D_GRPC" >"$TMP/status.txt" 2>&1 || true
    kill -0 "$RUN" 2>/dev/null || break
done
wait "$RUN" || { cat "$TMP/paced.err" >&2; fail "paced run"; }
# The loop's own rate: its summary, 1600 samples over its whole run.
own=$(sed -nE 's/.*samples in [0-9.]+ s \(([0-9.]+) samples\/s\).*/\1/p' "$TMP/paced.err")
[ -n "$own" ] || fail "no summary: $(cat "$TMP/paced.err")"
# Readings once the job runs (age >= 4 s: past the start-up), each within
# 25 % of the loop's own rate: a loaded 2-core machine jitters, a
# quantised window is off by 44 % (64 for 115).
jq -rs --argjson own "$own" '[.[] | select(.[0] >= 4 and .[1] != null)] |
    "\(length) \(map(.[1]) | min) \(map(.[1]) | max) \(map(select(.[1] < 0.75 * $own or
    .[1] > 1.25 * $own)) | length) \(map(select(.[2] < 0 or .[2] > 1)) | length)"' \
    "$TMP/polls" >"$TMP/verdict"
read -r n lo hi off bad <"$TMP/verdict"
[ "$n" -ge 4 ] || fail "only $n readings of a running job: $(cat "$TMP/polls")"
[ "$off" -eq 0 ] || fail "measured rate $lo..$hi/s, the loop's own $own/s: $(cat "$TMP/polls")"
[ "$bad" -eq 0 ] || fail "wait_fraction outside [0, 1]: $(cat "$TMP/polls")"
# 2e: a fixed plan has no prediction, and `sluice status` says why.
grep -q "no prediction: a fixed plan (offload off) is not profiled" "$TMP/status.txt" \
    || fail "sluice status of an off job: $(cat "$TMP/status.txt")"
ok "measured $lo..$hi/s in $n readings of /status for a loop at $own/s; stall within [0, 1]"

# ---- 2c: a job resumed from a state saved after 3 batches passes over the
# 192 positions its predecessor delivered: resumed, not skipped.
"$S" run "$TMP/spec.json" --data-root "$TMP/data" --dispatcher "$D_GRPC" --offload off \
    --threads 1 --job-name first --quiet --save-state "$TMP/st" --stop-after-batches 3 \
    2>"$TMP/first.err" || { cat "$TMP/first.err" >&2; fail "first run"; }
"$S" run "$TMP/spec.json" --data-root "$TMP/data" --dispatcher "$D_GRPC" --offload off \
    --threads 1 --job-name again --resume "$TMP/st" 2>"$TMP/again.err" \
    || { cat "$TMP/again.err" >&2; fail "resumed run"; }
grep -q " 0 skipped" "$TMP/again.err" || fail "resumed run's summary: $(cat "$TMP/again.err")"
doc=$(curl -sf "http://$D_HTTP/status")
j=$(jq -c '[.jobs[], .closed_jobs[]] | map(select(.spec_name != null)) | last |
    [.resumed_past, .skipped_total, (.skipped | has("resumed"))]' <<<"$doc")
[ "$j" = "[192,0,false]" ] || fail "resumed job in /status: $j"
t=$(jq -c '.totals | [.samples_resumed_total, .samples_skipped_total,
    (.skipped_by_reason | has("resumed"))]' <<<"$doc")
[ "$t" = "[192,0,false]" ] || fail "totals: $t"
m=$(curl -sf "http://$D_HTTP/metrics")
grep -q '^sluice_samples_resumed_total 192$' <<<"$m" || fail "no sluice_samples_resumed_total 192"
! grep -q 'sluice_samples_skipped_total{reason="resumed"}' <<<"$m" \
    || fail "resumed positions counted as skips in /metrics"
ok "a resumed job: resumed_past 192, skipped 0 (/status, /metrics)"

# ---- 2e: `sluice plan --offload K:F --explain` diagnoses that fixed plan.
"$S" plan "$TMP/spec.json" --data-root "$TMP/data" --dispatcher "$D_GRPC" --offload 1:0.5 \
    --explain >"$TMP/plan.txt" 2>&1 || fail "sluice plan --offload 1:0.5: $(cat "$TMP/plan.txt")"
grep -q "policy fixed" "$TMP/plan.txt" && grep -q "^diagnosis: given plan: split 1, local share 0.500" \
    "$TMP/plan.txt" || fail "sluice plan --offload 1:0.5 --explain: $(cat "$TMP/plan.txt")"
ok "sluice plan --offload 1:0.5 --explain: $(grep '^diagnosis' "$TMP/plan.txt")"

# ---- item 3: an auto job that stays local says why (`sluice plan --explain`,
# /status, the Python warning). Its only worker shares the client's host and
# its training loop takes 50 samples/s, which the client alone reaches (the
# planner's other reasons: test_planner_machines.c test_local_reason). The
# job is short: the short-job guard would run it `off` without a plan (and
# no reason), so the Loader asks for always_profile.
start_daemon W "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
wait_live_workers "$D_HTTP" 1
"$S" plan "$TMP/spec.json" --data-root "$TMP/data" --dispatcher "$D_GRPC" --offload auto \
    --consumer-rate 50 --explain >"$TMP/auto.txt" 2>&1 || fail "sluice plan --offload auto: $(cat "$TMP/auto.txt")"
grep -q "^all local: the client alone reaches the training loop's 50 samples/s" "$TMP/auto.txt" \
    || fail "sluice plan --explain gives no reason: $(cat "$TMP/auto.txt")"
ok "sluice plan --explain: $(grep '^all local' "$TMP/auto.txt")"
python_env
cat >"$TMP/local.py" <<'PY'
import json, sys, urllib.request, warnings
import sluice
disp, http, spec, data = sys.argv[1:]
with warnings.catch_warnings(record=True) as ws:
    warnings.simplefilter("always")
    loader = sluice.Loader(disp, spec, data_root=data, offload="auto", epochs=1,
                           consumer_rate=50, always_profile=True)
    doc = json.load(urllib.request.urlopen("http://%s/status" % http))
    plan = [j for j in doc["jobs"] if j["plan"]["mode"] == "auto"][0]["plan"]
    n = sum(len(labels) for _, labels in loader)
    st = loader.stats()
    loader.close()
said = [str(w.message) for w in ws if "keeps all the work in this process" in str(w.message)]
print(json.dumps({"warned": said, "status": plan.get("local_reason"), "n": n,
                  "remote": st["from_remote"]}))
PY
$PY "$TMP/local.py" "$D_GRPC" "$D_HTTP" "$TMP/spec.json" "$TMP/data" >"$TMP/local.json" \
    2>"$TMP/local.err" || fail "python auto job: $(cat "$TMP/local.err")"
jq -e '.n == 400 and .remote == 0 and (.warned | length) == 1 and
    (.warned[0] | contains("the client alone reaches")) and
    (.status | startswith("the client alone reaches"))' "$TMP/local.json" >/dev/null \
    || fail "python auto job all local: $(cat "$TMP/local.json")"
ok "an all-local auto job says why: $(jq -r .status "$TMP/local.json")"
