"""A job through an installed wheel (tests/integration/test_wheel.sh and
scripts/test-wheel run it with the wheel's venv python, outside the source tree).

usage: wheel_job.py DISPATCHER|- SPEC DATA OUT [PLUGIN_DIR]

Checks that sluice was imported from site-packages and loaded the wheel's own
libsluice (no SLUICE_LIB, no source tree), that the plugin host is the
wheel's, then runs SPEC over DATA (in-process with "-", else every stage
offloaded to DISPATCHER's workers, which must then have served samples) and
writes "epoch index label sha256" per sample, sorted, to OUT: the lines of
`sluice run --digests`. Last, `import ssl` must still work beside the wheel's
own OpenSSL.
"""

import hashlib
import os
import sys

import sluice

disp, spec, data, out = sys.argv[1:5]
plugin_dir = sys.argv[5] if len(sys.argv) > 5 else None
pkg = os.path.dirname(os.path.abspath(sluice.__file__))
assert "site-packages" in pkg, pkg
assert "SLUICE_LIB" not in os.environ
print("sluice", sluice.version, "from", sluice.library_path)
assert sluice.library_path == os.path.join(pkg, "libsluice.so"), sluice.library_path
host = os.environ.get("SLUICE_PLUGIN_HOST")
assert host == os.path.join(pkg, "bin", "sluice-plugin-host"), host

kwargs = {"threads": 2, "plugin_dir": plugin_dir}
if disp != "-":
    kwargs["offload"] = "all"
lines = []
with sluice.Loader(None if disp == "-" else disp, spec, data_root=data, **kwargs) as loader:
    for b in loader.batches():
        imgs = b.images
        for k in range(len(b)):
            lines.append("%d %d %d %s" % (b.epoch, b.indices[k], b.labels[k],
                                          hashlib.sha256(imgs[k].tobytes()).hexdigest()))
    st = loader.stats()
assert st["delivered"] == len(lines) > 0, (st, len(lines))
if disp != "-":
    assert st["from_remote"] > 0, st
print("job: %d samples, %d from workers" % (st["delivered"], st["from_remote"]))
with open(out, "w") as f:
    f.write("".join(line + "\n" for line in sorted(lines)))

import ssl  # noqa: E402  (after the wheel's libssl: each keeps its own)

print("ssl:", ssl.OPENSSL_VERSION)
