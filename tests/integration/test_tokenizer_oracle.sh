#!/usr/bin/env bash
# The tokenizer (common/text/) against OpenAI's tiktoken: the npm package
# (tiktoken compiled to WASM, run by node) that scripts/install-deps.sh
# installs is the oracle. The ranks files come from that package
# (scripts/tokenizer-files); the corpus is scripts/bench-tokenizer's
# (/usr/share licenses, copyrights, changelogs, man pages and generated
# tricky Unicode, ~6 MB). For cl100k_base, o200k_base and gpt2, ordinary and
# allow-special, every file's ids must equal the oracle's, and with
# --max-tokens they must be the oracle's prefix. Then the unit suite's
# real-file cases run against the generated files.
source "$(dirname "$0")/lib.sh"

ORACLE="${SLUICE_ORACLE:-/usr/local/lib/sluice-oracle}"
[ -e "$ORACLE/node_modules/tiktoken/package.json" ] ||
    fail "the oracle $ORACLE/node_modules/tiktoken is missing: run scripts/install-deps.sh"
command -v node >/dev/null || fail "node is missing: run scripts/install-deps.sh"
TOOL="$ROOT/$BUILD/tools/tokenize"
[ -x "$TOOL" ] || fail "$TOOL not built"

"$ROOT/scripts/tokenizer-files" "$TMP/ranks" >/dev/null
read -r NFILES NBYTES < <("$ROOT/scripts/bench-tokenizer" --write-corpus "$TMP/corpus" --mb 6)
mapfile -t FILES < <(find "$TMP/corpus" -type f | sort)
[ "${#FILES[@]}" -eq "$NFILES" ] || fail "corpus: ${#FILES[@]} files, expected $NFILES"

cat >"$TMP/oracle.js" <<'JS'
const fs = require("fs");
const { get_encoding } = require(process.env.ORACLE + "/node_modules/tiktoken/tiktoken.cjs");
const [enc, mode, out, ...files] = process.argv.slice(2);
const e = get_encoding(enc);
const lines = files.map((f) => {
    const text = fs.readFileSync(f, "utf8");
    return (mode === "special" ? e.encode(text, "all") : e.encode_ordinary(text)).join(" ");
});
fs.writeFileSync(out, lines.join("\n") + "\n");
e.free();
JS

# compare WANT GOT LABEL [MAX]: line k of each is file k's ids; with MAX, GOT
# must be WANT's first MAX ids. Prints the first difference and fails.
compare() {
    /usr/bin/python3 - "$@" "$TMP/files.list" <<'PY' || fail "$3: ids differ from tiktoken's"
import sys
want, got, label, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
mx = int(rest[0]) if len(rest) > 1 else 0
names = open(rest[-1]).read().split("\n")
w, g = open(want).read().split("\n"), open(got).read().split("\n")
if len(w) != len(g):
    sys.exit("%s: %d lines vs %d" % (label, len(g), len(w)))
for k, (a, b) in enumerate(zip(w, g)):
    a, b = a.split(), b.split()
    if mx:
        a = a[:mx]
    if a != b:
        i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        print("FAIL: %s: %s differs at token %d: tiktoken %s, sluice %s" % (
            label, names[k], i, a[max(0, i - 3):i + 5], b[max(0, i - 3):i + 5]), file=sys.stderr)
        sys.exit(1)
PY
}
printf '%s\n' "${FILES[@]}" >"$TMP/files.list"

TOKENS=0
COMPARED=0
for enc in cl100k_base o200k_base gpt2; do
    for mode in ordinary special; do
        flag=()
        [ "$mode" = special ] && flag=(--special)
        ORACLE="$ORACLE" node "$TMP/oracle.js" "$enc" "$mode" "$TMP/want" "${FILES[@]}"
        "$TOOL" --ranks "$TMP/ranks/$enc.tiktoken" --encoding "$enc" "${flag[@]}" "${FILES[@]}" \
            >"$TMP/got"
        compare "$TMP/want" "$TMP/got" "$enc $mode"
        n=$(wc -w <"$TMP/want")
        TOKENS=$((TOKENS + n))
        COMPARED=$((COMPARED + 1))
        echo "  $enc $mode: $NFILES files, $NBYTES bytes, $n tokens equal"
        for max in 1 37 1000; do
            "$TOOL" --ranks "$TMP/ranks/$enc.tiktoken" --encoding "$enc" "${flag[@]}" \
                --max-tokens "$max" "${FILES[@]}" >"$TMP/got"
            compare "$TMP/want" "$TMP/got" "$enc $mode max_tokens=$max" "$max"
        done
    done
done
# Special-token text is plain text when not allowed: the runs above differ.
grep -q . "$TMP/want" || fail "no tokens at all"

# The unit suite's real-file cases (skipped without this variable).
SLUICE_TOKENIZER_FILES="$TMP/ranks" CK_FORK=no "$ROOT/$BUILD/tests/test_tokenizer" >"$TMP/unit.out" ||
    { cat "$TMP/unit.out" >&2; fail "test_tokenizer with the real ranks files"; }
grep -q "real ranks files: skipped" "$TMP/unit.out" && fail "test_tokenizer skipped the real files"

echo "ok: $COMPARED runs x $NFILES files x $NBYTES bytes: $TOKENS tokens equal to tiktoken's" \
     "(and their prefixes at max_tokens 1, 37, 1000)"
