#!/usr/bin/env bash
# Resume (docs/protocol.md "Resume"): a run of W ranks stops after a random
# number of batches per rank and saves each rank's state; everything is
# killed (workers and dispatcher too, no journal); a fresh run of W' ranks
# resumes from the states. What the W ranks took plus what the W' ranks
# deliver is the uninterrupted run's digests, each exactly once, the W'
# ranks' shares differ by at most one sample per epoch. 20 seeds, local and
# distributed, stops in epochs 0..2; then broken state sets are refused.
source "$(dirname "$0")/lib.sh"
shopt -s nullglob # a run interrupted once has no c? digests

make_images "$TMP/data" 4 30 # 120 samples: every world size 1..4 divides it
cat >"$TMP/spec.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 11},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 32},
            {"op": "flip", "p": 0.5}, {"op": "to_chw"}],
 "batch_size": 6, "epochs": 3}
JSON
S="$BIN/sluice"
run() { "$S" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 "$@"; }

run --local --digests "$TMP/full"
sort "$TMP/full" >"$TMP/full.s"
[ "$(wc -l <"$TMP/full.s")" -eq 360 ] || fail "uninterrupted: expected 360 digests"

DAEMONS=()
start_cluster() { # a fresh dispatcher and two workers (no journal: nothing survives)
    start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
        --split-size 5 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 5000
    start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
    start_daemon W2 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
    DAEMONS=("$D_PID" "$W1_PID" "$W2_PID")
    wait_live_workers "$D_HTTP" 2
}
kill_cluster() {
    for p in "${DAEMONS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    for p in "${DAEMONS[@]}"; do wait "$p" 2>/dev/null || true; done
    DAEMONS=()
}

for seed in $(seq 1 20); do
    RANDOM=$seed
    W=$((RANDOM % 4 + 1))
    W2=$((RANDOM % 4 + 1))
    [ "$W2" -ne "$W" ] || W2=$((W % 4 + 1)) # another world size
    mode=local
    where=(--local)
    if [ $((seed % 4)) -eq 0 ]; then
        mode=distributed
        start_cluster
        where=(--dispatcher "$D_GRPC" --offload all --job-name "r$seed")
    fi
    d="$TMP/s$seed"
    mkdir -p "$d"
    per_rank=$((360 / W / 6)) # batches of one rank over the 3 epochs
    states=()
    for r in $(seq 0 $((W - 1))); do
        stop=$((RANDOM % (per_rank - 1) + 1))
        run "${where[@]}" --rank "$r" --world-size "$W" --digests "$d/a$r" \
            --save-state "$d/st$r" --stop-after-batches "$stop" 2>"$d/a$r.err" \
            || { cat "$d/a$r.err" >&2; fail "seed $seed: rank $r of $W"; }
        states+=(--resume "$d/st$r")
    done
    if [ "$mode" = distributed ]; then
        kill_cluster
        start_cluster # the resumed run meets a cluster that never saw the job
        where=(--dispatcher "$D_GRPC" --offload all --job-name "r$seed-resumed")
    fi
    # Every third seed is interrupted twice: the second run stops too, and a
    # third (world size W3) resumes from the second's states (a state of a
    # resumed job carries the history of the one before).
    again=$((seed % 3 == 0))
    W3=$((RANDOM % 4 + 1))
    states2=()
    for r in $(seq 0 $((W2 - 1))); do
        stop2=()
        [ "$again" -eq 0 ] || stop2=(--save-state "$d/su$r" --stop-after-batches $((RANDOM % 5 + 1)))
        run "${where[@]}" --rank "$r" --world-size "$W2" --digests "$d/b$r" "${states[@]}" \
            "${stop2[@]}" 2>"$d/b$r.err" \
            || { cat "$d/b$r.err" >&2; fail "seed $seed: resumed rank $r of $W2"; }
        states2+=(--resume "$d/su$r")
    done
    if [ "$again" -eq 1 ]; then
        for r in $(seq 0 $((W3 - 1))); do
            run "${where[@]}" --rank "$r" --world-size "$W3" --digests "$d/c$r" "${states2[@]}" \
                2>"$d/c$r.err" \
                || { cat "$d/c$r.err" >&2; fail "seed $seed: twice resumed rank $r of $W3"; }
        done
    fi
    [ "$mode" = local ] || kill_cluster
    cat "$d"/a? "$d"/b? "$d"/c? | sort >"$d/union.s"
    how="$W -> $W2"
    [ "$again" -eq 0 ] || how="$W -> $W2 -> $W3"
    cmp -s "$d/union.s" "$TMP/full.s" \
        || fail "seed $seed ($mode, $how ranks): before + after != the uninterrupted run" \
            "($(wc -l <"$d/union.s") vs 360 digests, $(uniq -d "$d/union.s" | wc -l) repeated)"
    # The W' shares of each epoch the resume delivers differ by at most one.
    for e in $([ "$again" -eq 0 ] && echo 0 1 2); do
        counts=$(for r in $(seq 0 $((W2 - 1))); do awk -v e=$e '$1 == e' "$d/b$r" | wc -l; done)
        lo=$(sort -n <<<"$counts" | head -1)
        hi=$(sort -n <<<"$counts" | tail -1)
        [ $((hi - lo)) -le 1 ] || fail "seed $seed: epoch $e shares $lo..$hi"
    done
    echo "seed $seed: $mode, $how ranks, $(cat "$d"/a? | wc -l) + $(cat "$d"/b? "$d"/c? | wc -l) digests = the uninterrupted run"
done

# ---- states that must be refused, each with a clear error, nothing run
d="$TMP/s4" # a distributed set of the loop above: a state per rank of its W
n=$(ls "$d"/st? | wc -l)
refused() { # refused WHAT PATTERN ARGS...: exit 2, the message names PATTERN
    local what=$1 pat=$2
    shift 2
    run_rc "$TMP/ref.err" run --local --digests "$TMP/ref" "$@"
    [ "$RC" -eq 2 ] || { cat "$TMP/ref.err" >&2; fail "$what: exit $RC, expected 2"; }
    grep -q -- "$pat" "$TMP/ref.err" || { cat "$TMP/ref.err" >&2; fail "$what: no '$pat'"; }
    [ ! -s "$TMP/ref" ] || fail "$what: delivered samples"
    echo "refused: $what: $(tail -n 1 "$TMP/ref.err")"
}
all=()
for f in "$d"/st?; do all+=(--resume "$f"); done
if [ "$n" -gt 1 ]; then
    refused "a rank's state missing" "is missing" --resume "$d/st0"
fi
refused "a rank's state twice" "given twice" "${all[@]}" --resume "$d/st0"
python3 - "$d/st0" "$TMP/flip" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
i = b.index(b'"taken"') + 12
b[i] = ord('9') if b[i] != ord('9') else ord('8')
open(sys.argv[2], 'wb').write(bytes(b))
EOF
refused "a damaged state" "checksum does not match" --resume "$TMP/flip" "${all[@]:2}"
sed '1s/.*/SLUICE-STATE 2/' "$d/st0" >"$TMP/v2"
refused "a future version" "version 2" --resume "$TMP/v2" "${all[@]:2}"
head -c 40 "$d/st0" >"$TMP/cut"
refused "a truncated state" "damaged" --resume "$TMP/cut" "${all[@]:2}"
refused "another file" "not a sluice state" --resume "$TMP/spec.json"
sed 's/"seed": 11/"seed": 12/' "$TMP/spec.json" >"$TMP/other.json"
run_rc "$TMP/ref.err" "$S" run "$TMP/other.json" --data-root "$TMP/data" --quiet --local \
    "${all[@]}"
[ "$RC" -eq 2 ] && grep -q "another spec" "$TMP/ref.err" || fail "another spec: not refused"
echo "refused: another spec: $(cat "$TMP/ref.err")"
make_images "$TMP/data2" 4 31
run_rc "$TMP/ref.err" "$S" run "$TMP/spec.json" --data-root "$TMP/data2" --quiet --local \
    "${all[@]}"
[ "$RC" -eq 2 ] && grep -q "another source" "$TMP/ref.err" || fail "another source: not refused"
echo "refused: another source: $(cat "$TMP/ref.err")"
# Signed states: a token signs; without it (or with another) they are refused.
printf 'team-a-secret-0123456789\n' >"$TMP/tok"
printf 'team-b-secret-0123456789\n' >"$TMP/tok2"
run --local --digests "$TMP/sa" --save-state "$TMP/signed" --stop-after-batches 4 \
    --token-file "$TMP/tok"
grep -q '^hmac-sha256 ' "$TMP/signed" || fail "a token did not sign the state"
refused "a signed state without its token" "signed with a cluster token" --resume "$TMP/signed"
refused "a signed state, another token" "signature does not match" --resume "$TMP/signed" \
    --token-file "$TMP/tok2"
refused "an unsigned state where a token is set" "not signed" --resume "$d/st0" \
    --token-file "$TMP/tok" "${all[@]:2}"
run --local --digests "$TMP/sb" --resume "$TMP/signed" --token-file "$TMP/tok"
cat "$TMP/sa" "$TMP/sb" | sort | cmp -s - "$TMP/full.s" || fail "signed resume: digests differ"
echo "signed: resumed with its token, digests = the uninterrupted run"
# A finished run's state: nothing left to run.
run --local --save-state "$TMP/end"
run_rc "$TMP/ref.err" run --local --resume "$TMP/end"
[ "$RC" -ne 0 ] && grep -q "nothing is left" "$TMP/ref.err" || fail "a finished run resumed"
echo "refused: $(cat "$TMP/ref.err")"
