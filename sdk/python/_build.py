"""The build backend of ax-executor (PEP 517), standard library only: a wheel
is ax_executor.py and its metadata in a zip, so building one needs no
setuptools, wheel or package index."""

import base64
import hashlib
import os
import tarfile
import zipfile

NAME, VERSION = "ax_executor", "1.0.0"
HERE = os.path.dirname(os.path.abspath(__file__))
DIST_INFO = "%s-%s.dist-info" % (NAME, VERSION)
METADATA = """Metadata-Version: 2.1
Name: ax-executor
Version: %s
Summary: Run ax tasks over HTTP from Python (ax executor protocol v1); standard library only
Requires-Python: >=3.9
""" % VERSION
WHEEL = """Wheel-Version: 1.0
Generator: ax-executor _build
Root-Is-Purelib: true
Tag: py3-none-any
"""


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    with open(os.path.join(HERE, "ax_executor.py"), "rb") as f:
        files = {"ax_executor.py": f.read()}
    files[DIST_INFO + "/METADATA"] = METADATA.encode()
    files[DIST_INFO + "/WHEEL"] = WHEEL.encode()
    record = [_record_line(n, d) for n, d in files.items()] + [DIST_INFO + "/RECORD,,"]
    files[DIST_INFO + "/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(n, d)
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = "ax-executor-%s" % VERSION
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for n in ("pyproject.toml", "_build.py", "ax_executor.py"):
            t.add(os.path.join(HERE, n), arcname=base + "/" + n)
    return name
