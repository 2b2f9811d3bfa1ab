#!/usr/bin/env bash
# sluice run --local: digests independent of thread count, every broken input
# a counted skip (--json lists the skipped paths and reasons), shuffle false
# delivers index order with deterministic true, on_error=fail stops and says
# so without calling the bad sample a skip, spec errors exit 2 naming
# file:line; --json units time the fused unit's parts (substages).
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 8
write_train_spec "$TMP/spec.json" 2

# Broken inputs, made from good ones.
cls="$TMP/data/train/class_000"
good=$(ls "$cls"/*.jpg | head -n 1)
: >"$cls/zz_empty.jpg"
head -c 2000 "$good" >"$cls/zz_truncated.jpg"
printf 'GIF89a not a jpeg at all' >"$cls/zz_notjpeg.jpg"
/usr/bin/python3 - "$good" "$cls/zz_bomb.jpg" <<'PY'
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
i = 2
while i < len(d):
    assert d[i] == 0xFF
    m = d[i + 1]
    ln = d[i + 2] << 8 | d[i + 3]
    if m in (0xC0, 0xC1, 0xC2):
        d[i + 5:i + 9] = bytes([40000 >> 8, 40000 & 255, 40000 >> 8, 40000 & 255])
        break
    i += 2 + ln
open(sys.argv[2], 'wb').write(d)
PY

run() { "$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet "$@"; }

run --threads 1 --digests "$TMP/d1" --json >"$TMP/j1"
run --threads 2 --digests "$TMP/d2" >/dev/null
sort "$TMP/d1" >"$TMP/d1s"
sort "$TMP/d2" >"$TMP/d2s"
cmp "$TMP/d1s" "$TMP/d2s" || fail "digests differ between --threads 1 and 2"
lines=$(wc -l <"$TMP/d1")
[ "$lines" -eq 48 ] || fail "expected 48 digests (24 good images x 2 epochs), got $lines"
# Every index appears once per epoch.
dups=$(awk '{print $1, $2}' "$TMP/d1" | sort | uniq -d | wc -l)
[ "$dups" -eq 0 ] || fail "duplicate (epoch, index) in digests"

/usr/bin/python3 - "$TMP/j1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["skipped"]["reasons"]
assert j["samples"] == 48, j
assert j["skipped"]["total"] == 8, j
assert r.get("empty") == 2 and r.get("truncated") == 2 and r.get("not_jpeg") == 2 \
    and r.get("too_large") == 2, r
assert j["units"][0]["name"] == "decode_jpeg+random_resized_crop", j["units"]
# The fused unit's parts: every one there and >= 0, together no more than
# the unit (they are read inside it) and most of it (nothing big untimed).
u0 = j["units"][0]
sub = u0["substages"]
assert sorted(sub) == ["resample_ms", "rows_ms", "setup_ms", "skip_ms"], u0
assert all(v >= 0 for v in sub.values()), u0
assert sub["rows_ms"] > 0 and sub["resample_ms"] > 0 and sub["setup_ms"] > 0, u0
total, unit = sum(sub.values()), u0["cpu_ms_per_sample"]
assert total <= unit * 1.001 + 1e-3, (total, u0)
assert total >= unit * 0.5, (total, u0)
assert all("substages" not in u for u in j["units"][1:]), j["units"]
rec = j["skipped"]["recent"]
assert len(rec) == 8, rec
assert sorted((k["epoch"], k["path"]) for k in rec) == sorted(
    (e, "train/class_000/zz_%s.jpg" % n) for e in (0, 1)
    for n in ("empty", "truncated", "notjpeg", "bomb")), rec
assert {k["reason"] for k in rec} == set(r), rec
PY

# Same spec, deterministic: identical files without sorting.
write_train_spec "$TMP/det.json" 1 ', "deterministic": true'
"$BIN/sluice" run "$TMP/det.json" --local --data-root "$TMP/data" --quiet --threads 1 --digests "$TMP/e1"
"$BIN/sluice" run "$TMP/det.json" --local --data-root "$TMP/data" --quiet --threads 2 --digests "$TMP/e2"
cmp "$TMP/e1" "$TMP/e2" || fail "deterministic runs differ in order"

# shuffle false: the epoch order is the index order; batches come in index
# order only with deterministic true (docs/sources.md), else in arrival order
# with the same samples and bytes.
sed 's/"shuffle": true/"shuffle": false/' "$TMP/spec.json" >"$TMP/noshuf.json"
sed 's/"shuffle": true/"shuffle": false/' "$TMP/det.json" >"$TMP/ordered.json"
"$BIN/sluice" run "$TMP/ordered.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/o1" --epochs 2
"$BIN/sluice" run "$TMP/noshuf.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/o2"
sort -k1,1n -k2,2n "$TMP/o1" | cmp -s - "$TMP/o1" ||
    fail "shuffle false + deterministic: not in index order"
[ "$(wc -l <"$TMP/o1")" -eq 48 ] || fail "shuffle false + deterministic: $(wc -l <"$TMP/o1") lines"
cmp -s <(sort "$TMP/o1") <(sort "$TMP/o2") ||
    fail "shuffle false: arrival order delivers other samples"

# on_error fail: the first bad sample ends the run with status 1.
write_train_spec "$TMP/fail.json" 1 ', "on_error": "fail"'
run_rc "$TMP/fail.err" "$BIN/sluice" run "$TMP/fail.json" --local --data-root "$TMP/data" --quiet
[ $RC -eq 1 ] || fail "on_error fail: exit $RC, want 1"
grep -q 'zz_' "$TMP/fail.err" || fail "on_error fail: message does not name the file"
# Its summary: the bad sample stopped the run; it was not skipped (it said
# "0 skipped", then "first skipped sample: ...").
set +e
"$BIN/sluice" run "$TMP/fail.json" --local --data-root "$TMP/data" --json >"$TMP/fail.json.out" \
    2>"$TMP/fail2.err"
set -e
grep -q 'stopped at a bad sample (on_error "fail"): .*zz_' "$TMP/fail2.err" ||
    fail "on_error fail summary: $(cat "$TMP/fail2.err")"
! grep -q 'skipped sample' "$TMP/fail2.err" ||
    fail "on_error fail: called a skip: $(cat "$TMP/fail2.err")"
/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert "zz_" in j["failed_on"] and j["skipped"]["total"] == 0, j
assert "first" not in j["skipped"] and j["skipped"]["recent"] == [], j' "$TMP/fail.json.out" ||
    fail "on_error fail --json: $(cat "$TMP/fail.json.out")"

# Spec errors: exit 2 and name file:line:field.
printf '{"source": {"type": "imagefolder", "path": "train"},\n "stages": [{"op": "decode_jpeg"},\n  {"op": "resize", "size": 0}]}\n' >"$TMP/bad.json"
run_rc "$TMP/bad.err" "$BIN/sluice" run "$TMP/bad.json" --local --data-root "$TMP/data"
[ $RC -eq 2 ] || fail "bad spec: exit $RC, want 2"
grep -q 'bad.json:3' "$TMP/bad.err" || { cat "$TMP/bad.err"; fail "bad spec: no file:line"; }
grep -q 'stages\[1\].size' "$TMP/bad.err" || fail "bad spec: no field"

# Usage errors: exit 2.
set +e
"$BIN/sluice" run "$TMP/spec.json" 2>/dev/null; rc1=$?
"$BIN/sluice" run "$TMP/spec.json" --local --threads 0 2>/dev/null; rc2=$?
"$BIN/sluice" frobnicate 2>/dev/null; rc3=$?
set -e
[ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 2 ] || fail "usage errors: $rc1 $rc2 $rc3"

# A path escaping the data root is refused.
sed 's/"path": "train"/"path": "..\/etc"/' "$TMP/spec.json" >"$TMP/escape.json"
run_rc "$TMP/esc.err" "$BIN/sluice" run "$TMP/escape.json" --local --data-root "$TMP/data"
[ $RC -ne 0 ] || fail "escaping path accepted"
echo "local run: ok"
