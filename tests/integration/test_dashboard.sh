#!/usr/bin/env bash
# The dispatcher's dashboard (GET /) in headless Chromium: self-contained (no
# external URL anywhere in the page). With a job running (held by --max-rate)
# the page is opened only after the job has run for a while, and its DOM
# shows the job's whole line from the dispatcher's history (points from
# before the page was opened), measured and predicted both drawn, elapsed
# time and ETA, the job named by its spec's "name"; a worker killed with -9
# shows no live values once lost. A recorded /status with a wild predicted
# point and a measured spike injected checks the y-axis: neither flattens
# the measured line, both are clipped and marked. A screenshot is a real
# rendering (the dark header where it belongs, not a blank page). Skips
# (exit 0, "SKIP") only when Chromium is not installed:
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
status() { curl -sf --max-time 5 "http://$D_HTTP/status"; }
py() { /usr/bin/python3 "$@"; }

# What the DOM checks below read: rows by class, cells by class, the chart's
# SVG elements with their attributes. Imported by each check (a module on
# PYTHONPATH, not a copy per check).
mkdir -p "$TMP/py"
cat >"$TMP/py/dom.py" <<'PY'
from html.parser import HTMLParser

class Dom(HTMLParser):
    """Elements as (tag, attrs, text); text is what the element holds."""
    VOID = {"meta", "br", "input", "img", "link", "hr"}
    def __init__(self, path):
        super().__init__()
        self.els, self.stack = [], []
        self.feed(open(path).read())
    def handle_starttag(self, tag, attrs):
        e = (tag, dict(attrs), [])
        self.els.append(e)
        if tag not in self.VOID:
            self.stack.append(e)
    def handle_startendtag(self, tag, attrs):
        self.els.append((tag, dict(attrs), []))
    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break
    def handle_data(self, data):
        for e in self.stack:
            e[2].append(data)
    def find(self, tag=None, cls=None, **attrs):
        out = []
        for t, a, txt in self.els:
            if tag and t != tag:
                continue
            if cls and cls not in a.get("class", "").split():
                continue
            if all(a.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                out.append((t, a, "".join(txt).strip()))
        return out
    def one(self, *args, **kw):
        f = self.find(*args, **kw)
        assert len(f) == 1, (args, kw, f)
        return f[0]
PY
export PYTHONPATH="$TMP/py"

make_images "$TMP/data" 3 8
write_train_spec "$TMP/spec.json" 400 ', "name": "dash-train"'
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --heartbeat-ms 200 --worker-timeout-ms 1500
for w in W1 W2; do
    start_daemon $w "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done
# 24 images x 400 epochs at 40 samples/s: running for minutes, long after the test.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --max-rate 40 >/dev/null 2>"$TMP/run.err" &
PIDS+=("$!")

# Wait until the job's line is 6 s long, and learn its id.
job=""
for _ in $(seq 1 150); do
    job=$(status | py -c '
import json, sys
j = json.load(sys.stdin)["jobs"]
h = (j[0].get("history") or {}).get("points", []) if j else []
print(j[0]["id"] if len(h) >= 2 and h[-1][0] - h[0][0] >= 6 else "")' || true)
    [ -n "$job" ] && break
    sleep 0.2
done
[ -n "$job" ] || fail "the job did not run for 6 s: $(cat "$TMP/run.err")"

# ---- the page itself: self-contained
curl -sf --max-time 5 "http://$D_HTTP/" >"$TMP/page.html" || fail "GET /"
grep -qi '<!doctype html>' "$TMP/page.html" || fail "not an HTML page"
# The SVG namespace is a name, not a resource: left out of the search.
if sed 's#http://www\.w3\.org/2000/svg##g' "$TMP/page.html" |
    grep -Eio '(src|href)="[^"]*"|url\([^)]*\)|https?://|@import' |
    grep -Ev '^href="/(status|metrics)"$' >"$TMP/external.txt"; then
    fail "the page references outside resources: $(cat "$TMP/external.txt")"
fi
ok "GET / is one self-contained HTML page"

# ---- the DOM of a page opened mid-job
opened=$(status | py -c 'import json, sys; print(json.load(sys.stdin)["uptime_sec"])')
chrome "http://$D_HTTP/" --dump-dom >"$TMP/dom.html" || fail "chromium --dump-dom failed"
py - "$TMP/dom.html" "$W1_GRPC" "$W2_GRPC" "$job" "$opened" <<'PY' || fail "dashboard DOM"
import re, sys
from dom import Dom
d = Dom(sys.argv[1])
workers, job, opened = sys.argv[2:4], sys.argv[4], float(sys.argv[5])
assert d.one("body")[1].get("data-state") == "ok", "page did not load /status"
assert sorted(a["data-address"] for _, a, _ in d.find("tr", "worker")) == sorted(workers)
assert [a["data-job"] for _, a, _ in d.find("tr", "job")] == [job]
assert [a["data-job"] for _, a, _ in d.find("tr", "plan")] == [job]
assert d.one(id="c-workers")[2] == "2" and d.one(id="c-jobs")[2] == "1"
assert "live" in d.one(id="conn")[2]
# Named by the spec's "name", not by its file.
assert d.one("div", "name")[2] == "dash-train", d.find("div", "name")
# Elapsed and ETA: durations ("12s", "1m 3s"), the ETA known at a steady pace.
duration = re.compile(r"^(\d+d )?(\d+h )?(\d+m )?\d+[smh]$")
elapsed, eta = d.one("td", "elapsed")[2], d.one("td", "eta")[2]
assert duration.match(elapsed) and duration.match(eta), (elapsed, eta)
# The job's line from the dispatcher: points from before the page opened
# (the job had run >= 6 s), measured and predicted both drawn.
m = d.one("polyline", "measured", data_job=job)[1]
assert int(m["data-n"]) >= 4 and float(m["data-t0"]) < opened - 5, (m, opened)
p = d.find(None, "predicted", data_job=job)
assert p and p[0][0] in ("polyline", "circle"), "no predicted line: %s" % p
assert d.find("polyline", "total"), "no totals line"
legend = d.one(id="legend")[2]
assert "dash-train: measured" in legend, legend
for want in ("decode_jpeg", "imagefolder:train"):
    assert want in open(sys.argv[1]).read(), want
PY
ok "DOM: job $job named dash-train, its line from before the page opened (measured and" \
    "predicted), elapsed and ETA, workers, plan, cards"

# ---- a worker killed: lost, and its live values shown as unknown
kill -9 "$W2_PID"
lost=0
for _ in $(seq 1 100); do
    if status | py -c '
import json, sys
w = [w for w in json.load(sys.stdin)["workers"] if w["address"] == sys.argv[1]]
sys.exit(0 if w and w[0]["state"] == "lost" and w[0]["load"] == 0 else 1)' "$W2_GRPC"; then
        lost=1
        break
    fi
    sleep 0.1
done
[ $lost -eq 1 ] || fail "W2 not lost with load 0 in /status: $(status)"
chrome "http://$D_HTTP/" --dump-dom >"$TMP/dom2.html" || fail "chromium --dump-dom failed"
py - "$TMP/dom2.html" "$W2_GRPC" <<'PY' || fail "lost worker in the DOM"
import sys
from dom import Dom
d = Dom(sys.argv[1])
assert d.one("body")[1].get("data-state") == "ok"
row = [e for e in d.find("tr", "worker") if e[1]["data-address"] == sys.argv[2]]
assert row and "lost" in row[0][2], row
# The cells of that row: every td after the row's start, up to the next row.
i = d.els.index(next(e for e in d.els if e[0] == "tr" and e[1].get("data-address") == sys.argv[2]))
cells = {}
for t, a, txt in d.els[i + 1:]:
    if t == "tr":
        break
    for c in ("load", "rate", "buffered"):
        if t == "td" and c in a.get("class", "").split():
            cells[c] = "".join(txt).strip()
assert cells == {"load": "\u2014", "rate": "\u2014", "buffered": "\u2014"}, cells
PY
ok "a lost worker's load, rate and buffered bytes read as unknown (—)"

# ---- the y-axis against a wild prediction and a measured spike: a recorded
# /status of this job with both injected, served with the page by a static
# server (the dispatcher cannot be made to predict wildly on demand).
mkdir -p "$TMP/www"
cp "$TMP/page.html" "$TMP/www/index.html"
status | py -c '
import json, sys
s = json.load(sys.stdin)
pts = s["jobs"][0]["history"]["points"]
assert len(pts) >= 8, pts
meas = sorted(p[1] for p in pts if p[1] is not None)
med = meas[len(meas) // 2]
pts[len(pts) // 2][2] = 1000 * med      # one wild prediction
pts[len(pts) // 3][1] = 50 * med        # one measured spike
json.dump(s, open(sys.argv[1], "w"))
print(med)' "$TMP/www/status" >"$TMP/median" || fail "recording /status"
(cd "$TMP/www" && exec /usr/bin/python3 -u -m http.server --bind 127.0.0.1 0) \
    >"$TMP/www.out" 2>&1 &
PIDS+=("$!")
www=""
for _ in $(seq 1 100); do
    www=$(sed -nE 's/.*port ([0-9]+).*/\1/p' "$TMP/www.out" | head -n 1)
    [ -n "$www" ] && break
    sleep 0.05
done
[ -n "$www" ] || fail "static server did not start: $(cat "$TMP/www.out")"
chrome "http://127.0.0.1:$www/" --dump-dom >"$TMP/dom3.html" || fail "chromium --dump-dom failed"
py - "$TMP/dom3.html" "$job" "$(cat "$TMP/median")" <<'PY' || fail "y-axis"
import sys
from dom import Dom
d = Dom(sys.argv[1])
job, med = sys.argv[2], float(sys.argv[3])
assert d.one("body")[1].get("data-state") == "ok"
ymax = float(d.one("svg", id="chart")[1]["data-ymax"])
# The scale follows the measured rate (its 95th percentile, at most a sane
# prediction above it: within 6x), not the 1000x prediction or the 50x spike.
assert med <= ymax <= 6 * med, (ymax, med)
m = d.one("polyline", "measured", data_job=job)[1]
p = d.one("polyline", "predicted", data_job=job)[1]
assert int(m["data-clipped"]) >= 1 and int(p["data-clipped"]) >= 1, (m, p)
assert len(d.find("path", "clip", data_job=job)) >= 2, "clipped points not marked"
# The measured line is not flat at the bottom: its median point sits above
# the lowest 15 % of the plot (240 px high, 12 px margin on top, 24 below).
ys = sorted(float(xy.split(",")[1]) for xy in m["points"].split())
mid = ys[len(ys) // 2]
assert mid < 12 + 0.85 * (240 - 12 - 24), ("measured line squashed at the bottom", mid)
PY
ok "y-axis: a 1000x prediction and a 50x measured spike are clipped and marked, not the scale"

# ---- a screenshot: a real rendering, not a blank page
chrome "http://$D_HTTP/" --window-size=1280,1000 --screenshot="$TMP/dash.png" >/dev/null ||
    fail "chromium --screenshot failed"
py - "$TMP/dash.png" <<'PY' || fail "screenshot"
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
