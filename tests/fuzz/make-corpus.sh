#!/usr/bin/env bash
# Regenerates the seed corpora in tests/fuzz/corpus/ (committed files; run
# this only when an input format changes). Needs the generated protobuf code,
# so run `make all` first. Usage: tests/fuzz/make-corpus.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2046
cc -std=gnu11 -O1 -Wall -Wextra -Werror -D_GNU_SOURCE -I. -I"$build/gen" \
    $(pkg-config --cflags libprotobuf-c libjpeg libpng zlib check) \
    tests/fuzz/make_corpus.c tests/unit/fixtures.c "$build/gen/proto/sluice.pb-c.c" \
    -o "$tmp/make_corpus" $(pkg-config --libs libprotobuf-c libjpeg libpng zlib check)
# Only the targets make_corpus writes are replaced: corpus/wire's seeds come
# from elsewhere.
"$tmp/make_corpus" "$tmp/corpus"
for d in "$tmp"/corpus/*/; do
    name=$(basename "$d")
    rm -rf "tests/fuzz/corpus/$name"
    cp -r "$d" "tests/fuzz/corpus/$name"
done
find tests/fuzz/corpus -type f | sort | while read -r f; do
    printf '  %-50s %6d bytes\n' "$f" "$(stat -c %s "$f")"
done
