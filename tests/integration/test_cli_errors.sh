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
