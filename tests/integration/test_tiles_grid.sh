#!/usr/bin/env bash
# sl_tiles_grid against InternVL's own Python (dynamic_preprocess /
# find_closest_aspect_ratio from its chat models' load_image code, verbatim
# below but for the image operations): every (min, max) with
# 1 <= min <= max <= 64, random sizes from 1x4000 strips to 4000x1, tiles
# from 1 to 4096, and sizes aimed at exact ties (an aspect ratio halfway
# between two grids, the area either side of 0.5 * tile^2 * cols * rows), so
# that both the tie-break and the set-iteration order it depends on are
# exercised. Run by /usr/bin/python3 (CPython >= 3.8, whose set order the C
# code emulates).
source "$(dirname "$0")/lib.sh"
TOOL="$ROOT/$BUILD/tools/tiles_grid"
[ -x "$TOOL" ] || fail "$TOOL not built"

/usr/bin/python3 - "$TOOL" <<'PY' || fail "grid differs from InternVL's"
import random, subprocess, sys

# --- InternVL (internvl_chat load_image), image operations left out ---
def find_closest_aspect_ratio(aspect_ratio, target_ratios, width, height, image_size):
    best_ratio_diff = float('inf')
    best_ratio = (1, 1)
    area = width * height
    for ratio in target_ratios:
        target_aspect_ratio = ratio[0] / ratio[1]
        ratio_diff = abs(aspect_ratio - target_aspect_ratio)
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif ratio_diff == best_ratio_diff:
            if area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
                best_ratio = ratio
    return best_ratio

def target_ratios_of(min_num, max_num):
    target_ratios = set(
        (i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1) if
        i * j <= max_num and i * j >= min_num)
    target_ratios = sorted(target_ratios, key=lambda x: x[0] * x[1])
    return target_ratios

def dynamic_preprocess_grid(orig_width, orig_height, min_num, max_num, image_size, ratios):
    aspect_ratio = orig_width / orig_height
    return find_closest_aspect_ratio(aspect_ratio, ratios, orig_width, orig_height, image_size)
# ---

tool = sys.argv[1]
rng = random.Random(7)
TILES = [448, 336, 224, 14, 1, 4096, 512]
cache = {}
queries = []

def ratios(mn, mx):
    if (mn, mx) not in cache:
        cache[(mn, mx)] = target_ratios_of(mn, mx)
    return cache[(mn, mx)]

for mx in range(1, 65):
    for mn in range(1, mx + 1):
        rs = ratios(mn, mx)
        for _ in range(4):  # random sizes, from strips to squares
            kind = rng.random()
            if kind < 0.15:
                w, h = rng.choice([(1, 4000), (4000, 1), (1, 1), (2, 1), (1, 2)])
            elif kind < 0.6:
                w, h = rng.randint(1, 4000), rng.randint(1, 4000)
            else:
                w, h = rng.randint(64, 1024), rng.randint(64, 1024)
            queries.append((w, h, rng.choice(TILES), mn, mx))
        for _ in range(3):  # halfway between two grids of one product: a tie
            prods = sorted({a * b for a, b in rs})
            p = rng.choice(prods)
            same = [r for r in rs if r[0] * r[1] == p]
            a, b = (rng.sample(same, 2) if len(same) > 1 else (same[0], rng.choice(rs)))
            num, den = a[0] * b[1] + b[0] * a[1], 2 * a[1] * b[1]
            tile = rng.choice(TILES)
            # The area a little below, at or above 0.5 * tile^2 * p.
            for k in (1, rng.randint(1, 50), rng.randint(50, 400)):
                if num * k < 2**31 and den * k < 2**31:
                    queries.append((num * k, den * k, tile, mn, mx))

# Refused parameters: Python would not refuse all of them, the C API does.
bad = [(0, 5, 448, 1, 12), (5, 0, 448, 1, 12), (5, 5, 0, 1, 12), (5, 5, 4097, 1, 12),
       (5, 5, 448, 0, 12), (5, 5, 448, 7, 6), (5, 5, 448, 1, 65)]

inp = "".join("%d %d %d %d %d\n" % q for q in queries + bad)
r = subprocess.run([tool], input=inp, capture_output=True, text=True, check=True)
got = r.stdout.splitlines()
if len(got) != len(queries) + len(bad):
    sys.exit("%d answers for %d queries" % (len(got), len(queries) + len(bad)))

ties = order_mattered = 0
for q, line in zip(queries, got):
    w, h, tile, mn, mx = q
    rs = ratios(mn, mx)
    want = dynamic_preprocess_grid(w, h, mn, mx, tile, rs)
    if line != "%d %d" % want:
        sys.exit("w=%d h=%d tile=%d min=%d max=%d: C says %s, InternVL %r" % (q + (line, want)))
    diffs = [abs(w / h - a / b) for a, b in rs]
    if diffs.count(min(diffs)) > 1:
        ties += 1
    # Would a deterministic order within a product (by cols) have chosen
    # differently? Then the set order was what decided.
    if dynamic_preprocess_grid(w, h, mn, mx, tile, sorted(rs, key=lambda x: (x[0] * x[1], x[0]))) \
            != want:
        order_mattered += 1
for q, line in zip(bad, got[len(queries):]):
    if line != "error -22":
        sys.exit("%r: %s, want error -22" % (q, line))
print("ok: %d grids identical to InternVL's; %d with an exact tie for the best, "
      "%d decided by the set's iteration order" % (len(queries), ties, order_mattered))
if ties < 100 or order_mattered < 10:
    sys.exit("too few ties exercised")
PY
echo "ok: test_tiles_grid"
