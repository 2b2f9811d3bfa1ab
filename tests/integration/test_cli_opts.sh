#!/usr/bin/env bash
# The `sluice` subcommands' options (client/cli/cli_opts.c, one table for all):
# every flag a command's --help lists is accepted by its parser; a bad value
# of each shared flag and of each command's own flags exits 2 with a message
# naming the flag, for run, bench, plan and status; good values still run.
# `sluice bench --seconds S` ends a stuck run (no workers; dispatcher killed)
# with exit 1, a "stuck" message and an account of where the job stood,
# instead of waiting forever.
# Run from the repository root; $BUILD (default build) holds the binaries.
source "$(dirname "$0")/lib.sh"

S="$BIN/sluice"
[ -x "$S" ] || fail "$S not built"
ok() { echo "ok: $*"; }

make_images "$TMP/data" 2 8
write_train_spec "$TMP/spec.json" 1

# ---- every flag in --help is one the parser knows
for cmd in run bench plan status; do
    "$S" $cmd --help >"$TMP/help" || fail "$cmd --help exit $?"
    flags=$(grep -oE -- '^ +--[a-z-]+' "$TMP/help" | tr -d ' ' | sort -u)
    [ -n "$flags" ] || fail "$cmd --help lists no flags"
    for f in $flags; do
        "$S" $cmd "$f" x y >/dev/null 2>"$TMP/err" || true
        ! grep -q "unrecognized option" "$TMP/err" || fail "$cmd: $f in --help but not parsed"
    done
    "$S" $cmd --no-such-flag >/dev/null 2>"$TMP/err" && rc=0 || rc=$?
    [ $rc -eq 2 ] || fail "$cmd --no-such-flag: exit $rc, not 2"
    grep -q "no-such-flag" "$TMP/err" || fail "$cmd: unknown flag not named: $(cat "$TMP/err")"
done
ok "--help flags all parse; unknown flags exit 2"

# bad CMD FLAG VALUE [more args]: exit 2 and a message naming --FLAG and 'VALUE'.
bad() {
    local cmd=$1 flag=$2 value=$3 rc
    shift 3
    "$S" $cmd "$@" "--$flag" "$value" >"$TMP/out" 2>"$TMP/err" && rc=0 || rc=$?
    [ $rc -eq 2 ] || fail "$cmd --$flag '$value': exit $rc, not 2: $(cat "$TMP/err")"
    grep -qF -- "--$flag: '$value'" "$TMP/err" ||
        fail "$cmd --$flag '$value': message does not name it: $(cat "$TMP/err")"
}
RUN=(run "$TMP/spec.json" --local)
BENCH=(bench "$TMP/spec.json" --local --consumer-rate 0)
PLAN=(plan "$TMP/spec.json" --dispatcher 127.0.0.1:1)
STATUS=(status --dispatcher 127.0.0.1:1)
for v in 0 257 abc 1x ""; do
    bad run threads "$v" "${RUN[@]:1}"
    bad bench threads "$v" "${BENCH[@]:1}"
    bad plan threads "$v" "${PLAN[@]:1}"
done
for v in 0 -1 1000001 2.5; do
    bad run epochs "$v" "${RUN[@]:1}"
    bad bench epochs "$v" "${BENCH[@]:1}"
done
for v in -1 nan abc 1e10; do
    bad run consumer-rate "$v" "${RUN[@]:1}"
    bad bench consumer-rate "$v" bench "$TMP/spec.json" --local
    bad plan consumer-rate "$v" "${PLAN[@]:1}"
done
for v in 0 -3 x; do
    bad run max-rate "$v" "${RUN[@]:1}"
    bad bench seconds "$v" "${BENCH[@]:1}"
done
for v in 0 1025 x; do
    bad plan samples "$v" "${PLAN[@]:1}"
done
for v in 0.01 x 86401; do
    bad status watch "$v" "${STATUS[@]:1}"
done
for v in 0 x 600001; do
    bad status timeout-ms "$v" "${STATUS[@]:1}"
done
for cmd in RUN BENCH PLAN STATUS; do
    eval "args=(\"\${${cmd}[@]}\")"
    bad "${args[0]}" dispatcher-timeout 99 "${args[@]:1}"
    bad "${args[0]}" dispatcher-timeout 1ms "${args[@]:1}"
done
for cmd in RUN BENCH; do
    eval "args=(\"\${${cmd}[@]}\")"
    bad "${args[0]}" rank -1 "${args[@]:1}" --world-size 2
    bad "${args[0]}" world-size 0 "${args[@]:1}"
done
for v in bogus 3:2 x:0.5 1: ""; do # docs/reference/cli.md's format, not the library's own message
    bad run offload "$v" "${RUN[@]:1}"
    bad bench offload "$v" "${BENCH[@]:1}"
done
for v in -1 x 4294967296 1.5; do
    bad run first-epoch "$v" "${RUN[@]:1}"
    bad bench first-epoch "$v" "${BENCH[@]:1}"
done
for v in -1 x 9223372036854775808; do
    bad run seed "$v" "${RUN[@]:1}"
    bad bench seed "$v" "${BENCH[@]:1}"
done
# plan diagnoses a fixed plan (off, all, K:F: issue #38 2e, test_monitor_numbers.sh);
# what no command takes is still a usage error.
bad plan offload bogus "${PLAN[@]:1}"
ok "bad values exit 2 naming the flag (run, bench, plan, status)"

# Structural usage errors exit 2 too.
for args in "run $TMP/spec.json" "run $TMP/spec.json --local --dispatcher a:1" \
    "run --local" "bench $TMP/spec.json --local" "plan $TMP/spec.json" \
    "status" "status --dispatcher a:1 extra" "run $TMP/spec.json --local --rank 2 --world-size 2"; do
    "$S" $args >/dev/null 2>&1 && rc=0 || rc=$?
    [ $rc -eq 2 ] || fail "sluice $args: exit $rc, not 2"
done
ok "missing/contradicting arguments exit 2"

# ---- good values still run
"$S" run "$TMP/spec.json" --local --data-root "$TMP/data" --threads 1 --epochs 1 \
    --consumer-rate 0 --max-rate 100000 --first-epoch 3 --seed 5 --offload 0:0.5 --quiet \
    --json >"$TMP/run.json" || fail "run exit $?"
grep -q '"first_epoch": *3' "$TMP/run.json" || fail "run --first-epoch 3: $(cat "$TMP/run.json")"
grep -q '"samples": *16' "$TMP/run.json" || fail "run did not deliver 16 samples: $(cat "$TMP/run.json")"
"$S" bench "$TMP/spec.json" --local --data-root "$TMP/data" --threads 1 --epochs 1 \
    --consumer-rate 0 --seconds 60 --json >"$TMP/bench.json" || fail "bench exit $?"
grep -q '"samples": *16' "$TMP/bench.json" || fail "bench did not take 16 samples: $(cat "$TMP/bench.json")"
ok "good flag values run (run, bench --local)"

# ---- bench --seconds ends a stuck run. Without workers the client ends up
# running the splits itself, so that run ends either way (0, or 1 + "stuck").
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0
# timeout(1) only guards against a hang; it is no speed assertion.
timeout 120 "$S" bench "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --offload all --consumer-rate 0 --seconds 2 --epochs 100000 >"$TMP/nw.out" 2>"$TMP/nw.err" &&
    rc=0 || rc=$?
[ $rc -ne 124 ] || fail "bench --seconds 2 with no workers did not end"
[ $rc -eq 0 ] || { [ $rc -eq 1 ] && grep -q stuck "$TMP/nw.err"; } ||
    fail "bench without workers: exit $rc: $(cat "$TMP/nw.err")"
ok "bench --seconds with no workers ends (exit $rc)"

# stuck_bench SIGNAL: bench --seconds 3, the dispatcher gets SIGNAL a second
# in (STOP: frozen, like a host gone without a FIN; KILL: gone); the bench
# must end with exit 1 and the "stuck" message, not wait for
# --dispatcher-timeout (60 s) or forever.
stuck_bench() {
    local sig=$1 b rc
    start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0
    "$S" bench "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --offload all \
        --consumer-rate 0 --seconds 3 --epochs 100000 >"$TMP/$sig.out" 2>"$TMP/$sig.err" &
    b=$!
    PIDS+=("$b")
    sleep 1
    kill -"$sig" "$D_PID"
    for _ in $(seq 1 1200); do
        kill -0 "$b" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$b" 2>/dev/null && fail "bench --seconds 3 did not end after SIG$sig to the dispatcher"
    wait "$b" && rc=0 || rc=$?
    [ $rc -eq 1 ] || fail "bench, dispatcher SIG$sig: exit $rc, not 1: $(cat "$TMP/$sig.err")"
    grep -q "stuck" "$TMP/$sig.err" || fail "SIG$sig: no 'stuck' message: $(cat "$TMP/$sig.err")"
    # ... and says where the job stood (client/lib/diagnose.h): the consumer's
    # pumps, the queues, the splits, the streams.
    grep -Eq "where the job stood: consumer: [0-9]+ pumps.*received messages queued.*Fetch streams" \
        "$TMP/$sig.err" || fail "SIG$sig: no account of the job: $(cat "$TMP/$sig.err")"
    kill -9 "$D_PID" 2>/dev/null || true
    ok "bench --seconds ends when the dispatcher gets SIG$sig: $(grep stuck "$TMP/$sig.err")"
}
stuck_bench STOP
stuck_bench KILL

# ---- --dump is for multimodal specs; a bad file is named
run_rc "$TMP/dump.err" "$S" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet \
    --dump "$TMP/x.dump"
[ "$RC" -eq 1 ] && grep -q "not records" "$TMP/dump.err" ||
    fail "--dump on an image spec: exit $RC: $(cat "$TMP/dump.err")"
run_rc "$TMP/dump2.err" "$S" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet \
    --dump "$TMP/no/such/dir/x.dump"
[ "$RC" -eq 1 ] && grep -q "cannot write '$TMP/no/such/dir/x.dump'" "$TMP/dump2.err" ||
    fail "--dump to an unwritable path: exit $RC: $(cat "$TMP/dump2.err")"
ok "--dump: an image spec and an unwritable file are refused with the reason"
echo PASS
