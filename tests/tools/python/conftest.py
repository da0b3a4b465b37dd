"""Shared fixtures of the Python tests: where things are, and jobs of
Python workers started with ferry.launch."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def _binary(name):
    """A ferry binary: from the test's runfiles, else bazel-bin."""
    for path in (os.path.join(ROOT, "tools", name),
                 os.path.join(ROOT, "bazel-bin", "tools", name)):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    pytest.skip(f"{name} is not built")


@pytest.fixture
def ferryd():
    return _binary("ferryd")


@pytest.fixture
def ferryctl():
    return _binary("ferryctl")


def script(*parts):
    return os.path.join(ROOT, *parts)


def launch(path, nproc, *args, timeout=150):
    """Runs `path` as `nproc` Python workers; fails the test with their
    output unless every one exits 0."""
    cmd = [sys.executable, "-m", "ferry.launch", "-n", str(nproc),
           "--timeout", str(timeout), path, *args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout + 30)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, f"{os.path.basename(path)} failed:\n{out}"
    return out
