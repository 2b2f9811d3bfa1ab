#!/usr/bin/env bash
# `sluice run` sets glibc.malloc.hugetlb=1 for its own process
# (client/cli/cli_tunables.c): it re-executes itself once, same pid, with the
# tunable added to GLIBC_TUNABLES (glibc reads it only at exec), keeps the
# tunables a user set, leaves a user's own hugetlb setting and an over-long
# GLIBC_TUNABLES alone, and SLUICE_MALLOC_HUGETLB=0 opts out. Every way, the
# run delivers the same samples.
# Run from the repository root; $BUILD (default build) holds the binaries.
source "$(dirname "$0")/lib.sh"

S="$BIN/sluice"
make_images "$TMP/data" 2 8
write_train_spec "$TMP/spec.json" 2

# env_of NAME [env ARGS...]: runs a paced `sluice run` with that environment;
# a second in (after any re-exec: the same pid) writes its environment as the
# kernel shows it to $TMP/NAME.env and the flags of its malloc heap to
# $TMP/NAME.heap ("hg": advised MADV_HUGEPAGE, what glibc.malloc.hugetlb=1
# does; /proc's copy of GLIBC_TUNABLES itself is not reliable, glibc parses
# it in place), its digests to $TMP/NAME.dig.
env_of() {
    local name=$1
    shift
    env "$@" "$S" run "$TMP/spec.json" --local --data-root "$TMP/data" --threads 1 --quiet \
        --max-rate 10 --digests "$TMP/$name.dig" >/dev/null &
    local pid=$!
    PIDS+=("$pid")
    sleep 1
    tr '\0' '\n' <"/proc/$pid/environ" >"$TMP/$name.env" || fail "$name: no environ"
    awk '/\[heap\]/ { h = 1 } h && /^VmFlags/ { print; exit }' "/proc/$pid/smaps" \
        >"$TMP/$name.heap" || fail "$name: no smaps"
    wait "$pid" || fail "$name: sluice run failed"
}
reexeced() { grep -q '^SLUICE_REEXECED=1$' "$TMP/$1.env"; }
huge() { grep -qw hg "$TMP/$1.heap"; }

# Where transparent huge pages are "never", madvise is refused: the heap
# shows no "hg" whatever the tunable, so only the re-exec is checked.
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo never)
case "$thp" in *"[never]"*) HG=0 ;; *) HG=1 ;; esac

env_of plain -u GLIBC_TUNABLES -u SLUICE_MALLOC_HUGETLB
reexeced plain || fail "default: not re-executed"
[ $HG = 0 ] || huge plain || fail "default: heap not advised huge: $(cat "$TMP/plain.heap")"

env_of optout -u GLIBC_TUNABLES SLUICE_MALLOC_HUGETLB=0
! reexeced optout || fail "SLUICE_MALLOC_HUGETLB=0: re-executed"
! huge optout || fail "SLUICE_MALLOC_HUGETLB=0: heap advised huge"

env_of user -u SLUICE_MALLOC_HUGETLB GLIBC_TUNABLES=glibc.malloc.arena_max=2
reexeced user || fail "a user's other tunables: not re-executed"
[ $HG = 0 ] || huge user || fail "a user's other tunables: heap not advised huge"

env_of own -u SLUICE_MALLOC_HUGETLB GLIBC_TUNABLES=glibc.malloc.hugetlb=0
! reexeced own || fail "re-executed although the user set hugetlb"
! huge own || fail "the user's glibc.malloc.hugetlb=0 overridden"

# Broken: longer than the program composes (its buffer): left alone.
long="glibc.malloc.arena_max=2$(printf ':glibc.malloc.arena_max=2%.0s' $(seq 1 60))"
env_of long -u SLUICE_MALLOC_HUGETLB GLIBC_TUNABLES="$long"
! reexeced long || fail "an over-long GLIBC_TUNABLES: re-executed"

for n in optout user own long; do
    cmp -s "$TMP/plain.dig" "$TMP/$n.dig" || fail "$n: other samples than the default run"
done
echo "ok: hugetlb added once (same pid), a user's tunables kept, opt-out and over-long left" \
    "alone; the same samples every way"
