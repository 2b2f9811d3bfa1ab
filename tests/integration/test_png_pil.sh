#!/usr/bin/env bash
# PNG decode against PIL as the oracle: a few dozen PNGs of every colour
# type, bit depth, interlace and tRNS (written by a small encoder below,
# independent of libpng, plus files PIL itself saves), decoded by
# build/tools/png_decode (sl_image_decode) and compared byte for byte with
# PIL's Image.open(f).convert("RGB").tobytes(). One documented exception:
# PIL opens 16-bit gray as mode "I", whose convert("RGB") clamps at 255;
# Sluice keeps the high byte there as for every other 16-bit type (png.h), so
# those files are compared with PIL's values >> 8. Broken files must fail
# with a message, never crash.
source "$(dirname "$0")/lib.sh"
TOOL="$ROOT/$BUILD/tools/png_decode"
[ -x "$TOOL" ] || fail "$TOOL not built"
/usr/bin/python3 -c 'import PIL' || fail "PIL is needed under /usr/bin/python3"

/usr/bin/python3 - "$TOOL" "$TMP" <<'PY' || fail "PIL comparison failed"
import io, os, random, struct, subprocess, sys, warnings, zlib
from PIL import Image

tool, tmp = sys.argv[1], sys.argv[2]
warnings.simplefilter("ignore")  # PIL on P + tRNS: "should be converted to RGBA"
rng = random.Random(20240611)
SIG = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]

def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

def pack(samples, depth):
    if depth == 16:
        return b"".join(struct.pack(">H", v) for v in samples)
    if depth == 8:
        return bytes(samples)
    out, acc, nbits = bytearray(), 0, 0
    for v in samples:
        acc = (acc << depth) | v
        nbits += depth
        if nbits == 8:
            out.append(acc)
            acc, nbits = 0, 0
    if nbits:
        out.append(acc << (8 - nbits))
    return bytes(out)

def encode(w, h, ct, depth, interlace, pix, plte=None, trns=None):
    raw = bytearray()
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    bpp = max(1, CHANNELS[ct] * depth // 8)
    for x0, y0, dx, dy in passes:
        xs, ys = range(x0, w, dx), range(y0, h, dy)
        if not xs or not ys:
            continue
        prev = None  # the unfiltered row above, in this pass
        for y in ys:
            row = pack([s for x in xs for s in pix[y][x]], depth)
            ftype = rng.choice([0, 1, 2])  # None, Sub, Up
            if ftype == 1:
                f = bytes((row[i] - (row[i - bpp] if i >= bpp else 0)) & 255
                          for i in range(len(row)))
            elif ftype == 2:
                up = prev or bytes(len(row))
                f = bytes((row[i] - up[i]) & 255 for i in range(len(row)))
            else:
                f = row
            raw += bytes([ftype]) + f
            prev = row
    out = SIG + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ct, 0, 0, interlace))
    if plte is not None:
        out += chunk(b"PLTE", bytes(c for rgb in plte for c in rgb))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    return out + chunk(b"IDAT", zlib.compress(bytes(raw), 6)) + chunk(b"IEND", b"")

files = []  # (name, bytes)

def add(name, data):
    files.append((name, data))

for ct, depths in [(0, [1, 2, 4, 8, 16]), (3, [1, 2, 4, 8]), (2, [8, 16]), (4, [8, 16]),
                   (6, [8, 16])]:
    for depth in depths:
        for interlace in (0, 1):
            for with_trns in ((False, True) if ct in (0, 2, 3) else (False,)):
                w, h = rng.randint(1, 40), rng.randint(1, 30)
                top = (1 << depth) - 1
                npal = min(top + 1, rng.randint(1, 256))
                def s():
                    return rng.choice([0, top, rng.randint(0, top)]) if ct != 3 \
                        else rng.randrange(npal)
                pix = [[tuple(s() for _ in range(CHANNELS[ct])) for _ in range(w)]
                       for _ in range(h)]
                plte = [(rng.randrange(256), rng.randrange(256), rng.randrange(256))
                        for _ in range(npal)] if ct == 3 else None
                trns = None
                if with_trns:
                    if ct == 3:
                        trns = bytes(rng.randrange(256) for _ in range(rng.randint(1, npal)))
                    else:
                        trns = b"".join(struct.pack(">H", v) for v in pix[0][0])
                add("gen_ct%d_d%d_i%d_t%d.png" % (ct, depth, interlace, with_trns),
                    encode(w, h, ct, depth, interlace, pix, plte, trns))

# Files PIL writes itself (zlib levels, filters and chunk layout of its own).
for mode in ("1", "L", "LA", "P", "RGB", "RGBA", "I"):  # PIL saves "I" as 16-bit gray
    im = Image.new(mode, (23, 17))
    im.putdata([rng.randrange(65536 if mode == "I" else 256) for _ in range(23 * 17)]
               if mode in ("1", "L", "P", "I") else
               [tuple(rng.randrange(256) for _ in range(len(mode))) for _ in range(23 * 17)])
    if mode == "P":
        # A full palette: indices past the end of a palette give black in
        # libpng and whatever PIL's palette holds there (not compared).
        im.putpalette([rng.randrange(256) for _ in range(768)])
    b = io.BytesIO()
    kw = {"transparency": 3} if mode == "P" else {}
    im.save(b, "PNG", **kw)
    add("pil_%s.png" % mode, b.getvalue())
    b = io.BytesIO()
    im.save(b, "PNG", optimize=True, **kw)
    add("pil_%s_opt.png" % mode, b.getvalue())

ok = 0
for name, data in files:
    path = os.path.join(tmp, name)
    open(path, "wb").write(data)
    im = Image.open(path)
    im.load()
    if im.mode in ("I", "I;16", "I;16B"):
        want = bytes(v >> 8 for v in im.getdata() for _ in range(3))
    else:
        want = im.convert("RGB").tobytes()
    r = subprocess.run([tool, path, path + ".rgb"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s: png_decode failed: %s" % (name, r.stderr.strip()))
    if r.stdout.split() != [str(im.width), str(im.height), "png"]:
        sys.exit("%s: size %r, PIL %dx%d" % (name, r.stdout, im.width, im.height))
    got = open(path + ".rgb", "rb").read()
    if got != want:
        i = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
            if len(got) == len(want) else -1
        sys.exit("%s (PIL mode %s): differs from PIL at byte %d (len %d vs %d)"
                 % (name, im.mode, i, len(got), len(want)))
    ok += 1
print("ok: %d PNGs identical to PIL" % ok)
if ok < 48:
    sys.exit("only %d files" % ok)

# Broken files: a failure with a message, never a crash or a success.
good = files[0][1]
broken = {
    "empty.png": b"",
    "text.png": b"hello, not an image\n",
    "cut_sig.png": good[:5],
    "cut_ihdr.png": good[:20],
    "cut_idat.png": good[:len(good) - 20],
    "crc.png": good[:-13] + bytes([good[-13] ^ 1]) + good[-12:],
}
for name, data in broken.items():
    path = os.path.join(tmp, name)
    open(path, "wb").write(data)
    r = subprocess.run([tool, path, path + ".rgb"], capture_output=True, text=True)
    if r.returncode != 1 or "code -" not in r.stderr:
        sys.exit("%s: rc %d stderr %r" % (name, r.returncode, r.stderr))
    print("ok: %s refused: %s" % (name, r.stderr.strip()))
PY
echo "ok: test_png_pil"
