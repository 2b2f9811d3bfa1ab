#!/usr/bin/env bash
# Operations: the dispatcher's /status (workers, jobs, progress, plan, skips,
# history), /metrics (Prometheus names and syntax, counters that match what a
# run delivered), /healthz, HTTP hygiene (404/405/HEAD/oversized), the
# GetStatus RPC through `sluice status` (text, --json, --http on a worker,
# exit codes), sd_notify (READY/STATUS/RELOADING/STOPPING seen by a datagram
# receiver standing in for systemd), and SIGTERM draining a busy worker with
# exactly-once kept (digests equal to a local run).
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

make_images "$TMP/data" 3 10
cls="$TMP/data/train/class_001"
printf 'GIF89a not a jpeg at all' >"$cls/zz_notjpeg.jpg"
: >"$cls/zz_empty.jpg"
write_train_spec "$TMP/spec.json" 2

# A stand-in for systemd's notify socket: every datagram into a file.
cat >"$TMP/notify.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as f:
    print("bound", file=f, flush=True)
    while True:
        f.write(s.recv(65536).decode() + "\n--\n")
        f.flush()
PY
notify_socket() { # NAME: starts a receiver at $TMP/NAME.sock (not in a $(...): it
    # would wait for the receiver's stdout to close, that is forever)
    /usr/bin/python3 "$TMP/notify.py" "$TMP/$1.sock" "$TMP/$1.notify" </dev/null >/dev/null 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 1 100); do
        grep -q bound "$TMP/$1.notify" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "notify receiver $1 did not start"
}
wait_for() { # FILE SECONDS PATTERN
    for _ in $(seq 1 $(($2 * 20))); do
        grep -q -- "$3" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# ---- daemons under a notify socket each
# split_size in the file, overridden by the flag (checked in /status below).
printf 'log_level = notice\nsplit_size = 64\n' >"$TMP/d.conf"
notify_socket D
NOTIFY_SOCKET="$TMP/D.sock" start_daemon D "$BIN/sluice-dispatcher" --config "$TMP/d.conf" \
    --listen 127.0.0.1:0 --http 127.0.0.1:0 --heartbeat-ms 200 --split-size 8
wait_for "$TMP/D.notify" 5 "READY=1" || fail "dispatcher sent no READY=1"
grep -q "STATUS=grpc $D_GRPC, http $D_HTTP" "$TMP/D.notify" ||
    fail "dispatcher STATUS: $(cat "$TMP/D.notify")"
for w in W1 W2; do
    notify_socket $w
    NOTIFY_SOCKET="$TMP/$w.sock" start_daemon $w "$BIN/sluice-worker" --dispatcher "$D_GRPC" \
        --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
    wait_for "$TMP/$w.notify" 5 "READY=1" || fail "$w sent no READY=1"
done
grep -q "STATUS=grpc $W1_GRPC" "$TMP/W1.notify" || fail "worker STATUS: $(cat "$TMP/W1.notify")"
wait_for "$TMP/W1.notify" 10 "registered with $D_GRPC as worker" ||
    fail "worker STATUS never said registered: $(cat "$TMP/W1.notify")"
ok "READY=1 and STATUS= from the dispatcher and both workers"

# ---- a reference run, locally
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --epochs 30 \
    --digests "$TMP/local.txt"

# ---- a long-ish job through the dispatcher; look at it while it runs (held to
# 100 samples/s like a training loop, so it is still running -- ~10 s -- while
# /status is checked and a worker is drained). Offload all: on this one host
# the planner (rightly) keeps an auto job local, and the workers must work.
timeout 120 "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --quiet --epochs 30 --max-rate 100 --offload all --digests "$TMP/remote.txt" \
    --json >"$TMP/run.json" 2>"$TMP/run.err" &
client=$!
PIDS+=("$client")
seen=0
for _ in $(seq 1 100); do
    curl -sf --max-time 5 "http://$D_HTTP/status" >"$TMP/status.json" || fail "/status"
    if /usr/bin/python3 - "$TMP/status.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
jobs = s["jobs"]
ok = (len(jobs) == 1 and jobs[0]["progress"]["samples_done"] > 0
      and jobs[0]["progress"].get("samples_per_sec", 0) > 0
      and len([w for w in s["workers"] if w.get("samples_per_sec", 0) > 0]) == 2)
sys.exit(0 if ok else 1)
PY
    then
        seen=1
        break
    fi
    sleep 0.2
done
[ $seen -eq 1 ] || fail "no running job with rates in /status: $(cat "$TMP/status.json")"
/usr/bin/python3 - "$TMP/status.json" "$W1_GRPC" "$W2_GRPC" <<'PY' || fail "/status content"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["component"] == "dispatcher" and s["version"] and s["uptime_sec"] > 0, s
addrs = sorted(w["address"] for w in s["workers"])
assert addrs == sorted(sys.argv[2:4]), addrs
for w in s["workers"]:
    assert w["state"] == "live" and w["threads"] == 1, w
    assert 0 <= w["last_heartbeat_ms_ago"] < 5000, w
    assert "buffered_bytes" in w and "load" in w, w
    st = w["stages"]
    assert st and st[0]["name"].startswith("decode_jpeg"), st
    assert all("samples_per_sec" in u and "capacity_per_sec" in u for u in st), st
j = s["jobs"][0]
assert j["state"] == "active" and j["spec_name"].endswith("spec.json"), j
# No "name" in the spec: the file's basename, not its /tmp/... path.
assert j["name"] == "spec.json", j["name"]
assert j["spec"]["source"] == {"type": "imagefolder", "path": "train", "shuffle": True}, j
assert j["spec"]["stages"][0] == "decode_jpeg" and j["spec"]["batch_size"] == 8, j
p = j["progress"]
assert p["samples_total"] == 32 * 30 and p["epochs"] == 30, p
assert p["elapsed_sec"] > 0 and "eta_sec" in p, p
h = j["history"]
assert h["interval_sec"] == 1 and len(h["points"]) >= 1 and len(h["points"][0]) == 3, h
assert 0 < p["fraction"] <= 1 and p["samples_delivered"] <= p["samples_done"], p
plan = j["plan"]
for k in ("split", "units", "local_share", "mode", "version", "changes",
          "measured_samples_per_sec"):
    assert k in plan, (k, plan)
assert "stall_percent" in j and "skipped" in j and "splits" in j, j
assert j["splits"]["split_size"] == 8, ("--split-size did not override the file", j["splits"])
assert len(s["history"]) >= 1 and len(s["history"][0]) == 4, s["history"]
t = s["totals"]
assert t["workers_live"] == 2 and t["jobs_open"] == 1, t
PY
ok "/status while running: workers with unit rates, job name, progress, elapsed, plan, history"

"$BIN/sluice" status --dispatcher "$D_GRPC" >"$TMP/st.txt" || fail "sluice status exit $?"
for want in "sluice-dispatcher" "$W1_GRPC" "$W2_GRPC" "epoch" "plan" "stall" "units:" \
    "elapsed"; do
    grep -qF -- "$want" "$TMP/st.txt" || fail "sluice status lacks '$want': $(cat "$TMP/st.txt")"
done
"$BIN/sluice" status --dispatcher "$D_GRPC" --json >"$TMP/st.json" || fail "status --json"
/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert len(s["workers"])==2' \
    "$TMP/st.json" || fail "status --json: $(head -c 300 "$TMP/st.json")"
"$BIN/sluice" status --http "$W1_HTTP" >"$TMP/wst.txt" || fail "sluice status --http worker"
grep -q "sluice-worker" "$TMP/wst.txt" && grep -q "registered" "$TMP/wst.txt" ||
    fail "worker status: $(cat "$TMP/wst.txt")"
# The job by its name (the spec file's basename), not the file's path.
grep -qE '^job [0-9]+  spec\.json  active' "$TMP/st.txt" ||
    fail "sluice status does not name the job spec.json: $(grep '^job' "$TMP/st.txt")"
ok "sluice status: text, --json, --http on a worker"

# ---- SIGTERM one worker mid-job: it drains, the job completes exactly once
kill -TERM "$W1_PID"
rc=0
timeout 30 tail --pid="$W1_PID" -f /dev/null || fail "worker did not exit within 30 s of SIGTERM"
wait "$W1_PID" || rc=$?
[ $rc -eq 0 ] || fail "worker exit $rc after SIGTERM"
grep -q "STOPPING=1" "$TMP/W1.notify" || fail "worker sent no STOPPING=1"
rc=0
wait "$client" || rc=$?
[ $rc -eq 0 ] || fail "job failed after a worker drained: $(tail -n 5 "$TMP/run.err")"
sort "$TMP/local.txt" >"$TMP/a"
sort "$TMP/remote.txt" >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b" || fail "digests differ from the local run after the drain"
ok "SIGTERM drains a busy worker (STOPPING=1, exit 0); digests equal the local run"

# ---- after the job: counters match what was delivered
delivered=$(wc -l <"$TMP/remote.txt")
done_samples=$((32 * 30)) # 30 good + 2 broken images, 30 epochs
sleep 1.5 # one sampler tick
curl -sf --max-time 5 "http://$D_HTTP/metrics" >"$TMP/metrics.txt" || fail "/metrics"
/usr/bin/python3 - "$TMP/metrics.txt" "$delivered" "$done_samples" <<'PY' || fail "/metrics content"
import re, sys
text = open(sys.argv[1]).read()
want = int(sys.argv[2])
line = re.compile(r'^(sluice_[a-z_]+)(\{[a-z_]+="[^"\\\n]*"(,[a-z_]+="[^"\\\n]*")*\})? '
                  r'(-?[0-9.e+]+|NaN)$')
vals, types = {}, {}
for l in text.splitlines():
    if l.startswith("# TYPE "):
        _, _, name, kind = l.split()
        types[name] = kind
        continue
    if l.startswith("# HELP ") or not l:
        continue
    m = line.match(l)
    assert m, "bad exposition line: %r" % l
    vals.setdefault(m.group(1), []).append((m.group(2) or "", float(m.group(4))))
for name in vals:
    assert name in types, "no # TYPE for " + name
    assert not name.endswith("_total") or types[name] == "counter", name
def one(n):
    return vals[n][0][1]
# Samples of acknowledged splits = delivered + skipped; the split into the
# two needs the client's skip counts (AckSplits.skipped).
sk = dict(vals.get("sluice_samples_skipped_total", []))
got = one("sluice_samples_delivered_total")
assert got + sum(sk.values()) == int(sys.argv[3]), (got, sk)
# The client reports its skips by reason in AckSplits.
assert sk == {'{reason="empty"}': 30.0, '{reason="not_jpeg"}': 30.0}, sk
assert got == want, (got, want)
assert one("sluice_workers") == 1 and one("sluice_jobs") == 0, vals
assert one("sluice_splits_acked_total") > 0
assert one("sluice_bytes_sent_total") > 0, "workers report the bytes they sent"
for n in ("sluice_splits_reassigned_total", "sluice_plan_changes_total", "sluice_uptime_seconds",
          "sluice_build_info", "sluice_worker_up", "sluice_worker_load",
          "sluice_worker_buffered_bytes", "sluice_worker_unit_samples_total",
          "sluice_worker_samples_per_second"):
    assert n in vals, n
PY
curl -sf --max-time 5 "http://$D_HTTP/status" >"$TMP/status2.json"
/usr/bin/python3 - "$TMP/status2.json" "$delivered" "$done_samples" <<'PY' ||
import json, sys
s = json.load(open(sys.argv[1]))
c = s["closed_jobs"]
assert len(c) == 1 and c[0]["close_reason"] == "closed by client", c
p = c[0]["progress"]
assert p["samples_done"] == int(sys.argv[3]) and p["fraction"] == 1, p
t = s["totals"]
assert t["samples_delivered_total"] + t["samples_skipped_total"] == int(sys.argv[3]), t
assert c[0]["skipped"] == {"not_jpeg": 30, "empty": 30}, c[0]["skipped"]
assert p["samples_delivered"] == int(sys.argv[2]), p
assert t["samples_delivered_total"] == int(sys.argv[2]), t
PY
    fail "/status after the job"
ok "/metrics: valid exposition, delivered/skipped counters match the run"

# ---- HTTP hygiene
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" || true; }
[ "$(curl -s --max-time 5 "http://$D_HTTP/healthz")" = "ok" ] || fail "/healthz"
[ "$(code "http://$D_HTTP/nope")" = 404 ] || fail "unknown path not 404"
[ "$(code -X POST -d x "http://$D_HTTP/status")" = 405 ] || fail "POST not 405"
# Pages of workers beside a summary of all (a cluster of thousands is read
# from the summary); a bad page is 400 with the valid forms.
for q in "workers=0" "workers=x" "workers=100001" "workers_offset=-1" "workers=all&workers_offset=q"; do
    [ "$(code "http://$D_HTTP/status?$q")" = 400 ] || fail "/status?$q not 400"
done
curl -sf --max-time 5 "http://$D_HTTP/status?workers=1" >"$TMP/p1.json" || fail "/status?workers=1"
curl -sf --max-time 5 "http://$D_HTTP/status?workers=1&workers_offset=1" >"$TMP/p2.json" \
    || fail "/status?workers_offset=1"
curl -sf --max-time 5 "http://$D_HTTP/status?workers=all" >"$TMP/pa.json" || fail "workers=all"
/usr/bin/python3 - "$TMP/p1.json" "$TMP/p2.json" "$TMP/pa.json" <<'PY' || fail "/status pages"
import json, sys
p1, p2, pa = (json.load(open(f)) for f in sys.argv[1:])
n = pa["workers_summary"]["total"]
assert n >= 2 and len(pa["workers"]) == n and pa["workers_page"]["next"] is None, pa["workers_page"]
assert len(p1["workers"]) == 1 and p1["workers_page"] == {"offset": 0, "shown": 1, "total": n, "next": 1}
assert p2["workers"][0]["id"] == pa["workers"][1]["id"], "page 2 is not the second worker"
s = pa["workers_summary"]
assert s["live"] + s["lost"] + s["left"] == n, s
assert s["threads"] == sum(w["threads"] for w in pa["workers"] if w["state"] == "live"), s
PY
ok "/status pages: ?workers=N&workers_offset=K, workers_page, workers_summary; bad pages 400"
[ "$(code -X PUT -d x "http://$D_HTTP/")" = 405 ] || fail "PUT not 405"
curl -s -D "$TMP/h" -o /dev/null -X OPTIONS --max-time 5 "http://$D_HTTP/status" || true
grep -qi '^allow: GET, HEAD' "$TMP/h" || fail "405 without Allow: $(cat "$TMP/h")"
[ "$(code -I "http://$D_HTTP/")" = 200 ] || fail "HEAD / not 200"
curl -s -D "$TMP/h" -o /dev/null --max-time 5 "http://$D_HTTP/"
grep -qi '^content-type: text/html' "$TMP/h" || fail "/ content type"
curl -s -D "$TMP/h" -o /dev/null --max-time 5 "http://$D_HTTP/metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$TMP/h" || fail "/metrics content type"
big=$(head -c 20000 /dev/zero | tr '\0' a)
case "$(code -H "X-Big: $big" "http://$D_HTTP/status")" in 4??) ;; *) fail "huge header" ;; esac
case "$(code "http://$D_HTTP/status?$big")" in 4??) ;; *) fail "huge URL" ;; esac
"$BIN/sluice-dispatcher" --help | grep -q -- "--http.*127.0.0.1:7401" ||
    fail "--http default is not loopback"
# The worker's: loopback on a fixed port, for Prometheus.
"$BIN/sluice-worker" --help | grep -q -- "--http.*default '127.0.0.1:7501'" ||
    fail "worker --http default"
ok "HTTP: /healthz, 404, 405 + Allow, HEAD, content types, oversized -> 4xx, loopback defaults"

# ---- --help and --version on every binary
for b in sluice sluice-dispatcher sluice-worker; do
    "$BIN/$b" --help >/dev/null || fail "$b --help: exit $?"
    "$BIN/$b" --version | grep -q '[0-9]\.[0-9]' || fail "$b --version"
done
ok "--help and --version on sluice, sluice-dispatcher, sluice-worker"

# ---- sluice status exit codes
rc=0
"$BIN/sluice" status --dispatcher 127.0.0.1:1 --timeout-ms 2000 >/dev/null 2>"$TMP/e" || rc=$?
[ $rc -eq 1 ] || fail "unreachable dispatcher: exit $rc, want 1"
rc=0
"$BIN/sluice" status >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "no address: exit $rc, want 2"
rc=0
"$BIN/sluice" status --dispatcher nonsense >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "bad address: exit $rc, want 2"
"$BIN/sluice" status --help | grep -q -- "--dispatcher" || fail "status --help"
ok "sluice status: unreachable -> 1, usage -> 2, --help -> 0"

# ---- SIGHUP: RELOADING=1 then READY=1; SIGTERM: STOPPING=1, exit 0
printf 'log_level = info\n' >"$TMP/d.conf"
kill -HUP "$D_PID"
wait_for "$TMP/D.notify" 5 "RELOADING=1" || fail "no RELOADING=1 on SIGHUP"
[ "$(grep -c 'READY=1' "$TMP/D.notify")" -ge 2 ] || wait_for "$TMP/D.notify" 2 "READY=1"
kill -TERM "$D_PID"
rc=0
wait "$D_PID" || rc=$?
[ $rc -eq 0 ] || fail "dispatcher exit $rc after SIGTERM"
grep -q "STOPPING=1" "$TMP/D.notify" || fail "dispatcher sent no STOPPING=1"
ok "SIGHUP -> RELOADING=1/READY=1, SIGTERM -> STOPPING=1 and exit 0"
echo PASS
