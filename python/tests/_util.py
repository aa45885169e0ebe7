"""Shared test helpers: the ctrkit binary and the HugeCTR-style scripts."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
SCRIPTS = os.path.join(HERE, "scripts")

if PYROOT not in sys.path:
    sys.path.insert(0, PYROOT)

os.environ.setdefault("CTRKIT_DEVICE", "cpu")

from ctrkit import _proc  # noqa: E402


def need_binary():
    """Skips the test when no ctrkit binary is found."""
    try:
        return _proc.binary()
    except _proc.CtrkitError as e:
        raise unittest.SkipTest(str(e))


def ctrkit(*args):
    return _proc.run([str(a) for a in args])


def run_script(name, cwd):
    """Runs tests/scripts/<name>.py in cwd; returns (status, output)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PYROOT + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, os.path.join(SCRIPTS, name + ".py")], cwd=cwd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return p.returncode, p.stdout


def read_rows(path):
    with open(path) as f:
        return [[float(x) for x in line.split()] for line in f if line.strip()]


def read(path):
    with open(path) as f:
        return f.read()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()
