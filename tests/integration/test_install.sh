#!/usr/bin/env bash
# make install / uninstall: the files land under PREFIX (and DESTDIR), the
# installed units pass `systemd-analyze verify` with no output at all, the
# installed config files are the ones the daemons accept, a C program builds
# against sluice.pc (shared and static) and runs a job, the installed Python
# package finds the installed library on its own, a reinstall keeps an
# edited config, and uninstall leaves nothing behind but that edited config.
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

SANITIZE=0
case "$BUILD" in *asan*) SANITIZE=1 ;; esac
mk() {
    make -C "$ROOT" --no-print-directory -s BUILD="$BUILD" SANITIZE=$SANITIZE "$@" \
        >>"$TMP/make.log" 2>&1
}
# ---- every config key (from --help, i.e. the table) is in the shipped conf
# file exactly once, commented with the table's default -- or, for the keys
# shipped on purpose (the journal, so a restarted unit keeps its jobs), an
# active line with the shipped value -- and in the configuration reference
# (docs/reference/config.md, which the README links to)
state_dir=$(sed -n 's/^StateDirectory=//p' "$ROOT/systemd/sluice-dispatcher.service")
[ -n "$state_dir" ] || fail "sluice-dispatcher.service has no StateDirectory="
for d in dispatcher worker; do
    "$BIN/sluice-$d" --help >"$TMP/$d.help" || fail "sluice-$d --help"
    /usr/bin/python3 - "$TMP/$d.help" "$ROOT/conf/$d.conf" "$ROOT/docs/reference/config.md" "$d" \
        "/var/lib/$state_dir" <<'PY' ||
import re, sys
helptext, conf, refdoc, name, state_dir = sys.argv[1:6]
# Keys the shipped file sets on purpose, and to what.
shipped = {"dispatcher": {"journal": state_dir}}.get(name, {})
conf_lines = open(conf).read().splitlines()
doc = open(refdoc).read()
# The reference's key tables: from its title to its first "## " section (Security).
ref = doc.split("# Configuration reference\n", 1)[-1].split("\n## ", 1)[0]
assert ref != doc, "%s has no '# Configuration reference' title" % refdoc
keys = []
for line in open(helptext):
    m = re.match(r"\s+--([a-z0-9-]+) (TEXT|N|LEVEL|X|BOOL)\s.*?"
                 r"(?:default '([^']*)')?\)?( \[SIGHUP\])?$", line.rstrip())
    if not m:
        continue
    key, default = m.group(1).replace("-", "_"), m.group(3) or ""
    keys.append(key)
    pat = re.compile(r"^(#?)\s*%s\s*=\s*(.*)$" % re.escape(key))
    found = [pat.match(l).groups() for l in conf_lines if pat.match(l)]
    assert len(found) == 1, "%s: key %s is in %s %d times" % (name, key, conf, len(found))
    commented, value = found[0][0] == "#", found[0][1].strip()
    if key in shipped:
        assert not commented and value == shipped[key], \
            "%s: %s should be set to %r, found %r" % (name, key, shipped[key], found[0])
    else:
        assert commented, "%s: %s is set in the shipped conf" % (name, key)
        assert value == default, "%s: %s = %r in the conf, default %r" % (name, key, value,
                                                                          default)
    assert "`%s`" % key in ref, "%s: key %s is not in %s" % (name, key, refdoc)
assert len(keys) >= 8, "parsed only %d keys from --help" % len(keys)
active = [l for l in conf_lines if l.strip() and not l.lstrip().startswith("#")]
assert len(active) == len(shipped), "%s: active lines %r" % (name, active)
PY
        fail "sluice-$d: conf file / docs/reference/config.md out of step with the config table"
done
ok "every config key is in conf/*.conf once, with its default (journal: /var/lib/$state_dir)," \
    "and in docs/reference/config.md"

P="$TMP/usr"
E="$TMP/etc"
mk install PREFIX="$P" SYSCONFDIR="$E" || fail "make install: $(tail -n 20 "$TMP/make.log")"

for f in bin/sluice bin/sluice-dispatcher bin/sluice-worker; do
    [ -x "$P/$f" ] || fail "$f not installed"
done
for f in lib/libsluice.so.0.1.0 lib/libsluice.a include/sluice.h lib/pkgconfig/sluice.pc \
    lib/systemd/system/sluice-dispatcher.service lib/systemd/system/sluice-worker.service \
    lib/systemd/system/sluice-worker@.service share/doc/sluice/README.md \
    share/doc/sluice/docs/architecture.md share/doc/sluice/docs/reference/config.md \
    share/sluice/examples/imagenet-train.json lib/python3.*/dist-packages/sluice/__init__.py \
    lib/python3.*/dist-packages/sluice/torch.py; do
    [ -n "$(compgen -G "$P/$f")" ] || fail "$f not installed"
done
[ "$(readlink "$P/lib/libsluice.so")" = libsluice.so.0.1.0 ] || fail "libsluice.so link"
[ "$(readlink "$P/lib/libsluice.so.0")" = libsluice.so.0.1.0 ] || fail "libsluice.so.0 link"
readelf -d "$P/lib/libsluice.so.0.1.0" | grep -q 'SONAME.*libsluice.so.0' || fail "no soname"
# Only the public API is exported.
if nm -D --defined-only "$P/lib/libsluice.so.0.1.0" | awk '$2 == "T" {print $3}' |
    grep -v '^sluice_[a-z_]*@@SLUICE_0$' >"$TMP/extra.txt"; then
    fail "libsluice.so exports more than sluice_*: $(head -n 5 "$TMP/extra.txt")"
fi
cmp -s "$ROOT/conf/dispatcher.conf" "$E/sluice/dispatcher.conf" || fail "dispatcher.conf"
cmp -s "$ROOT/conf/worker.conf" "$E/sluice/worker.conf" || fail "worker.conf"
"$P/bin/sluice" --version | grep -q "^sluice " || fail "installed sluice --version"
ok "make install PREFIX=...: binaries, library (soname, sluice_* only), header, pc, units, confs"

# ---- manual pages: installed, render without a warning, list every flag of
# the tables the programs parse with (the daemons' from --help, i.e. their
# config tables; sluice's from the option tables in client/cli/*.c)
M="$P/share/man/man1"
for p in sluice sluice-dispatcher sluice-worker; do
    [ -f "$M/$p.1" ] || fail "$p.1 not installed in $M"
done
grep -q "$P/share/doc/sluice/README.md" "$M/sluice-worker.1" ||
    fail "sluice-worker.1 does not name the installed README"
if command -v groff >/dev/null; then
    for p in sluice sluice-dispatcher sluice-worker; do
        groff -man -Tutf8 -ww -z "$M/$p.1" >"$TMP/groff.txt" 2>&1 || fail "groff $p.1: exit $?"
        [ ! -s "$TMP/groff.txt" ] || fail "$p.1 renders with warnings: $(head "$TMP/groff.txt")"
        groff -man -Tascii -P-cbou -rLL=200n "$M/$p.1" >"$TMP/$p.txt" 2>/dev/null
    done
    for d in dispatcher worker; do
        flags=$(sed -nE 's/^  (--[a-z0-9-]+).*/\1/p' "$TMP/$d.help")
        [ "$(wc -w <<<"$flags")" -ge 10 ] || fail "sluice-$d --help: only $flags"
        for f in $flags; do
            grep -qE -- "(^|[^a-z-])$f( |$)" "$TMP/sluice-$d.txt" ||
                fail "sluice-$d.1 does not list $f"
        done
    done
    flags=$(sed -nE 's/.*\{"([a-z0-9-]+)", (no|required|optional)_argument.*/\1/p' \
        "$ROOT"/client/cli/*.c | grep -vx help | sort -u)
    [ "$(wc -w <<<"$flags")" -ge 20 ] || fail "found only these sluice flags: $flags"
    for f in $flags; do
        grep -qE -- "(^|[^a-z-])--$f( |$)" "$TMP/sluice.txt" || fail "sluice.1 does not list --$f"
    done
    for c in run plan bench status; do
        grep -q "^   sluice $c$" "$TMP/sluice.txt" || fail "sluice.1 has no section for $c"
    done
    ok "man pages: installed, groff -ww clean, every flag of every option table listed"
else
    echo "SKIP: groff not installed (Debian package groff-base): man pages not rendered"
fi

# ---- the units: paths rewritten, systemd-analyze verify says nothing at all
U="$P/lib/systemd/system"
grep -q "^ExecStart=$P/bin/sluice-dispatcher --config $E/sluice/dispatcher.conf$" \
    "$U/sluice-dispatcher.service" || fail "dispatcher ExecStart: $(grep ExecStart "$U"/*)"
grep -q "^ExecStart=$P/bin/sluice-worker --config $E/sluice/worker-%i.conf$" \
    "$U/sluice-worker@.service" || fail "worker@ ExecStart"
for u in sluice-dispatcher.service sluice-worker.service sluice-worker@.service; do
    grep -q '^Type=notify$' "$U/$u" || fail "$u: not Type=notify"
    for k in DynamicUser=yes NoNewPrivileges=yes ProtectSystem=strict Restart=on-failure; do
        grep -q "^$k$" "$U/$u" || fail "$u lacks $k"
    done
done
grep -q '^ReadOnlyPaths=' "$U/sluice-worker.service" || fail "worker unit lacks ReadOnlyPaths"
# cache_dir's default ($XDG_CACHE_HOME/sluice) is a directory the dynamic user owns
for u in sluice-worker.service sluice-worker@.service; do
    cd_=$(sed -n 's/^CacheDirectory=//p' "$U/$u")
    xdg=$(sed -n 's/^Environment=XDG_CACHE_HOME=//p' "$U/$u")
    [ -n "$cd_" ] && [[ "$xdg/sluice" == "/var/cache/$cd_" || "$xdg/sluice" == "/var/cache/$cd_/"* ]] ||
        fail "$u: cache_dir's default is not its CacheDirectory ($cd_, $xdg)"
done
if command -v systemd-analyze >/dev/null; then
    cp "$U/sluice-worker@.service" "$TMP/sluice-worker@test.service"
    (cd "$U" && systemd-analyze verify sluice-dispatcher.service sluice-worker.service \
        "$TMP/sluice-worker@test.service") >"$TMP/verify.txt" 2>&1 ||
        fail "systemd-analyze verify: $(cat "$TMP/verify.txt")"
    [ ! -s "$TMP/verify.txt" ] ||
        fail "systemd-analyze verify is not clean: $(cat "$TMP/verify.txt")"
    ok "systemd-analyze verify: clean for all three units"
else
    echo "SKIP: systemd-analyze not installed (Debian package systemd): units not verified"
fi

# ---- the installed configs are accepted (the worker's needs its two required keys)
# The shipped journal directory is the unit's state directory: here it is
# overridden by a flag (the test must not write /var/lib).
start_daemon D "$P/bin/sluice-dispatcher" --config "$E/sluice/dispatcher.conf" \
    --listen 127.0.0.1:0 --http 127.0.0.1:0 --journal "$TMP/journal"
mkdir -p "$TMP/data"
make_images "$TMP/data" 2 4
# Without --http the worker's status endpoint is on the fixed default port
# (Prometheus scrapes every worker at HOST:7501) -- when the port is free.
whttp=()
if ! /usr/bin/python3 -c 'import socket; socket.socket().bind(("127.0.0.1", 7501))' 2>/dev/null
then
    echo "SKIP: 127.0.0.1:7501 is in use here: the worker's default http port not tried"
    whttp=(--http 127.0.0.1:0)
fi
start_daemon W "$P/bin/sluice-worker" --config "$E/sluice/worker.conf" --dispatcher "$D_GRPC" \
    --data-root "$TMP/data" --listen 127.0.0.1:0 "${whttp[@]}"
if [ ${#whttp[@]} = 0 ]; then
    [ "$W_HTTP" = 127.0.0.1:7501 ] || fail "worker http default: listening on '$W_HTTP'"
    http_grep '^sluice_worker_registered ' http://127.0.0.1:7501/metrics ||
        fail "no worker /metrics on 127.0.0.1:7501"
    ok "the worker serves /metrics on 127.0.0.1:7501 by default"
fi
ok "the installed dispatcher.conf and worker.conf start the installed daemons"

# ---- a C program against the installed library, through sluice.pc
cat >"$TMP/app.c" <<'C'
#include <sluice.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    /* A generous RPC deadline: ASan builds on a loaded 2-core machine are slow. */
    sluice_options_t o = {.dispatcher = argc > 3 ? argv[3] : NULL, .data_root = argv[2],
                          .timeout_ms = 30000};
    sluice_job_t *job = NULL;
    char err[512];
    if (sluice_open(argv[1], &o, &job, err, sizeof(err)) != 0) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    unsigned long n = 0;
    sluice_batch_t *b;
    int rc;
    while ((rc = sluice_next_batch(job, &b)) == 0) {
        n += b->n;
        sluice_release_batch(job, b);
    }
    if (rc < 0) {
        fprintf(stderr, "next: %s\n", sluice_last_error(job));
    }
    sluice_close(job);
    printf("%lu\n", n);
    return rc < 0;
}
C
write_train_spec "$TMP/spec.json" 2
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
SAN=""
case "$BUILD" in *asan*) SAN="-fsanitize=address,undefined" ;; esac
# shellcheck disable=SC2046
cc $SAN -o "$TMP/app" "$TMP/app.c" $(pkg-config --cflags --libs sluice) -Wl,-rpath,"$P/lib" ||
    fail "building against sluice.pc (shared)"
[ "$("$TMP/app" "$TMP/spec.json" "$TMP/data")" = 16 ] || fail "shared app: local run"
[ "$("$TMP/app" "$TMP/spec.json" "$TMP/data" "$D_GRPC")" = 16 ] || fail "shared app: dispatcher run"
# grep reads all of ldd's output (no -q): under pipefail an early exit would
# kill ldd with SIGPIPE and fail the pipeline although the line was found.
ldd "$TMP/app" | grep "libsluice.so.0 => $P/lib/libsluice.so.0" >/dev/null ||
    fail "app not linked to the installed library: $(ldd "$TMP/app" | grep sluice)"
# shellcheck disable=SC2046
cc $SAN -o "$TMP/app-static" "$TMP/app.c" $(pkg-config --cflags sluice) \
    "$(pkg-config --variable=libdir sluice)/libsluice.a" -Wl,--as-needed \
    $(pkg-config --static --libs sluice) || fail "building against libsluice.a"
ldd "$TMP/app-static" | grep libsluice >/dev/null && fail "static app still wants libsluice.so"
[ "$("$TMP/app-static" "$TMP/spec.json" "$TMP/data")" = 16 ] || fail "static app: local run"
ok "a C program builds with pkg-config sluice (shared and static) and runs local and remote jobs"

# ---- a stage plugin built as docs/plugins.md says against an installed
# Sluice (its `pkg-config --cflags sluice` line: sluice_plugin.h in
# includedir, nothing to link), run by the installed CLI, whose
# sluice-plugin-host is found beside it
mkdir -p "$TMP/plugsrc" "$TMP/iplug"
/usr/bin/python3 - "$ROOT/docs/plugins.md" "$TMP/plugsrc" <<'PY' || fail "docs/plugins.md"
import re, sys
text, out = open(sys.argv[1]).read(), sys.argv[2]
def block(marker, lang):
    return re.compile(r"```" + lang + r"\n(.*?)```", re.S).search(text, text.index(marker)).group(1)
open(out + "/my_stage.c", "w").write(block("<!-- plugin-example: my_stage.c", "c"))
lines = [l for l in block("<!-- plugin-build", "sh").splitlines() if "pkg-config" in l]
assert len(lines) == 1 and lines[0].startswith("cc "), lines
open(out + "/build.sh", "w").write(lines[0] + "\n")
PY
(cd "$TMP/plugsrc" && bash -e build.sh) || fail "the doc's installed build line: $(cat "$TMP/plugsrc/build.sh")"
cp "$TMP/plugsrc/my_stage.so" "$TMP/iplug/"
cat >"$TMP/plugspec.json" <<JSON
{"source": {"type": "imagefolder", "path": "train"},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 32},
            {"op": "plugin", "name": "my_stage", "sha256": "$(sha256sum "$TMP/iplug/my_stage.so" | cut -d' ' -f1)"},
            {"op": "to_chw"}],
 "batch_size": 4, "epochs": 1}
JSON
env -u SLUICE_PLUGIN_HOST "$P/bin/sluice" run "$TMP/plugspec.json" --data-root "$TMP/data" \
    --local --quiet --plugin-dir "$TMP/iplug" || fail "the installed CLI with the plugin"
ok "a plugin built by docs/plugins.md's pkg-config line runs under the installed CLI"

# ---- the installed Python package finds the installed library by itself
if [ -z "$SAN" ]; then
    pydir=$(compgen -G "$P/lib/python3.*/dist-packages")
    env -u SLUICE_LIB PYTHONPATH="$pydir" /usr/bin/python3 - "$P" "$TMP" <<'PY' || fail "python"
import os, sys
import sluice
prefix, tmp = sys.argv[1:3]
n = sum(len(y) for _, y in sluice.Loader(None, os.path.join(tmp, "spec.json"),
                                         data_root=os.path.join(tmp, "data")))
assert n == 16, n
assert sluice.library_path == os.path.join(prefix, "lib", "libsluice.so.0"), sluice.library_path
PY
    ok "installed python package loads $P/lib/libsluice.so.0 without SLUICE_LIB"
    # Its plugin host: found in the library's ../bin ($P/bin), not on PATH.
    env -u SLUICE_LIB -u SLUICE_PLUGIN_HOST PATH=/usr/bin:/bin PYTHONPATH="$pydir" \
        /usr/bin/python3 - "$TMP" <<'PY' || fail "python with a plugin"
import os, sys
import sluice
tmp = sys.argv[1]
n = sum(len(y) for _, y in sluice.Loader(None, os.path.join(tmp, "plugspec.json"),
                                         data_root=os.path.join(tmp, "data"),
                                         plugin_dir=os.path.join(tmp, "iplug")))
assert n == 8, n
PY
    ok "installed python package runs a plugin: sluice-plugin-host found in $P/bin"
fi

# ---- reinstall keeps an edited config; uninstall removes everything else
printf '\nthreads = 2\n' >>"$E/sluice/worker.conf"
mk install PREFIX="$P" SYSCONFDIR="$E" || fail "second make install"
grep -q '^threads = 2$' "$E/sluice/worker.conf" || fail "reinstall overwrote an edited config"
mk uninstall PREFIX="$P" SYSCONFDIR="$E" || fail "make uninstall: $(tail -n 20 "$TMP/make.log")"
left=$(find "$P" "$E" -type f -o -type l | sort)
[ "$left" = "$E/sluice/worker.conf" ] || fail "after uninstall: $left"
ok "reinstall keeps an edited config; uninstall removes everything else"

# ---- DESTDIR staging for packagers
S="$TMP/stage"
mk install DESTDIR="$S" PREFIX=/usr || fail "make install DESTDIR"
[ -x "$S/usr/bin/sluice-worker" ] && [ -f "$S/etc/sluice/worker.conf" ] &&
    [ -f "$S/usr/lib/python3/dist-packages/sluice/__init__.py" ] &&
    [ -f "$S/usr/lib/systemd/system/sluice-worker.service" ] || fail "DESTDIR layout"
grep -q '^ExecStart=/usr/bin/sluice-worker --config /etc/sluice/worker.conf$' \
    "$S/usr/lib/systemd/system/sluice-worker.service" || fail "DESTDIR leaked into the unit"
grep -q '^prefix=/usr$' "$S/usr/lib/pkgconfig/sluice.pc" || fail "DESTDIR leaked into sluice.pc"
if grep -rq "$S" "$S"; then
    fail "DESTDIR appears inside installed files"
fi
mk uninstall DESTDIR="$S" PREFIX=/usr || fail "make uninstall DESTDIR"
[ -z "$(find "$S" -type f -o -type l)" ] || fail "after DESTDIR uninstall: $(find "$S" -type f)"
ok "DESTDIR=... PREFIX=/usr: staged, no DESTDIR inside files, uninstall leaves nothing"

# ---- pip install ./client/python (offline: setuptools from Debian, no deps fetched)
pyv=$(sed -nE 's/^version = "([^"]+)".*/\1/p' "$ROOT/client/python/pyproject.toml")
libv=$(sed -nE 's/^#define SL_VERSION "([^"]+)"/\1/p' "$ROOT/common/base/version.h")
[ "$pyv" = "$libv" ] || fail "pyproject.toml version $pyv, library $libv"
cp -r "$ROOT/client/python" "$TMP/pysrc" # pip builds in the source dir: keep the tree clean
/usr/bin/python3 -m pip install --quiet --no-build-isolation --no-deps --no-index \
    --target "$TMP/pip" "$TMP/pysrc" >"$TMP/pip.out" 2>&1 || { cat "$TMP/pip.out"; fail "pip install"; }
[ -f "$TMP/pip/sluice/torch.py" ] || fail "pip: sluice/torch.py not installed"
got=$(cd "$TMP" && PYTHONPATH="$TMP/pip" SLUICE_LIB="$ROOT/$BUILD/lib/libsluice.so" \
    /usr/bin/python3 -c 'import sluice; print(sluice.__file__, sluice.version)')
case "$got" in
"$TMP/pip/sluice/__init__.py $libv") ;;
*) fail "pip-installed package: $got" ;;
esac
ok "pip install ./client/python: the package imports and loads libsluice $libv"
echo PASS
