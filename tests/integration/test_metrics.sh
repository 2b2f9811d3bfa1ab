#!/usr/bin/env bash
# /metrics of the dispatcher and of a worker read by a real exposition-format
# parser (python3-prometheus-client): HELP and TYPE for every family, and one
# sample per (name, labels), also after workers restart on the same
# HOST:PORT (issue #14): one killed (its old entry stays live until the
# timeout, then lost), one drained by SIGTERM (left). Lost and left are
# counted apart.
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

/usr/bin/python3 -c 'import prometheus_client.parser' 2>/dev/null ||
    fail "python3-prometheus-client is missing (scripts/install-deps.sh installs it)"

make_images "$TMP/data" 2 8
write_train_spec "$TMP/spec.json" 1

# parse.py FILE [NAME{LABEL="V",...}=VALUE ...]: parses FILE, fails on a
# family without HELP or TYPE or on a (name, labels) pair seen twice, then
# checks each expected sample.
cat >"$TMP/parse.py" <<'PY'
import re, sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
seen = {}
for fam in text_string_to_metric_families(text):
    assert fam.documentation, "no HELP for %s" % fam.name
    assert fam.type in ("gauge", "counter"), "no TYPE for %s (%s)" % (fam.name, fam.type)
    for s in fam.samples:
        key = (s.name, tuple(sorted(s.labels.items())))
        assert key not in seen, "two samples of %s%s" % key
        seen[key] = s.value
for want in sys.argv[2:]:
    m = re.match(r'^([a-z_]+)(?:\{(.*)\})?=(.*)$', want)
    labels = tuple(sorted(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2) or "")))
    key = (m.group(1), labels)
    assert key in seen, "no sample %s%s in\n%s" % (key + (text,))
    assert seen[key] == float(m.group(3)), "%s%s = %s, want %s" % (key + (seen[key], m.group(3)))
print("%d samples, none twice" % len(seen))
PY
check_metrics() { # ADDR WHAT [EXPECTED...]
    local addr=$1 what=$2
    shift 2
    curl -sf --max-time 5 "http://$addr/metrics" >"$TMP/m.txt" || fail "$what: /metrics"
    /usr/bin/python3 "$TMP/parse.py" "$TMP/m.txt" "$@" || fail "$what: /metrics as above"
}
wait_status() { # PYTHON-CONDITION-ON-s WHAT: polls the dispatcher's /status for 10 s
    for _ in $(seq 1 100); do
        curl -sf --max-time 5 "http://$D_HTTP/status" >"$TMP/s.json" || fail "/status"
        /usr/bin/python3 -c "import json, sys; s = json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" \
            "$TMP/s.json" && return 0
        sleep 0.1
    done
    fail "$2: $(cat "$TMP/s.json")"
}
worker() { # NAME LISTEN
    start_daemon "$1" "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen "$2" \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
}
run_job() {
    timeout 60 "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
        --offload all --quiet >/dev/null 2>"$TMP/run.err" || fail "job: $(tail -n 5 "$TMP/run.err")"
}

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --heartbeat-ms 100 --worker-timeout-ms 1500
worker W1 127.0.0.1:0
worker W2 127.0.0.1:0
wait_status 'len([w for w in s["workers"] if w["state"] == "live"]) == 2' "two live workers"
run_job
check_metrics "$D_HTTP" dispatcher "sluice_workers=2" "sluice_worker_up{worker=\"$W1_GRPC\"}=1"
check_metrics "$W1_HTTP" worker "sluice_worker_registered=1"
ok "dispatcher and worker /metrics parse; HELP and TYPE everywhere; no series twice"

# ---- W1 killed and restarted on the same port at once: its old entry is
# still live (until the timeout) next to the new one
kill -9 "$W1_PID"
wait "$W1_PID" 2>/dev/null || true
worker W1B "$W1_GRPC"
[ "$W1B_GRPC" = "$W1_GRPC" ] || fail "W1 came back on $W1B_GRPC, not $W1_GRPC"
wait_status "len([w for w in s['workers'] if w['address'] == '$W1_GRPC' and w['state'] == 'live']) == 2" \
    "the restarted W1 registered next to its old entry"
check_metrics "$D_HTTP" "dispatcher, two live entries of one address" \
    "sluice_worker_up{worker=\"$W1_GRPC\"}=1"
ok "a worker restarted on its port before its timeout: one series per label set"

wait_status 's["totals"]["workers_lost"] == 1' "the old W1 entry lost"
check_metrics "$D_HTTP" "dispatcher, a lost entry next to a live one" "sluice_workers=2" \
    "sluice_workers_lost=1" "sluice_workers_left=0" "sluice_worker_up{worker=\"$W1_GRPC\"}=1"
ok "... and after it: lost counted, still one series per label set"

# ---- W2 drained (SIGTERM) and restarted on the same port: left, not lost
kill -TERM "$W2_PID"
rc=0
wait "$W2_PID" || rc=$?
[ $rc -eq 0 ] || fail "W2 exit $rc after SIGTERM"
wait_status 's["totals"]["workers_left"] == 1' "the drained W2 counted as left"
worker W2B "$W2_GRPC"
[ "$W2B_GRPC" = "$W2_GRPC" ] || fail "W2 came back on $W2B_GRPC, not $W2_GRPC"
wait_status "len([w for w in s['workers'] if w['state'] == 'live']) == 2" "the restarted W2 live"
run_job # the new entries get pipeline units too, next to the old ones'
check_metrics "$D_HTTP" "dispatcher, restarted workers" "sluice_workers=2" \
    "sluice_workers_lost=1" "sluice_workers_left=1" "sluice_worker_up{worker=\"$W1_GRPC\"}=1" \
    "sluice_worker_up{worker=\"$W2_GRPC\"}=1"
check_metrics "$W1B_HTTP" "restarted worker" "sluice_worker_registered=1"
ok "a drained worker is left, not lost; restarted workers' series once each, units included"
echo PASS
