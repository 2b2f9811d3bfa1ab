#!/usr/bin/env bash
# WebP decode against PIL as the oracle: files PIL itself writes (lossless,
# lossy at several qualities, with and without alpha, odd and tiny sizes)
# decoded by build/tools/png_decode (sl_image_decode, the front door every
# decode_image stage uses) must equal PIL's Image.open(f).convert("RGB")
# byte for byte; broken files fail with a message, never a crash. Then an
# imagefolder of WebP files: decode_image delivers every sample,
# decode_jpeg counts them as not_jpeg skips.
source "$(dirname "$0")/lib.sh"
TOOL="$ROOT/$BUILD/tools/png_decode"
[ -x "$TOOL" ] || fail "$TOOL not built"
/usr/bin/python3 -c 'from PIL import features; assert features.check("webp")' ||
    fail "PIL with WebP support is needed under /usr/bin/python3"

/usr/bin/python3 - "$TOOL" "$TMP" <<'PY' || fail "PIL comparison failed"
import os, random, subprocess, sys
import numpy as np
from PIL import Image

tool, tmp = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20261203)
n = 0
for w, h in ((1, 1), (2, 3), (17, 5), (64, 48), (333, 221)):
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([(xx * 255 // max(w - 1, 1)), (yy * 255 // max(h - 1, 1)),
                     ((xx + yy) * 7) % 256], -1).astype(np.int32)
    noise = rng.integers(-20, 21, size=base.shape)
    rgb = np.clip(base + noise, 0, 255).astype(np.uint8)
    alpha = rng.integers(0, 256, size=(h, w, 1), dtype=np.uint8)
    for mode in ("RGB", "RGBA"):
        im = Image.fromarray(rgb if mode == "RGB" else np.concatenate([rgb, alpha], -1), mode)
        for opts in ({"lossless": True}, {"quality": 50}, {"quality": 95}):
            path = os.path.join(tmp, f"im{n}.webp")
            im.save(path, "WEBP", **opts)
            n += 1
            out = path + ".raw"
            r = subprocess.run([tool, path, out], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{path} ({w}x{h} {mode} {opts}): {r.stderr.strip()}")
            ow, oh, fmt = r.stdout.split()
            ref = Image.open(path).convert("RGB")
            if (int(ow), int(oh), fmt) != (ref.width, ref.height, "webp"):
                sys.exit(f"{path}: got {ow}x{oh} {fmt}, PIL {ref.width}x{ref.height}")
            if open(out, "rb").read() != ref.tobytes():
                sys.exit(f"{path} ({w}x{h} {mode} {opts}): pixels differ from PIL")
# Broken files: a message and exit status 1, never a crash.
good = open(os.path.join(tmp, "im10.webp"), "rb").read()
broken = {"truncated": good[: len(good) // 2], "header": good[:10],
          "garbled": good[:30] + bytes(random.Random(1).randrange(256) for _ in range(200))}
for name, data in broken.items():
    path = os.path.join(tmp, f"broken-{name}.webp")
    open(path, "wb").write(data)
    r = subprocess.run([tool, path, path + ".raw"], capture_output=True, text=True)
    if r.returncode != 1 or "code" not in r.stderr:
        sys.exit(f"broken {name}: exit {r.returncode}, stderr {r.stderr!r}")
print(f"{n} WebP files equal to PIL's; {len(broken)} broken ones refused")
PY

# An imagefolder of WebP photos.
make_images "$TMP/data" 2 5
/usr/bin/python3 - "$TMP/data/train" <<'PY'
import glob, os, sys
from PIL import Image
for i, f in enumerate(sorted(glob.glob(os.path.join(sys.argv[1], "*", "*.jpg")))):
    Image.open(f).save(f[:-4] + ".webp", "WEBP", **({"lossless": True} if i % 2 else {"quality": 85}))
    os.unlink(f)
PY
for dec in decode_image decode_jpeg; do
    cat >"$TMP/$dec.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "seed": 3},
 "stages": [{"op": "$dec"}, {"op": "random_resized_crop", "size": 48}, {"op": "rand_augment"}],
 "batch_size": 4}
JSON
    "$BIN/sluice" run "$TMP/$dec.json" --local --data-root "$TMP/data" --quiet --json \
        >"$TMP/$dec.out" || fail "$dec: the run failed"
done
/usr/bin/python3 - "$TMP" <<'PY' || fail "imagefolder of WebP files"
import json, sys
img = json.load(open(sys.argv[1] + "/decode_image.out"))
jpg = json.load(open(sys.argv[1] + "/decode_jpeg.out"))
assert img["samples"] == 10 and img["skipped"]["total"] == 0, img
assert jpg["samples"] == 0 and jpg["skipped"]["reasons"].get("not_jpeg") == 10, jpg
print("imagefolder: decode_image delivered 10 WebP samples; decode_jpeg skipped 10 as not_jpeg")
PY
echo "PASS: WebP decode equals PIL"
