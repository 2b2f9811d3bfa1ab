#!/usr/bin/env bash
# Per-node planning of multi-rank jobs (docs/planner.md "Per-node planning",
# issue #8): two ranks of one auto job on the same host share its CPU budget
# and ingress. Once both have submitted, the dispatcher re-plans each with
# half of what its client measured for the node ("ranks on the client's
# node: 1 -> 2"), and /status shows both numbers in the planner inputs. The
# client also measured its own ingress (every worker streaming at once:
# client_bandwidth). The ranks still deliver exactly their --local shares.
source "$(dirname "$0")/lib.sh"

W=2
make_images "$TMP/data" 3 30 # 90 samples: 45 per rank and epoch
write_train_spec "$TMP/spec.json" 12 ', "offload": "auto"'

for r in 0 1; do
    "$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 1 \
        --rank "$r" --world-size $W --digests "$TMP/lr$r"
    sort "$TMP/lr$r" >"$TMP/lr$r.s"
    [ "$(wc -l <"$TMP/lr$r.s")" -eq 540 ] || fail "local rank $r: expected 12 x 45 digests"
done

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 5000
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --data-root "$TMP/data" --threads 1 --http none
done
wait_live_workers "$D_HTTP" 2

# --max-rate keeps both ranks running for a few seconds.
RANK_PIDS=()
for r in 0 1; do
    "$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 \
        --dispatcher "$D_GRPC" --rank "$r" --world-size $W --job-name node2 \
        --max-rate 120 --digests "$TMP/dr$r" &
    RANK_PIDS+=($!)
    PIDS+=($!)
done

# Both parts planned with half the node: budget and ingress halved, the
# workers shared by the world (2). Polled: the second rank submits later.
ok=""
for _ in $(seq 1 200); do
    if curl -sf "http://$D_HTTP/status" >"$TMP/status.json" && py 'import json,sys
d = json.load(open(sys.argv[1]))
parts = [j for j in d["jobs"] if j.get("planner") and j["state"] == "active"]
assert len(parts) == 2, len(parts)
for j in parts:
    i = j["planner"]["inputs"]
    assert i["node_ranks"] == 2 and i["world_size"] == 2, i
    assert abs(i["client_cpu_budget"] - i["node_cpu_budget"] / 2) < 1e-9, i
    assert i["node_bandwidth"] is not None and i["node_bandwidth"] > 0, i
    assert abs(i["client_bandwidth"] - i["node_bandwidth"] / 2) < 1e-6 * i["node_bandwidth"], i
    assert j["plan"]["version"] >= 2, j["plan"]
' "$TMP/status.json" 2>/dev/null; then
        ok=1
        break
    fi
    sleep 0.05
done
if [ -z "$ok" ]; then
    py 'import json,sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    print(j["id"], j["state"], j.get("planner", {}).get("inputs"), j.get("plan"))' \
        "$TMP/status.json" >&2 || true
    fail "the two ranks were not planned with half the node each"
fi
py 'import json,sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    if j.get("planner") and j["state"] == "active":
        i = j["planner"]["inputs"]
        print("rank part %d: budget %.2f of %.2f, ingress %.0f of %.0f MB/s, plan v%d %s" % (
            j["id"], i["client_cpu_budget"], i["node_cpu_budget"], i["client_bandwidth"] / 1e6,
            i["node_bandwidth"] / 1e6, j["plan"]["version"], j["planner"]["last_reason"]))
' "$TMP/status.json"
grep -q "ranks on the client's node: 1 -> 2" "$TMP/D.err" \
    || fail "no re-plan for the ranks on the node in the dispatcher's log"

for r in 0 1; do
    wait "${RANK_PIDS[$r]}" || fail "rank $r failed"
    sort "$TMP/dr$r" | cmp -s - "$TMP/lr$r.s" || fail "rank $r: digests differ from --local"
done
echo "2 ranks on one node: each planned with half its budget and ingress; digests = --local"
