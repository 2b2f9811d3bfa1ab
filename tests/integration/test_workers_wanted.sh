#!/usr/bin/env bash
# Workers wanted, for an autoscaler (issue 39, docs/planner.md "Workers
# wanted", docs/deploy.md "Autoscaling"): `sluice plan --explain` prints the
# what-if curve per worker class; while an auto job runs the dispatcher
# publishes sluice_workers_wanted{class} in /metrics and workers_wanted[] in
# /status; a real Prometheus (Debian's `prometheus`, on loopback) scrapes the
# dispatcher and evaluates the exact query of the KEDA ScaledObject in
# deploy/kubernetes/autoscaling/ to what /status says; a query on a wrong
# name gives nothing; and when the job ends the gauge holds its figure (the
# 60 s hysteresis) instead of dropping at once.
source "$(dirname "$0")/lib.sh"

command -v prometheus >/dev/null || fail "prometheus missing: run scripts/install-deps.sh"
/usr/bin/python3 -c 'import yaml' 2>/dev/null || fail "PyYAML missing: run scripts/install-deps.sh"
make_images "$TMP/data" 3 30
write_train_spec "$TMP/spec.json" 400 ', "offload": "auto"'

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 3000 --heartbeat-ms 100 --client-timeout-ms 5000
for w in W1 W2; do
    start_daemon "$w" "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --data-root "$TMP/data" --threads 1 --http none
done
wait_live_workers "$D_HTTP" 2

# ---- the what-if in --explain: one block per class, a row per count.
"$BIN/sluice" plan "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --explain >"$TMP/explain.txt" || fail "sluice plan --explain failed"
sed -n '/^workers wanted:/,$p' "$TMP/explain.txt"
grep -qE '^workers wanted: [0-9]+ of class ".+" \(has 2\): [0-9.]+ samples/s, then bound by ' \
    "$TMP/explain.txt" || fail "plan --explain: no workers-wanted line"
for d in -2 -1 +0 +1 +2 +4 +8 +16; do
    grep -qE "^ +\\$d +[0-9]+ +[0-9.]+  (consumer|client_cpu|worker_cpu|network)\$" "$TMP/explain.txt" ||
        fail "plan --explain: no what-if row for $d workers"
done
grep -qE '^ +-4 ' "$TMP/explain.txt" && fail "plan --explain: a row below 0 workers"

# ---- a running auto job wants workers.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload auto --max-rate 300 >"$TMP/run.out" 2>"$TMP/run.err" &
client=$!
PIDS+=("$client")
wanted_status() { # the classes' published figures summed, from /status
    curl -sf "http://$D_HTTP/status" | py 'import json,sys
w = json.load(sys.stdin).get("workers_wanted", [])
print(sum(c["wanted"] for c in w) if w else -1)'
}
got=-1
for _ in $(seq 1 100); do
    got=$(wanted_status)
    [ "$got" -ge 1 ] && break
    sleep 0.1
done
[ "$got" -ge 1 ] || fail "no workers_wanted in /status while an auto job runs"
http_grep '^sluice_workers_wanted{class="[^"]*"} [0-9]' "http://$D_HTTP/metrics" ||
    fail "/metrics: no sluice_workers_wanted{class} sample"
curl -sf "http://$D_HTTP/status" | py 'import json,sys
for c in json.load(sys.stdin)["workers_wanted"]:
    print("workers wanted: %d of class %r (jobs sum %d, %d job(s))" %
          (c["wanted"], c["class"], c["jobs_sum"], c["jobs"]))'

# ---- a real Prometheus scrapes the dispatcher and evaluates the scaler's query.
query=$(/usr/bin/python3 - "$ROOT/deploy/kubernetes/autoscaling/worker-scaledobject.yaml" <<'PY'
import sys, yaml
so = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "ScaledObject"][0]
print(so["spec"]["triggers"][0]["metadata"]["query"])
PY
)
echo "the ScaledObject's query: $query"
PROM_PORT=$(py 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: sluice-dispatcher
    static_configs:
      - targets: ["$D_HTTP"]
YML
promtool check config "$TMP/prometheus.yml" >/dev/null || fail "promtool refused the config"
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prom" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$TMP/prom.out" 2>"$TMP/prom.err" &
PIDS+=("$!")
promq() { # promq QUERY: the instant vector's values, one per line ("" when empty)
    curl -sf --get "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
        py 'import json,sys
d = json.load(sys.stdin)
assert d["status"] == "success", d
for r in d["data"]["result"]:
    print(int(float(r["value"][1])))'
}
ok=0
for _ in $(seq 1 150); do
    if curl -sf "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null 2>&1; then
        p=$(promq "$query" 2>/dev/null || true)
        s=$(wanted_status)
        if [ -n "$p" ] && [ "$p" = "$s" ]; then
            ok=1
            break
        fi
    fi
    sleep 0.2
done
[ "$ok" = 1 ] || { tail -5 "$TMP/prom.err" >&2; fail "Prometheus evaluated '$query' to '${p:-}', /status says ${s:-?}"; }
echo "Prometheus: $query = $p, as /status"
# One series per class, each the /status figure.
promq 'count(sluice_workers_wanted)' | grep -qx "$(curl -sf "http://$D_HTTP/status" |
    py 'import json,sys; print(len(json.load(sys.stdin)["workers_wanted"]))')" ||
    fail "Prometheus holds another number of classes than /status"
# The same query on a wrong name finds nothing (the comparison above can fail).
[ -z "$(promq 'sum(sluice_workers_needed_no_such)')" ] ||
    fail "a query on a wrong name gave a value"

# ---- the job ends: the jobs' sum falls to 0 at once, the gauge holds.
kill "$client" 2>/dev/null || true
wait "$client" 2>/dev/null || true
held=0
for _ in $(seq 1 100); do
    if curl -sf "http://$D_HTTP/status" | py 'import json,sys
w = json.load(sys.stdin)["workers_wanted"]
assert w and all(c["jobs_sum"] == 0 for c in w)
assert sum(c["wanted"] for c in w) >= 1
assert all(c["down_in_sec"] is not None and 0 < c["down_in_sec"] <= 60 for c in w)
print("after the job: jobs sum 0, wanted held at %d for %.0f s more" %
      (sum(c["wanted"] for c in w), max(c["down_in_sec"] for c in w)))' 2>/dev/null; then
        held=1
        break
    fi
    sleep 0.1
done
[ "$held" = 1 ] || fail "after the job ended the gauge did not hold (hysteresis)"
echo "PASS"
