#!/usr/bin/env bash
# What `sluice` says when the user got something wrong (issue #38 item 9):
# a source that is not there names the path it looked for, the data root it
# searched, and (no --data-root given) that the root defaults to the current
# directory; a spec with several independent errors reports all of them.
# Run from the repository root; $BUILD (default build) holds the binaries.
source "$(dirname "$0")/lib.sh"

S="$BIN/sluice"
[ -x "$S" ] || fail "$S not built"
ok() { echo "ok: $*"; }

make_images "$TMP/data" 2 4
write_train_spec "$TMP/spec.json" 1

# ---- a missing source, without --data-root: run from a directory without "train"
mkdir -p "$TMP/elsewhere"
(cd "$TMP/elsewhere" && "$S" run "$TMP/spec.json" --local --quiet) >/dev/null 2>"$TMP/err" &&
    rc=0 || rc=$?
[ $rc -eq 1 ] || fail "missing source: exit $rc, not 1: $(cat "$TMP/err")"
grep -qF "looked for '$TMP/elsewhere/train'" "$TMP/err" ||
    fail "missing source: the path it tried is not named: $(cat "$TMP/err")"
grep -qF "data root '$TMP/elsewhere'" "$TMP/err" ||
    fail "missing source: the data root is not named: $(cat "$TMP/err")"
grep -qF -- "--data-root" "$TMP/err" && grep -qF "current directory" "$TMP/err" ||
    fail "missing source: the --data-root default is not named: $(cat "$TMP/err")"
ok "missing source, default root: path, root and the default named"

# ---- with --data-root: the root given, no hint about the default
"$S" run "$TMP/spec.json" --local --quiet --data-root "$TMP/elsewhere" >/dev/null 2>"$TMP/err" &&
    rc=0 || rc=$?
[ $rc -eq 1 ] || fail "missing source (--data-root): exit $rc, not 1: $(cat "$TMP/err")"
grep -qF "looked for '$TMP/elsewhere/train' under the data root '$TMP/elsewhere'" "$TMP/err" ||
    fail "missing source (--data-root): path and root not named: $(cat "$TMP/err")"
! grep -qF "current directory" "$TMP/err" ||
    fail "missing source (--data-root): the default hinted although a root was given"
ok "missing source, --data-root: path and root named"

# ---- the source is found where the message says it looked
"$S" run "$TMP/spec.json" --local --quiet --data-root "$TMP/data" >/dev/null 2>"$TMP/err" ||
    fail "run with the right --data-root: $(cat "$TMP/err")"
ok "the right --data-root runs"

# ---- a spec with three independent errors: all three, one a line, in order, exit 2
cat >"$TMP/bad3.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": 3},
 "stages": [{"op": "decode_jpeg"}, {"op": "flip", "p": 7}],
 "batch_size": 0, "epochs": 1}
JSON
"$S" run "$TMP/bad3.json" --local --quiet --data-root "$TMP/data" >/dev/null 2>"$TMP/err" &&
    rc=0 || rc=$?
[ $rc -eq 2 ] || fail "three spec errors: exit $rc, not 2: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/err")" -eq 3 ] || fail "three spec errors: not three lines: $(cat "$TMP/err")"
sed -n 1p "$TMP/err" | grep -q "^sluice run: $TMP/bad3.json:1: source.shuffle: " ||
    fail "first error: $(cat "$TMP/err")"
sed -n 2p "$TMP/err" | grep -q "^$TMP/bad3.json:2: stages\[1\].p: " ||
    fail "second error: $(cat "$TMP/err")"
sed -n 3p "$TMP/err" | grep -q "^$TMP/bad3.json:3: batch_size: " ||
    fail "third error: $(cat "$TMP/err")"
ok "three spec errors: all reported, in order, exit 2"

# ---- the first error alone reads as it always did
cat >"$TMP/bad1.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": 3},
 "stages": [{"op": "decode_jpeg"}], "batch_size": 2, "epochs": 1}
JSON
"$S" run "$TMP/bad1.json" --local --quiet --data-root "$TMP/data" >/dev/null 2>"$TMP/err1" &&
    rc=0 || rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err1")" -eq 1 ] || fail "one spec error: $(cat "$TMP/err1")"
cmp -s "$TMP/err1" <(sed -n 1p "$TMP/err" | sed "s|bad3.json|bad1.json|") ||
    fail "the first of three errors differs from it alone: $(cat "$TMP/err1")"
ok "one spec error: one line, the same as the first of three"

# ---- a JSON syntax error stops there: one error
printf '{"source": {"type": "imagefolder", "path": "train"},,\n "batch_size": 0}\n' \
    >"$TMP/syntax.json"
"$S" run "$TMP/syntax.json" --local --quiet --data-root "$TMP/data" >/dev/null 2>"$TMP/err" &&
    rc=0 || rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "syntax error: $(cat "$TMP/err")"
grep -q "syntax.json:1: column " "$TMP/err" || fail "syntax error: $(cat "$TMP/err")"
ok "JSON syntax error: one error"

# ---- many errors: the first 20, then how many more
/usr/bin/python3 -c 'import json, sys
json.dump({"source": {"type": "imagefolder", "path": "train"},
           **{"bad%d" % i: i for i in range(30)}}, open(sys.argv[1], "w"), indent=0)' \
    "$TMP/many.json"
"$S" run "$TMP/many.json" --local --quiet --data-root "$TMP/data" >/dev/null 2>"$TMP/err" &&
    rc=0 || rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 21 ] || fail "30 errors: $(cat "$TMP/err")"
tail -n 1 "$TMP/err" | grep -qx "$TMP/many.json: 10 more errors" ||
    fail "30 errors: no count of the rest: $(tail -n 1 "$TMP/err")"
ok "30 spec errors: 20 shown, then '10 more errors'"
