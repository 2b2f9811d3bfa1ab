#!/usr/bin/env bash
# make lint catches what it is for: on a copy of the tree (the sources, the
# Makefile, scripts/), an include against the module table fails with
# file:line, a program's arrow to another fails too, so does a folder the table
# does not know, and lines changed in a
# shape clang-format would not write fail the format check. The clean copy
# passes. No daemons; a few seconds.
. "$(dirname "$0")/lib.sh"

T="$TMP/tree"
mkdir -p "$T"
(cd "$ROOT" && cp -a Makefile .clang-format scripts proto common client dispatcher worker \
    plugin_host "$T/")
mkdir -p "$T/tests" && cp -a "$ROOT/tests/unit" "$T/tests/"

lint() { # lint OUT: runs scripts/lint in the copy, output in OUT, returns its status
    (cd "$T" && BUILD=build ./scripts/lint) >"$1" 2>&1
}

# 1. The copy as it is passes (not a git checkout: the format check notes it is skipped).
lint "$TMP/clean.out" || { cat "$TMP/clean.out"; fail "lint fails on the clean tree"; }
grep -q ' 0 violation(s)' "$TMP/clean.out" || fail "no include summary"
grep -q 'format: skipped, not a git checkout' "$TMP/clean.out" || fail "format not skipped"
grep -q 'size (a report, not a failure)' "$TMP/clean.out" || fail "no size report"

# 2. common/base may include only base: a header of the worker there fails, with file:line.
cp "$T/common/base/clock.c" "$TMP/clock.c.orig"
n=$(grep -n '#include "' "$T/common/base/clock.c" | head -1 | cut -d: -f1)
sed -i "${n}a #include \"worker/tasks.h\"" "$T/common/base/clock.c"
if lint "$TMP/up.out"; then cat "$TMP/up.out"; fail "an include up the layers passed"; fi
want="common/base/clock.c:$((n + 1)): includes worker/tasks.h (module worker), not in DEPS_base"
grep -qF "$want" "$TMP/up.out" || { cat "$TMP/up.out"; fail "expected: $want"; }
cp "$TMP/clock.c.orig" "$T/common/base/clock.c"

# 3. No program includes another: the dispatcher including the client library fails.
echo '#include "client/lib/sluice.h"' >>"$T/dispatcher/main.c"
if lint "$TMP/prog.out"; then cat "$TMP/prog.out"; fail "dispatcher -> client passed"; fi
want='includes client/lib/sluice.h (module client), not in DEPS_disp$'
grep -q "^dispatcher/main.c:[0-9]*: $want" "$TMP/prog.out" ||
    { cat "$TMP/prog.out"; fail "no dispatcher -> client violation"; }
sed -i '$d' "$T/dispatcher/main.c"

# 4. Production code is all in the table: a folder the Makefile does not know fails.
mkdir "$T/common/zz" && echo 'int sl_zz(void);' >"$T/common/zz/zz.h"
if lint "$TMP/zz.out"; then cat "$TMP/zz.out"; fail "a folder in no module passed"; fi
grep -q "^common/zz/zz.h: in no module's directory" "$TMP/zz.out" ||
    { cat "$TMP/zz.out"; fail "no unknown-folder violation"; }
rm -r "$T/common/zz"
lint "$TMP/again.out" || { cat "$TMP/again.out"; fail "lint fails once the tree is undone"; }

# 5. clang-format on changed lines: a commit with one badly formatted line fails,
# lines outside the change are not looked at, and a root commit is skipped.
g() { git -C "$T" -c user.name=lint -c user.email=lint@localhost -c commit.gpgsign=false "$@"; }
g init -q
g add -A
g commit -q -m base
lint "$TMP/root.out" || { cat "$TMP/root.out"; fail "lint fails on a root commit"; }
grep -q 'format: skipped, HEAD has no parent' "$TMP/root.out" || fail "root commit not skipped"
printf 'int sl_lint_probe( int a,int b ) { return a+b; }\n' >>"$T/common/base/clock.c"
g commit -q -am bad
if lint "$TMP/fmt.out"; then cat "$TMP/fmt.out"; fail "a badly formatted line passed"; fi
grep -q 'format: lines changed since HEAD~1 are not as clang-format writes them' "$TMP/fmt.out" ||
    { cat "$TMP/fmt.out"; fail "no format failure"; }
sed -i '$d' "$T/common/base/clock.c"
printf 'int sl_lint_probe(int a, int b) { return a + b; }\n' >>"$T/common/base/clock.c"
g commit -q -am good
lint "$TMP/ok.out" || { cat "$TMP/ok.out"; fail "a well formatted change failed"; }
grep -q 'format: lines changed since HEAD~1 are clang-format clean' "$TMP/ok.out" ||
    { cat "$TMP/ok.out"; fail "no format pass"; }
echo "PASS test_lint"
