#!/usr/bin/env bash
# A right first plan (issue 39 part 4, docs/planner.md "A right first plan"):
# `sluice plan --explain` says what client overhead the plan charged and
# where it came from, and shows the host prior. Before any job: none
# charged, no prior. After a job of spec A ran here (its overhead measured on
# Sluice's own threads and cached): spec A plans from its own cached figure
# (the prior of another spec: none yet), and spec B -- new to this host --
# plans from A's figure as its prior; --json agrees with --explain. A job of
# spec C younger than DISP_PRIOR_MIN_RUN_MS (10 s) does not become the prior.
# The client's per-second cost (client/lib/persec.h): none before any job;
# C's job measures it (control, gRPC and consumer threads) and leaves it for the
# host, so B's first plan (no running job's overhead: C's is no prior) takes
# it off the budget; once A's overhead is B's prior, it is no longer charged
# (A's per-sample figure holds it), the host's figure still shown.
source "$(dirname "$0")/lib.sh"

python_env
make_images "$TMP/data" 3 30
# A: ~15 s at the loop's pace (longer than DISP_PRIOR_MIN_RUN_MS); C: 6 s.
write_train_spec "$TMP/a.json" 80 ', "offload": "auto"'
write_train_spec "$TMP/c.json" 30 ', "offload": "auto"'
sed -i 's/"size": 64/"size": 56/' "$TMP/c.json"
# B: another crop size, so another spec hash (a spec new to this host).
sed 's/"size": 64/"size": 48/' "$TMP/a.json" >"$TMP/b.json"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 3000 --heartbeat-ms 100 --client-timeout-ms 5000
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --data-root "$TMP/data" --threads 1 --http none
wait_live_workers "$D_HTTP" 1

plan() { # plan SPEC OUT [flags]: sluice plan into OUT
    local spec=$1 out=$2
    shift 2
    "$BIN/sluice" plan "$spec" --dispatcher "$D_GRPC" --data-root "$TMP/data" --threads 1 \
        "$@" >"$out" || fail "sluice plan $* ($spec) failed"
}
inputs() { # inputs JSONFILE KEY: one of the explain document's inputs
    /usr/bin/python3 -c 'import json,sys
v = json.load(open(sys.argv[1]))["inputs"].get(sys.argv[2])
print("null" if v is None else ("%.6f" % v if isinstance(v, float) else v))' "$1" "$2"
}

# Before any job: what the client measured under its quota while profiling
# (a probe of batch-sized messages, beyond the per-byte receive cost; it may
# find nothing beyond it), else none; no prior.
plan "$TMP/a.json" "$TMP/a0.txt" --explain
grep -q '^client overhead prior: none (another spec' "$TMP/a0.txt" ||
    fail "before any job, a prior: $(grep 'overhead prior' "$TMP/a0.txt")"
plan "$TMP/a.json" "$TMP/a0.json" --json
src0=$(inputs "$TMP/a0.json" sample_overhead_source)
prof0=$(inputs "$TMP/a0.json" sample_overhead_profiled_ms)
case "$src0" in
profiled)
    [ "$prof0" = "$(inputs "$TMP/a0.json" sample_overhead_ms)" ] ||
        fail "before any job: charged $(inputs "$TMP/a0.json" sample_overhead_ms), profiled $prof0"
    ;;
none) [ "$prof0" = null ] || fail "before any job: profiled $prof0 ms but none charged" ;;
*) fail "before any job: source $src0" ;;
esac
grep -Eq "^client overhead: (none charged \(source: no job of this spec|[0-9.]+ ms per sample .*source: measured on Sluice's own threads under this client's CPU quota while profiling)" \
    "$TMP/a0.txt" || fail "before any job: $(grep 'client overhead' "$TMP/a0.txt")"
[ "$(inputs "$TMP/a0.json" client_persec_cpu)" = 0.000000 ] &&
    [ "$(inputs "$TMP/a0.json" client_persec_host)" = null ] ||
    fail "before any job: per-second cost $(inputs "$TMP/a0.json" client_persec_cpu), host $(inputs "$TMP/a0.json" client_persec_host)"
grep -q '^client per-second cost: none charged (source: no job has measured it on this host' \
    "$TMP/a0.txt" || fail "before any job: $(grep 'per-second' "$TMP/a0.txt")"
echo "before any job: source $src0, profiled ${prof0} ms"

# The jobs run at a training loop's pace.
cat >"$TMP/loop.py" <<'PY'
import sys, time
import sluice
disp, spec, data = sys.argv[1:4]
with sluice.Loader(disp, spec, data_root=data, threads=1) as loader:
    for b in loader.batches():
        time.sleep(0.012)
PY

# A younger job of spec C measures its overhead (cached for C) but is no
# prior; it measures the host's per-second cost, which B's first plan takes.
# Stopped after 6 s of batches whatever the machine's load (a job of a
# fixed length ran past DISP_PRIOR_MIN_RUN_MS beside two busy loops).
"$BIN/sluice" bench "$TMP/c.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --threads 1 \
    --epochs 1000 --seconds 6 --consumer-rate 500 >"$TMP/c.out" || fail "the job of spec C failed"
plan "$TMP/c.json" "$TMP/c1.json" --json
[ "$(inputs "$TMP/c1.json" sample_overhead_source)" = cached ] ||
    fail "spec C after its job: source $(inputs "$TMP/c1.json" sample_overhead_source)"
plan "$TMP/b.json" "$TMP/b0.json" --json
plan "$TMP/b.json" "$TMP/b0.txt" --explain
host=$(inputs "$TMP/b0.json" client_persec_host)
charged=$(inputs "$TMP/b0.json" client_persec_cpu)
/usr/bin/python3 -c 'import sys; h = float(sys.argv[1]); sys.exit(not (0 < h < 0.25))' "$host" ||
    fail "spec B after C's job: the host's per-second cost $host"
b0src=$(inputs "$TMP/b0.json" sample_overhead_source)
case "$b0src" in
profiled | none)
    [ "$charged" = "$host" ] || fail "spec B after C's job: charged $charged, the host's $host"
    grep -q "^client per-second cost: $(printf '%.4f' "$host") CPU taken off the budget" \
        "$TMP/b0.txt" || fail "spec B --explain: $(grep 'per-second' "$TMP/b0.txt")"
    ;;
*) fail "spec B after C's young job: source $b0src" ;;
esac
echo "C's job measured the host's per-second cost: $host CPU; B's first plan ($b0src) charged $charged"

# One job of spec A, so its overhead is measured (and becomes the prior).
$PY "$TMP/loop.py" "$D_GRPC" "$TMP/a.json" "$TMP/data" || fail "the job of spec A failed"

plan "$TMP/a.json" "$TMP/a1.json" --json
a_ms=$(inputs "$TMP/a1.json" sample_overhead_ms)
[ "$(inputs "$TMP/a1.json" sample_overhead_source)" = cached ] ||
    fail "spec A after its job: source $(inputs "$TMP/a1.json" sample_overhead_source)"
[ "$(inputs "$TMP/a1.json" sample_overhead_prior_ms)" = null ] ||
    fail "spec A's own figure taken for its prior"
plan "$TMP/a.json" "$TMP/a1.txt" --explain
grep -E '^client overhead: [0-9.]+ ms per sample .*source: measured on Sluice.s own threads by an earlier job of this spec' \
    "$TMP/a1.txt" || fail "spec A after its job: $(grep 'client overhead' "$TMP/a1.txt")"


plan "$TMP/b.json" "$TMP/b.json.out" --json
[ "$(inputs "$TMP/b.json.out" sample_overhead_source)" = prior ] ||
    fail "spec B: source $(inputs "$TMP/b.json.out" sample_overhead_source)"
b_ms=$(inputs "$TMP/b.json.out" sample_overhead_ms)
b_prior=$(inputs "$TMP/b.json.out" sample_overhead_prior_ms)
[ "$b_ms" = "$a_ms" ] && [ "$b_prior" = "$a_ms" ] ||
    fail "spec B charged ${b_ms} ms (prior ${b_prior} ms), spec A measured ${a_ms} ms"
plan "$TMP/b.json" "$TMP/b.txt" --explain
want=$(printf '%.3f' "$a_ms")
grep -q "^client overhead: $want ms per sample .*(source: prior: measured on Sluice's own threads by a job of another spec on this host)" \
    "$TMP/b.txt" || fail "spec B --explain: $(grep 'client overhead' "$TMP/b.txt")"
grep -q "^client overhead prior: $want ms (another spec's job on this host)" "$TMP/b.txt" ||
    fail "spec B --explain prior: $(grep 'overhead prior' "$TMP/b.txt")"
[ "$(inputs "$TMP/b.json.out" client_persec_cpu)" = 0.000000 ] ||
    fail "spec B with A's prior: per-second cost $(inputs "$TMP/b.json.out" client_persec_cpu) charged too"
[ "$(inputs "$TMP/b.json.out" client_persec_host)" != null ] ||
    fail "spec B with A's prior: the host's per-second cost not shown"
grep -q "^client per-second cost: none charged (the host's [0-9.]* CPU is in the per-sample overhead" \
    "$TMP/b.txt" || fail "spec B --explain with A's prior: $(grep 'per-second' "$TMP/b.txt")"
echo "spec A measured ${a_ms} ms; spec B's first plan charged ${b_ms} ms (prior)"
echo "PASS"
