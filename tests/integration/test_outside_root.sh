#!/usr/bin/env bash
# A sample that resolves outside the data root (a symlink leading out, in an
# imagefolder or named by a file list) is a counted skip "outside_root", not
# a failed job: locally and on a worker (offload all), with the count in
# --json, the dispatcher's /status and /metrics, and every other sample's
# digest equal to a run without the link. "on_error": "fail" still fails.
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

make_images "$TMP/data" 3 8
write_train_spec "$TMP/spec.json" 2
run() { # NAME SPEC ARGS...: a run whose digests are $TMP/NAME.s (sorted), --json in NAME.json
    local name=$1 spec=$2
    shift 2
    "$BIN/sluice" run "$spec" --data-root "$TMP/data" --quiet --threads 2 \
        --digests "$TMP/$name" --json "$@" >"$TMP/$name.json"
    sort "$TMP/$name" >"$TMP/$name.s"
}
# count JSON REASON: that skip reason's count in a --json summary (0 when absent)
count() {
    /usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["skipped"]["reasons"].get(sys.argv[2], 0))' "$@"
}

run base "$TMP/spec.json" --local
[ "$(wc -l <"$TMP/base.s")" -eq 48 ] || fail "base run: expected 48 digests"

# The link sorts last (class_002/zz_...), so every other sample keeps its
# index, and so its bytes (the augmentation is keyed by index).
mkdir "$TMP/outside"
cp "$TMP/data/train/class_000/img_00000.jpg" "$TMP/outside/secret.jpg"
ln -s "$TMP/outside/secret.jpg" "$TMP/data/train/class_002/zz_link.jpg"

run local "$TMP/spec.json" --local
cmp -s "$TMP/local.s" "$TMP/base.s" || fail "local: the other samples' digests changed"
[ "$(count "$TMP/local.json" outside_root)" -eq 2 ] || fail "local: $(cat "$TMP/local.json")"
grep -q '"total":2' "$TMP/local.json" || fail "local: skipped total: $(cat "$TMP/local.json")"
ok "local: the job completes, 2 outside_root skips (one per epoch), digests unchanged"

# The same link named by a file list.
cp "$TMP/data/filelist.txt" "$TMP/data/list.txt"
echo "train/class_002/zz_link.jpg 2" >>"$TMP/data/list.txt"
sed 's/"type": "imagefolder", "path": "train"/"type": "filelist", "path": "list.txt"/' \
    "$TMP/spec.json" >"$TMP/listspec.json"
run list "$TMP/listspec.json" --local
cmp -s "$TMP/list.s" "$TMP/base.s" || fail "filelist: the other samples' digests changed"
[ "$(count "$TMP/list.json" outside_root)" -eq 2 ] || fail "filelist: $(cat "$TMP/list.json")"
ok "filelist: a listed link leading out is an outside_root skip"

# on_error fail: the link ends the run with status 1, naming it and why.
write_train_spec "$TMP/fail.json" 1 ', "on_error": "fail"'
run_rc "$TMP/fail.err" "$BIN/sluice" run "$TMP/fail.json" --local --data-root "$TMP/data" --quiet
[ $RC -eq 1 ] || fail "on_error fail: exit $RC, want 1"
grep -q 'zz_link.jpg' "$TMP/fail.err" && grep -q 'outside the data root' "$TMP/fail.err" ||
    fail "on_error fail: $(cat "$TMP/fail.err")"
ok "on_error fail: exit 1 naming the link"

# Through a dispatcher: the worker reads (and refuses) the link.
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --heartbeat-ms 100
start_daemon W "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --data-root "$TMP/data" --threads 1
run remote "$TMP/spec.json" --dispatcher "$D_GRPC" --offload all
cmp -s "$TMP/remote.s" "$TMP/base.s" || fail "offload all: the other samples' digests changed"
[ "$(count "$TMP/remote.json" outside_root)" -eq 2 ] || fail "remote: $(cat "$TMP/remote.json")"
grep -q '"local":0,' "$TMP/remote.json" || fail "offload all ran samples locally"
ok "offload all: the worker's skips arrive as outside_root, digests unchanged"

# The dispatcher counts them by reason (the client reports them with its acks).
for _ in $(seq 1 100); do
    curl -sf --max-time 5 "http://$D_HTTP/status" >"$TMP/status.json" || fail "/status"
    grep -q '"closed_jobs":\[{' "$TMP/status.json" && break
    sleep 0.05
done
/usr/bin/python3 - "$TMP/status.json" <<'PY' || fail "/status: $(cat "$TMP/status.json")"
import json, sys
s = json.load(open(sys.argv[1]))
c = s["closed_jobs"]
assert len(c) == 1 and c[0]["skipped"] == {"outside_root": 2}, c
assert s["totals"]["skipped_by_reason"] == {"outside_root": 2}, s["totals"]
PY
curl -sf --max-time 5 "http://$D_HTTP/metrics" >"$TMP/metrics.txt" || fail "/metrics"
grep -qx 'sluice_samples_skipped_total{reason="outside_root"} 2' "$TMP/metrics.txt" ||
    fail "/metrics: $(grep skipped "$TMP/metrics.txt")"
ok "/status and /metrics count 2 outside_root skips"
echo "outside root: ok"
