#!/usr/bin/env bash
# test: alone (run-integration.sh): judges the CPU a quota'd client measures
# The planner without a readable CPU budget (docs/planner.md "Inputs",
# "Live re-planning"): the client runs in a 0.25-CPU cgroup quota it cannot
# see (its own mount namespace with a tmpfs over /sys/fs/cgroup; the
# process stays in the quota'd cgroup). A dispatcher and two unlimited
# workers on loopback. It must report its budget source "unknown", and
#  - job 1 (fresh profile): the first plan uses what the profile pass's lone
#    thread got, close to 0.25, not the 2 CPUs it would otherwise assume;
#  - job 2 (same spec: the client profile is cached, no profile pass, so it
#    starts from the nominal budget, a wrong first plan): the live
#    measurement re-plans it within 5 s of the job's start with a budget
#    close to 0.25;
# both deliver the --local digests (exactly-once across the re-plan).
# The jobs plan with --always-profile: the short-job guard (which prices
# the client from the nominal budget here) would start them on `off`.
# Needs root, unshare and a cgroup CPU controller; prints SKIP otherwise.
source "$(dirname "$0")/lib.sh"

skip() {
    echo "SKIP: $*"
    exit 0
}
[ "$(id -u)" = 0 ] || skip "not root"
command -v unshare >/dev/null || skip "no unshare"
if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    CG=/sys/fs/cgroup/cpu/sluice-budget-$$
    mkdir "$CG" || skip "cannot create a v1 cgroup"
    echo 100000 >"$CG/cpu.cfs_period_us"
    echo 25000 >"$CG/cpu.cfs_quota_us"
elif grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    CG=/sys/fs/cgroup/sluice-budget-$$
    mkdir "$CG" || skip "cannot create a v2 cgroup"
    echo "25000 100000" >"$CG/cpu.max"
else
    skip "no cgroup CPU controller"
fi
unshare -m true 2>/dev/null || { rmdir "$CG"; skip "unshare -m refused"; }

# The cgroup goes on any exit: its processes are killed first.
budget_cleanup() {
    local rc=$? p
    for _ in 1 2 3; do
        for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        rmdir "$CG" 2>/dev/null && break
        sleep 0.2
    done
    [ ! -d "$CG" ] || echo "could not remove $CG" >&2
    set +e
    (exit $rc)
    cleanup
}
trap budget_cleanup EXIT INT TERM

# hidden CMD...: CMD in the quota'd cgroup, with every cgroup hidden from it.
hidden() {
    (
        echo "$BASHPID" >"$CG/cgroup.procs"
        exec unshare -m sh -c 'mount -t tmpfs sluice-hide /sys/fs/cgroup && exec "$@"' sh "$@"
    )
}


EPOCHS=12
# The training loop's rate the planner aims at: 2 CPUs alone would reach it
# ("off": everything local), a quarter of a CPU does not.
RATE=400
make_images "$TMP/data" 3 40
write_train_spec "$TMP/spec.json" "$EPOCHS" ', "offload": "auto"'
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local" >/dev/null
sort "$TMP/local" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq $((EPOCHS * 120)) ] || fail "local run: wrong digest count"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --worker-timeout-ms 3000 --heartbeat-ms 100 --client-timeout-ms 5000
for w in W1 W2; do
    start_daemon "$w" "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --data-root "$TMP/data" --threads 1 --http none
done
wait_live_workers "$D_HTTP" 2

# Records /status every 50 ms: per job, when it was first seen and, per plan
# version, when it was first seen with the planner's budget inputs.
cat >"$TMP/poll.py" <<'PY'
import json, os, sys, time, urllib.request
url, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
jobs = {}
while not os.path.exists(stop):
    try:
        st = json.load(urllib.request.urlopen(url, timeout=2))
    except Exception:
        time.sleep(0.05)
        continue
    now = time.monotonic()
    for j in st.get("jobs", []):
        pl = j.get("planner") or {}
        inp = pl.get("inputs") or {}
        rec = jobs.setdefault(str(j["id"]), {"first_seen": now, "versions": {}})
        v = str((j.get("plan") or {}).get("version", 0))
        if v not in rec["versions"]:
            rec["versions"][v] = {
                "t": j.get("age_sec", now - rec["first_seen"]),  # since the job was created
                "budget": inp.get("client_cpu_budget"),
                "source": inp.get("client_cpu_budget_source"),
                "from": inp.get("client_cpu_budget_from"),
                "measured": inp.get("client_cpu_budget_measured"),
                "reason": pl.get("last_reason"),
                "share": (j.get("plan") or {}).get("local_share"),
                "split": (j.get("plan") or {}).get("split"),
                "overhead_ms": inp.get("sample_overhead_ms"),
                "predicted": (j.get("plan") or {}).get("predicted_samples_per_sec"),
            }
    time.sleep(0.05)
json.dump(jobs, open(out, "w"), indent=1)
PY
/usr/bin/python3 "$TMP/poll.py" "http://$D_HTTP/status" "$TMP/status.json" "$TMP/stop" &
POLL=$!
PIDS+=("$POLL")

run_hidden() { # run_hidden NAME: one auto job of the spec, client hidden and quota'd
    local t0 t1
    t0=$(date +%s.%N)
    hidden "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
        --quiet --threads 2 --consumer-rate "$RATE" --always-profile --digests "$TMP/$1" \
        --json >"$TMP/$1.json" ||
        fail "$1: the hidden client failed"
    t1=$(date +%s.%N)
    sort "$TMP/$1" >"$TMP/$1.s"
    cmp -s "$TMP/$1.s" "$TMP/local.s" || {
        diff "$TMP/$1.s" "$TMP/local.s" | head -5
        fail "$1: digests differ from --local"
    }
    echo "$1: $(py "print('%.1f' % ($t1 - $t0))") s, digests identical to --local"
}

# What the hidden client sees: no cgroup. (A plain process in the cgroup
# would read the quota: the v1 file shows it.)
hidden sh -c 'ls /sys/fs/cgroup | wc -l' | grep -qx 0 || fail "cgroups still visible"

run_hidden job1
run_hidden job2
touch "$TMP/stop"
wait "$POLL" || fail "the /status poller failed"

py 'import json, sys
jobs = json.load(open(sys.argv[1]))
ids = sorted(jobs, key=int)
assert len(ids) == 2, jobs
def show(name, rec):
    for v in sorted(rec["versions"], key=int):
        x = rec["versions"][v]
        b = x["budget"]
        print("%s v%s at %.2f s: budget %s (source %s, from %s), split %s, local share %.3f, "
              "%.0f samples/s predicted, overhead %.3f ms; %s" % (
            name, v, x["t"], "%.3f" % b if b is not None else "-", x["source"], x["from"],
            x["split"], x["share"] or 0, x["predicted"] or 0, x["overhead_ms"] or 0,
            x["reason"]))
for n, i in zip(("job1", "job2"), ids):
    show(n, jobs[i])
ok = lambda b: b is not None and 0.1 <= b <= 0.5

# Job 1: the first plan already uses what the profile pass measured.
v = jobs[ids[0]]["versions"]
first = v[min(v, key=int)]
assert first["source"] == "unknown", first
assert first["from"] == "measured" and ok(first["budget"]), first

# Job 2: a cached profile, no profile pass: the first plan takes the nominal
# 2 CPUs and keeps everything local (wrong: 0.25 CPU does not reach the
# rate); a budget re-plan within 5 s of the job start corrects it.
v = jobs[ids[1]]["versions"]
first = v[min(v, key=int)]
assert first["source"] == "unknown", first
assert first["budget"] is not None and first["budget"] >= 1.0, first
assert first["share"] == 1.0, first
fixed = [x for k, x in v.items() if int(k) >= 2 and "cpu budget" in (x["reason"] or "")]
assert fixed, "job 2 was never re-planned for its budget: %s" % v
fix = min(fixed, key=lambda x: x["t"])
assert fix["t"] <= 5.0, "the budget re-plan came %.2f s after the start" % fix["t"]
assert fix["from"] == "measured" and ok(fix["budget"]), fix
assert fix["share"] < first["share"], (first, fix)
# Every later plan keeps a budget near 0.25.
for k, x in v.items():
    if int(k) >= 2:
        assert ok(x["budget"]), (k, x)
print("job2: re-planned for its measured budget %.3f after %.2f s" % (fix["budget"], fix["t"]))
' "$TMP/status.json" || fail "the plans did not use the measured budget"

py 'import json, sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["mode"] == "auto" and p["version"] >= 2, p
' "$TMP/job2.json" || fail "job2: sluice run --json does not show the re-plan"
echo "OK"
