#!/usr/bin/env bash
# The dispatcher's dashboard (GET /) in headless Chromium: self-contained (no
# external URL anywhere in the page), and once it has polled /status its DOM
# shows the worker, the running job, its plan and the summary cards; a
# screenshot is a real rendering (the dark header where it belongs, not a
# blank page). Skips (exit 0, "SKIP") only when Chromium is not installed:
# scripts/install-deps.sh installs Debian's chromium.
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then
    echo "SKIP: chromium is not installed (scripts/install-deps.sh installs it)"
    exit 0
fi
chrome() { # URL ARGS...: headless, no network beyond loopback, bounded in time
    local url=$1
    shift
    HOME="$TMP" timeout 60 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-extensions --disable-sync \
        --user-data-dir="$TMP/chrome" --virtual-time-budget=4000 "$@" "$url" 2>>"$TMP/chrome.err"
}

make_images "$TMP/data" 3 8
write_train_spec "$TMP/spec.json" 2000
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0
start_daemon W "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 >/dev/null 2>"$TMP/run.err" &
PIDS+=("$!")

# Wait until the job runs on the worker, and learn its id.
job=""
for _ in $(seq 1 100); do
    job=$(curl -sf --max-time 5 "http://$D_HTTP/status" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
j = s["jobs"]
print(j[0]["id"] if j and j[0]["progress"].get("samples_done", 0) > 0 else "")' || true)
    [ -n "$job" ] && break
    sleep 0.1
done
[ -n "$job" ] || fail "the job did not start: $(cat "$TMP/run.err")"
sleep 2 # a few sampler ticks: rates and history points

# ---- the page itself: self-contained
curl -sf --max-time 5 "http://$D_HTTP/" >"$TMP/page.html" || fail "GET /"
grep -qi '<!doctype html>' "$TMP/page.html" || fail "not an HTML page"
if grep -Eio '(src|href)="[^"]*"|url\([^)]*\)|https?://|@import' "$TMP/page.html" |
    grep -Ev '^href="/(status|metrics)"$' >"$TMP/external.txt"; then
    fail "the page references outside resources: $(cat "$TMP/external.txt")"
fi
ok "GET / is one self-contained HTML page"

# ---- the DOM once the page has polled /status
chrome "http://$D_HTTP/" --dump-dom >"$TMP/dom.html" || fail "chromium --dump-dom failed"
/usr/bin/python3 - "$TMP/dom.html" "$W_GRPC" "$job" <<'PY' || fail "dashboard DOM"
import sys
from html.parser import HTMLParser
dom, worker, job = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]

class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.body = {}
        self.rows = []      # (class, attrs) of every <tr>
        self.text = {}      # id -> text
        self.cur = None
        self.canvas = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag == "tr":
            self.rows.append((a.get("class"), a))
        if tag == "canvas" and a.get("id") == "chart":
            self.canvas = True
        self.cur = a.get("id")
    def handle_data(self, data):
        if self.cur:
            self.text[self.cur] = self.text.get(self.cur, "") + data
p = P()
p.feed(dom)
assert p.body.get("data-state") == "ok", ("page did not load /status", p.body)
workers = [a for c, a in p.rows if c == "worker"]
assert [a["data-address"] for a in workers] == [worker], workers
jobs = [a for c, a in p.rows if c == "job"]
assert [a["data-job"] for a in jobs] == [job], jobs
plans = [a for c, a in p.rows if c == "plan"]
assert [a["data-job"] for a in plans] == [job], plans
assert p.text.get("c-workers", "").strip() == "1", p.text
assert p.text.get("c-jobs", "").strip() == "1", p.text
assert p.canvas, "no throughput chart"
assert "live" in p.text.get("conn", ""), p.text.get("conn")
for want in ("decode_jpeg", "imagefolder:train", worker):
    assert want in dom, want
PY
ok "DOM: worker $W_GRPC, job $job with its plan, cards, chart, connection live"

# ---- a screenshot: a real rendering, not a blank page
chrome "http://$D_HTTP/" --window-size=1280,1000 --screenshot="$TMP/dash.png" >/dev/null ||
    fail "chromium --screenshot failed"
/usr/bin/python3 - "$TMP/dash.png" <<'PY' || fail "screenshot"
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
assert im.size == (1280, 1000), im.size
# The header bar is dark (#1c232b), the page below it light.
r, g, b = im.getpixel((5, 5))
assert r < 60 and g < 60 and b < 70, (r, g, b)
r, g, b = im.getpixel((640, 990))
assert r > 200 and g > 200 and b > 200, (r, g, b)
colours = len(set(im.crop((0, 0, 1280, 600)).getdata()))
assert colours > 50, "too few colours for a page with text and a chart: %d" % colours
PY
ok "screenshot $TMP/dash.png rendered (header, page, text)"
if [ -n "${SLUICE_KEEP_SCREENSHOT:-}" ]; then
    cp "$TMP/dash.png" "$SLUICE_KEEP_SCREENSHOT"
fi
echo PASS
