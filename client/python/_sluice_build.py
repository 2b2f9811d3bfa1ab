"""The build backend of `pip install ./client/python` (PEP 517, standard library
only: no setuptools, nothing to download).

- Inside a Sluice source tree (this directory is client/python of a tree
  with scripts/make-wheel): the self-contained wheel of `make wheel`, which
  needs the tree built (`make`); unbuilt, the install fails saying so.
- Elsewhere (these files copied out, e.g. by a packager): the binding alone,
  a py3-none-any wheel of sluice/*.py that loads libsluice from $SLUICE_LIB
  or the system (the libsluice0 package, `make install`).

scripts/make-wheel writes its wheel with write_wheel() below.
"""

import base64
import csv
import hashlib
import io
import os
import re
import stat
import subprocess
import sys
import time
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
_MAKE_WHEEL = os.path.join(_ROOT, "scripts", "make-wheel")
_ZIP_EPOCH = 315532800  # 1980-01-01, the oldest time a zip entry can hold


def project_version(pyproject=os.path.join(_HERE, "pyproject.toml")):
    with open(pyproject) as f:
        m = re.search(r'^version = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("%s: no version line" % pyproject)
    return m.group(1)


def metadata(version, readme_path=os.path.join(_HERE, "README.md")):
    with open(readme_path) as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\n"
            "Name: sluice\n"
            "Version: %s\n"
            "Summary: Sluice client binding: batches from a Sluice input-pipeline job "
            "(numpy, PyTorch)\n"
            "Requires-Python: >=3.9\n"
            "Requires-Dist: numpy\n"
            "Provides-Extra: torch\n"
            "Requires-Dist: torch; extra == \"torch\"\n"
            "Description-Content-Type: text/markdown\n"
            "\n%s" % (version, readme))


def _record_row(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [arcname, "sha256=" + digest, str(len(data))]


def write_wheel(path, tree, version, tag, purelib, when=_ZIP_EPOCH):
    """Zips every file under tree (modes kept: pip restores an executable
    bit) and sluice-VERSION.dist-info (METADATA, WHEEL, top_level.txt,
    RECORD with each file's sha256) into path. Entries sorted and dated
    `when`, so the same inputs give the same bytes."""
    dist_info = "sluice-%s.dist-info" % version
    date = time.gmtime(max(when, _ZIP_EPOCH))[:6]
    files = []
    for d, _, names in os.walk(tree):
        for n in names:
            full = os.path.join(d, n)
            files.append((os.path.relpath(full, tree).replace(os.sep, "/"), full))
    meta = {
        "METADATA": metadata(version),
        "WHEEL": "Wheel-Version: 1.0\nGenerator: sluice client/python/_sluice_build.py\n"
                 "Root-Is-Purelib: %s\nTag: %s\n" % ("true" if purelib else "false", tag),
        "top_level.txt": "sluice\n",
    }
    rows = []
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        def add(arcname, data, mode):
            info = zipfile.ZipInfo(arcname, date)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | mode) << 16
            z.writestr(info, data)
            rows.append(_record_row(arcname, data))

        for arcname, full in sorted(files):
            with open(full, "rb") as f:
                add(arcname, f.read(), 0o755 if os.access(full, os.X_OK) else 0o644)
        for name, text in sorted(meta.items()):
            add("%s/%s" % (dist_info, name), text.encode(), 0o644)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerows(rows)
        w.writerow(["%s/RECORD" % dist_info, "", ""])
        add_record = zipfile.ZipInfo("%s/RECORD" % dist_info, date)
        add_record.compress_type = zipfile.ZIP_DEFLATED
        add_record.external_attr = (stat.S_IFREG | 0o644) << 16
        z.writestr(add_record, buf.getvalue())
    os.replace(tmp, path)
    return path


def _binding_only(wheel_directory):
    import shutil
    import tempfile

    version = project_version()
    with tempfile.TemporaryDirectory() as tree:
        pkg = os.path.join(tree, "sluice")
        os.makedirs(pkg)
        for name in sorted(os.listdir(os.path.join(_HERE, "sluice"))):
            if name.endswith(".py") and name != "_installed.py":
                shutil.copy(os.path.join(_HERE, "sluice", name), os.path.join(pkg, name))
        name = "sluice-%s-py3-none-any.whl" % version
        write_wheel(os.path.join(wheel_directory, name), tree, version, "py3-none-any", True)
    return name


def _self_contained(wheel_directory):
    build = os.environ.get("BUILD", "build")
    lib = os.path.join(_ROOT, build, "lib", "libsluice.so")
    if not os.path.exists(lib):
        raise RuntimeError(
            "sluice: %s is not built. In a Sluice source tree, pip installs the "
            "self-contained wheel of `make wheel` (libsluice and the libraries it needs "
            "inside): run `make` first, or `make wheel` and then "
            "`pip install %s/wheel/sluice-*.whl`." % (lib, os.path.join(_ROOT, build)))
    p = subprocess.run([sys.executable, _MAKE_WHEEL, "--out", wheel_directory],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError("sluice: scripts/make-wheel failed (run `make wheel` to see "
                           "why):\n" + p.stderr)
    wheels = [n for n in os.listdir(wheel_directory)
              if n.startswith("sluice-") and n.endswith(".whl")]
    if len(wheels) != 1:
        raise RuntimeError("sluice: scripts/make-wheel left %r" % wheels)
    return wheels[0]


# ---- PEP 517 hooks


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if os.path.exists(_MAKE_WHEEL):
        return _self_contained(wheel_directory)
    return _binding_only(wheel_directory)


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("sluice: no source distribution (the library is C): build the "
                       "wheel with `make wheel` in a Sluice source tree")


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("sluice: no editable install; in a source tree use "
                       "PYTHONPATH=client/python (it finds build/lib/libsluice.so)")
