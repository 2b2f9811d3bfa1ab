#!/usr/bin/env bash
# A mixed job across a dispatcher restart (issue 34: exactly once under
# dispatcher restart). Two sources of different kinds (webdataset images,
# text-only jsonl with its own stages) and a weight schedule; the
# dispatcher is killed with SIGKILL mid-job and restarted on the same port
# and journal:
# - offloaded (--offload all): every sample once, the bytes of --local, the
#   per-source counts in --json those of --local;
# - auto, killed after the schedule's weight change re-planned it: the
#   restarted dispatcher has the job's mix planning state back (the weights
#   in force, each source's costs, the job's weighted costs, the change
#   count) and does not re-plan it for a weight change it already planned.
#   It runs with --always-profile: the short-job guard may start a job this
#   short on a fixed plan, which no weight change re-plans.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
make_mix_data "$DATA"
caps_text_spec "$TMP/spec.json" 3 1 5 96 3 1 3 12
local_digests "$TMP/spec.json" "$DATA" "$TMP/local" --json >"$TMP/local.json"
[ "$(wc -l <"$TMP/local.s")" -eq 1152 ] || fail "local run: expected 1152 digests"

# counts_equal JSON: the per-source counts of --json are --local's
counts_equal() {
    py '
import json, sys
def counts(f):
    return {s["name"]: s["samples"] for s in json.load(open(f))["mix"]["sources"]}
a, b = counts(sys.argv[1]), counts(sys.argv[2])
assert a == b and sum(a.values()) == 1152 and all(a.values()), (a, b)
print("per-source counts", a)' "$1" "$TMP/local.json"
}

port=$(free_port)
dispatcher() { # dispatcher NAME
    start_daemon "$1" "$BIN/sluice-dispatcher" --listen "127.0.0.1:$port" --http 127.0.0.1:0 \
        --journal "$TMP/journal" --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 \
        --client-timeout-ms 20000
}
dispatcher D
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "127.0.0.1:$port" \
        --listen 127.0.0.1:0 --http none --data-root "$DATA" --threads 1
done
wait_live_workers "$D_HTTP" 2

# wait_digests FILE N: until FILE holds N lines (20 s at most)
wait_digests() {
    for _ in $(seq 1 400); do
        [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
        sleep 0.05
    done
    return 0
}

# ---- Offloaded, killed mid-job: every sample once, per-source counts right.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "127.0.0.1:$port" --data-root "$DATA" \
    --quiet --threads 1 --offload all --max-rate 300 --digests "$TMP/all.dig" \
    --json >"$TMP/all.json" &
client=$!
PIDS+=("$client")
wait_digests "$TMP/all.dig" 300
kill -0 "$client" 2>/dev/null || fail "the offloaded job ended before the dispatcher could be killed"
kill -9 "$D_PID"
echo "dispatcher killed after $(wc -l <"$TMP/all.dig") samples (offload all)"
sleep 1
dispatcher D2
wait "$client" || { cat "$TMP/D2.err"; fail "offloaded client failed across the dispatcher restart"; }
sort "$TMP/all.dig" | cmp -s - "$TMP/local.s" || fail "offload all, dispatcher restarted: digests differ from --local"
counts_equal "$TMP/all.json" || fail "offload all, dispatcher restarted: per-source counts"
echo "offloaded mixed job across a dispatcher restart: every sample once, bytes = --local"

# ---- Auto, killed after the weight change's re-plan: the mix's planning
# state comes back from the journal.
# mix_state: the job's planner "mix" in D2's /status without its step (the
# step the acknowledged positions reached moves on).
mix_state() {
    curl -sf "http://$D2_HTTP/status" | py '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    if j["id"] == int(sys.argv[1]):
        m = (j.get("planner") or {}).get("mix")
        if m is not None:
            m.pop("step")
        print(json.dumps(m, sort_keys=True))' "$1"
}
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "127.0.0.1:$port" --data-root "$DATA" \
    --quiet --threads 1 --max-rate 150 --always-profile --digests "$TMP/auto.dig" \
    --json >"$TMP/auto.json" &
client=$!
PIDS+=("$client")
auto_id=""
for _ in $(seq 1 600); do
    auto_id=$(grep -oE 'job [0-9]+: re-plan v[0-9]+ \(mix weights at step' "$TMP/D2.err" |
        tail -n 1 | awk '{print $2}' | tr -d : || true)
    [ -n "$auto_id" ] && break
    sleep 0.05
done
[ -n "$auto_id" ] || { cat "$TMP/D2.err"; fail "the auto job was not re-planned at the weight change"; }
kill -0 "$client" 2>/dev/null || fail "the auto job ended before the dispatcher could be killed"
before=$(mix_state "$auto_id")
py '
import json, sys
m = json.loads(sys.argv[1])
assert m is not None, "no planner mix before the restart"
w = {s["name"]: s["weight_share"] for s in m["sources"]}
assert m["weights_changes"] == 1 and abs(w["caps"] - 0.25) < 1e-9, m' "$before" ||
    fail "auto job $auto_id: the planner's mix before the restart"
kill -9 "$D2_PID"
echo "dispatcher killed after $(wc -l <"$TMP/auto.dig") samples (auto, weights changed)"
sleep 1
dispatcher D2
after=$(mix_state "$auto_id")
[ "$after" = "$before" ] || {
    echo "before: $before"
    echo "after:  $after"
    fail "auto job $auto_id: the mix planning state changed across the restart"
}
wait "$client" || { cat "$TMP/D2.err"; fail "auto client failed across the restart"; }
! grep -q "job $auto_id: re-plan v[0-9]* (mix weights" "$TMP/D2.err" ||
    { grep "job $auto_id: re-plan" "$TMP/D2.err"; fail "auto job $auto_id: weight change re-planned again after the restart"; }
sort "$TMP/auto.dig" | cmp -s - "$TMP/local.s" || fail "auto, dispatcher restarted: digests differ from --local"
counts_equal "$TMP/auto.json" || fail "auto, dispatcher restarted: per-source counts"
echo "auto mixed job across a dispatcher restart: weights in force and per-source costs kept"
echo "PASS test_mix_restart"
