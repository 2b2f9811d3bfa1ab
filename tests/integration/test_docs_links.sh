#!/usr/bin/env bash
# The documentation's links resolve inside the repository: every relative
# markdown link and image in README.md, client/python/README.md and docs/**
# names a file that exists under the repository root (never outside it, e.g.
# ../shared), a "#anchor" names a heading of the target page, and every
# `docs/NAME.md` the text cites in code spans exists. No daemons, no build.
# SELFTEST=0 skips the check that a broken link is caught.
source "$(dirname "$0")/lib.sh"

check() {
    /usr/bin/python3 - "$1" <<'PY'
import os, re, sys

root = os.path.realpath(sys.argv[1])
pages = [os.path.join(root, "README.md"), os.path.join(root, "client/python/README.md")]
for d, _, files in os.walk(os.path.join(root, "docs")):
    pages += [os.path.join(d, f) for f in sorted(files) if f.endswith(".md")]


def prose(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fence = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to -."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in prose(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.add(base if k == 0 else "%s-%d" % (base, k))
    return out


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CITED = re.compile(r"`((?:docs/[\w./-]+|README)\.md)`")
bad = []
for page in pages:
    if not os.path.exists(page):
        continue
    rel = os.path.relpath(page, root)
    for n, line in prose(page):
        text = re.sub(r"``[^`]*``|`[^`]*`", "", line)  # links are not in code spans
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                bad.append("%s:%d: %s: leaves the repository" % (rel, n, target))
                continue
            path, _, frag = target.partition("#")
            dest = os.path.realpath(os.path.join(os.path.dirname(page), path)) if path else page
            if dest != root and not dest.startswith(root + os.sep):
                bad.append("%s:%d: %s: outside the repository" % (rel, n, target))
            elif not os.path.exists(dest):
                bad.append("%s:%d: %s: no such file" % (rel, n, target))
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                bad.append("%s:%d: %s: no heading #%s there" % (rel, n, target, frag))
        for cited in CITED.findall(line):
            if not os.path.exists(os.path.join(root, cited)):
                bad.append("%s:%d: `%s`: no such file" % (rel, n, cited))
for b in bad:
    print(b)
print("%d pages, %d broken" % (len(pages), len(bad)))
sys.exit(1 if bad else 0)
PY
}

check "$ROOT" >"$TMP/links.txt" || fail "broken documentation links:
$(cat "$TMP/links.txt")"
echo "ok: $(tail -n 1 "$TMP/links.txt")"

# The check catches what it is for: a copy of the pages with one broken link of
# each kind fails, naming each.
if [ "${SELFTEST:-1}" = 1 ]; then
    mkdir -p "$TMP/tree"
    cp -r "$ROOT/README.md" "$ROOT/docs" "$TMP/tree/"
    printf '\n[a](docs/nowhere.md) [b](../shared/x.md) [c](docs/design.md#no-such-heading)\n' \
        >>"$TMP/tree/README.md"
    printf '\nSee `docs/nowhere-either.md`.\n' >>"$TMP/tree/docs/design.md"
    if check "$TMP/tree" >"$TMP/self.txt"; then
        fail "a broken link went unnoticed: $(cat "$TMP/self.txt")"
    fi
    for want in "docs/nowhere.md: no such file" "../shared/x.md: outside the repository" \
        "no heading #no-such-heading" "docs/nowhere-either.md\`: no such file"; do
        grep -qF -- "$want" "$TMP/self.txt" || fail "not reported: $want ($(cat "$TMP/self.txt"))"
    done
    echo "ok: broken links of each kind are reported"
fi
