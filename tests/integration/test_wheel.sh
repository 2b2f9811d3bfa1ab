#!/usr/bin/env bash
# The self-contained wheel (make wheel, scripts/make-wheel), on this host: its
# RECORD holds every file with the right sha256; installed with pip into a
# plain venv (--system-site-packages: numpy is Debian's), every ELF in it
# (libsluice, sluice-plugin-host, sluice.libs/*) has an $ORIGIN RPATH and
# resolves each NEEDED inside the wheel or to a base library (glibc,
# libgcc_s, libstdc++), never to another system library; without SLUICE_LIB
# and outside the source tree, `import sluice` loads the wheel's library,
# sluice.version is SL_VERSION, and a local job through a plugin (the wheel's
# plugin host) gives the digests of `sluice run`; `pip install ./client/python`
# in an unbuilt tree fails saying to run make. The bare-chroot test of the
# same wheel is scripts/test-wheel (make test-wheel).
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

case "$BUILD" in
*asan*)
    # A wheel of the sanitized library would bundle the ASan runtime.
    echo "ok: skipped under ASan (the wheel is made from the release build)"
    exit 0
    ;;
esac
command -v patchelf >/dev/null || fail "patchelf missing (scripts/install-deps.sh)"
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || fail "python3-venv missing"

BUILD="$BUILD" "$ROOT/scripts/make-wheel" --out "$TMP/whl" >"$TMP/make-wheel.out" ||
    fail "make-wheel"
cat "$TMP/make-wheel.out"
WHL=$(ls "$TMP"/whl/sluice-*.whl)
VERSION=$(sed -nE 's/^#define SL_VERSION "([^"]+)"/\1/p' "$ROOT/common/base/version.h")
GLIBC=$(getconf GNU_LIBC_VERSION | sed -E 's/glibc ([0-9]+)\.([0-9]+).*/\1_\2/')
[ "$(basename "$WHL")" = "sluice-$VERSION-py3-none-manylinux_${GLIBC}_$(uname -m).whl" ] ||
    fail "wheel name $(basename "$WHL")"

# ---- RECORD: every entry listed once with its sha256 and size, nothing else
/usr/bin/python3 - "$WHL" <<'PY' || fail "RECORD"
import base64, csv, hashlib, io, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
record = [n for n in names if n.endswith(".dist-info/RECORD")]
assert len(record) == 1, record
rows = list(csv.reader(io.StringIO(z.read(record[0]).decode())))
assert sorted(r[0] for r in rows) == sorted(names), "RECORD does not list every file once"
for path, digest, size in rows:
    if path == record[0]:
        assert digest == size == "", (path, digest, size)
        continue
    data = z.read(path)
    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert digest == "sha256=" + want and int(size) == len(data), path
wheel = z.read(record[0].replace("RECORD", "WHEEL")).decode()
assert "Root-Is-Purelib: false" in wheel, wheel
assert any(n.startswith("sluice.libs/libgrpc-") for n in names), "libgrpc not bundled"
assert z.getinfo("sluice/bin/sluice-plugin-host").external_attr >> 16 & 0o111, "host not +x"
PY
ok "RECORD lists every file with its sha256 and size"

# ---- a plain venv, pip from the file alone (no index)
/usr/bin/python3 -m venv --system-site-packages "$TMP/venv" || fail "venv"
"$TMP/venv/bin/pip" install --quiet --no-index "$WHL" >"$TMP/pip.out" 2>&1 ||
    { cat "$TMP/pip.out"; fail "pip install the wheel"; }
# pip install ./client/python builds this same wheel in a built tree; in an
# unbuilt one (BUILD names no build here) it fails saying what to run.
if BUILD=no-such-build "$TMP/venv/bin/pip" install --no-index "$ROOT/client/python" \
    >"$TMP/pip-src.out" 2>&1; then
    fail "pip install ./client/python succeeded without a built library"
fi
grep -q 'run `make` first, or `make wheel`' "$TMP/pip-src.out" ||
    { cat "$TMP/pip-src.out"; fail "pip install ./client/python: no clear message"; }
ok "pip install ./client/python in an unbuilt tree: $(grep -o 'sluice: .* is not built' \
    "$TMP/pip-src.out" | head -n 1), run make / make wheel"
SITE=$("$TMP/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
[ -x "$SITE/sluice/bin/sluice-plugin-host" ] || fail "the plugin host is not installed executable"

# ---- every ELF resolves inside the wheel or to a base library: readelf for
# each file's NEEDED and RPATH; ldd (the whole transitive closure) for the two
# that Python and the library start from
BASE='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|librt\.so\.1|'
BASE+='libpthread\.so\.0|libresolv\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6)$'
n=0
while IFS= read -r -d '' f; do
    head -c 4 "$f" | grep -q 'ELF' || continue
    n=$((n + 1))
    readelf -d "$f" >"$TMP/dyn.out" || fail "readelf $f"
    rpath=$(sed -nE 's/.*\((RPATH|RUNPATH)\).*\[(.*)\]/\2/p' "$TMP/dyn.out")
    case "$rpath" in
    '$ORIGIN' | '$ORIGIN/../sluice.libs' | '$ORIGIN/../../sluice.libs') ;;
    *) fail "$f: RPATH '$rpath'" ;;
    esac
    for lib in $(sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' "$TMP/dyn.out"); do
        [[ "$lib" =~ $BASE ]] || [ -e "$SITE/sluice.libs/$lib" ] ||
            fail "$f needs $lib: neither bundled nor a base library"
    done
done < <(find "$SITE/sluice" "$SITE/sluice.libs" -type f -print0)
[ "$n" -gt 40 ] || fail "only $n ELF files in the installed wheel"
for f in "$SITE/sluice/libsluice.so" "$SITE/sluice/bin/sluice-plugin-host"; do
    env -u LD_LIBRARY_PATH ldd "$f" >"$TMP/ldd.out" 2>&1 || fail "ldd $f: $(cat "$TMP/ldd.out")"
    ! grep -q 'not found' "$TMP/ldd.out" || fail "$f: $(grep 'not found' "$TMP/ldd.out")"
    while read -r soname _ path _; do
        case "$(realpath -m "$path")" in
        "$SITE"/sluice.libs/*) ;;
        *) [[ "$soname" =~ $BASE ]] || fail "$f: $soname resolves outside the wheel ($path)" ;;
        esac
    done < <(grep '=>' "$TMP/ldd.out")
done
ok "$n ELF files: \$ORIGIN RPATHs, every NEEDED bundled or a base library (readelf);" \
    "libsluice and the plugin host load nothing else from the system (ldd)"

# ---- import and a local job through a plugin, with nothing pointing at the tree
make_images "$TMP/data" 2 6
mkdir -p "$TMP/plugins"
# ycbcr needs nothing but libc: built here as a user would build theirs.
cc -O2 -shared -fPIC -I"$ROOT/common/plugin" -o "$TMP/plugins/ycbcr.so" \
    "$ROOT/examples/plugins/ycbcr.c" || fail "build the ycbcr plugin"
YCC=$(sha256sum "$TMP/plugins/ycbcr.so" | cut -d' ' -f1)
cat >"$TMP/spec.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 3},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 48},
            {"op": "plugin", "name": "rgb_to_ycbcr", "sha256": "$YCC"},
            {"op": "flip", "p": 0.5}, {"op": "to_chw"}],
 "batch_size": 4, "epochs": 2}
JSON
"$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --local --quiet \
    --plugin-dir "$TMP/plugins" --digests "$TMP/ref.raw" || fail "sluice run"
LC_ALL=C sort "$TMP/ref.raw" >"$TMP/ref.txt"
out=$(cd "$TMP" && env -u SLUICE_LIB -u PYTHONPATH -u SLUICE_PLUGIN_HOST -u LD_LIBRARY_PATH \
    "$TMP/venv/bin/python" "$ROOT/tests/integration/wheel_job.py" - "$TMP/spec.json" \
    "$TMP/data" "$TMP/py.txt" "$TMP/plugins") || fail "the job through the wheel"
echo "$out"
grep -q "^sluice $VERSION from $SITE/sluice/libsluice.so$" <<<"$out" || fail "version/library"
cmp -s "$TMP/ref.txt" "$TMP/py.txt" || fail "the wheel's digests differ from sluice run"
ok "import sluice outside the tree: version $VERSION, the wheel's library and plugin host;" \
    "$(wc -l <"$TMP/py.txt") samples through a plugin equal sluice run --digests; import ssl works"
echo PASS
