"""Finding and running the ctrkit binary; the `ctrkit session` client."""

import atexit
import json
import os
import shutil
import subprocess
import threading
import weakref

__all__ = ["CtrkitError", "binary", "run", "Session"]


class CtrkitError(RuntimeError):
    """ctrkit failed; the message is ctrkit's own."""


def binary():
    """The ctrkit executable: $CTRKIT_BIN, else `ctrkit` on PATH."""
    env = os.environ.get("CTRKIT_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise CtrkitError("CTRKIT_BIN=%s is not an executable file (build one with `go install ./cmd/ctrkit` "
                              "in the ctrkit repository, or unset CTRKIT_BIN to use ctrkit on PATH)" % env)
        return env
    p = shutil.which("ctrkit")
    if p is None:
        raise CtrkitError("the ctrkit binary was not found: install it with `go install ./cmd/ctrkit` in the "
                          "ctrkit repository (it lands in $(go env GOPATH)/bin, which must be on PATH), "
                          "or set CTRKIT_BIN to its path")
    return p


def _message(stderr, code):
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    for l in reversed(lines):
        if l.startswith("ctrkit: "):
            return l[len("ctrkit: "):]
    if lines:
        return lines[-1]
    return "ctrkit exited with status %d" % code


def run(args, check=True):
    """Runs ctrkit with args; returns its stdout. A failure raises
    CtrkitError with ctrkit's message."""
    p = subprocess.run([binary()] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if check and p.returncode != 0:
        raise CtrkitError(_message(p.stderr, p.returncode))
    return p.stdout


_FLAGS = {}


def has_flag(command, flag):
    """Whether `ctrkit <command> --help` lists flag (binaries of other
    versions differ); cached per binary."""
    key = (binary(), command)
    if key not in _FLAGS:
        p = subprocess.run([key[0], command, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        _FLAGS[key] = p.stdout
    return (" %s " % flag) in _FLAGS[key] or (" %s=" % flag) in _FLAGS[key] or (" %s," % flag) in _FLAGS[key]


def popen(args):
    return subprocess.Popen([binary()] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)


def fail(p, stderr):
    return CtrkitError(_message(stderr, p.returncode))


class Session(object):
    """One long-lived `ctrkit session` process (docs/SESSION.md): the
    model stays loaded (on the GPU, when ctrkit runs there) between
    requests."""

    def __init__(self):
        self._p = subprocess.Popen([binary(), "session"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, universal_newlines=True, bufsize=1)
        self._err = []
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()
        _SESSIONS.add(self)

    def _drain(self):
        for line in self._p.stderr:
            self._err.append(line)
            del self._err[:-50]

    def request(self, cmd, **kw):
        """Sends one request; returns the response (a dict) or raises
        CtrkitError with the session's message."""
        kw["cmd"] = cmd
        if self._p.poll() is not None:
            raise CtrkitError("the ctrkit session has exited: " + _message("".join(self._err), self._p.returncode))
        try:
            self._p.stdin.write(json.dumps(kw) + "\n")
            self._p.stdin.flush()
            line = self._p.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self._p.wait()
            raise CtrkitError("the ctrkit session ended: " + _message("".join(self._err), self._p.returncode))
        resp = json.loads(line)
        if not resp.get("ok"):
            raise CtrkitError(resp.get("error", "ctrkit session: request failed"))
        return resp

    def close(self):
        if self._p.poll() is None:
            try:
                self.request("quit")
            except CtrkitError:
                pass
            try:
                self._p.stdin.close()
            except OSError:
                pass
            try:
                self._p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._p.kill()
                self._p.wait()
        self._t.join(timeout=10)  # stderr ends with the process
        files = [self._p.stdout] + ([] if self._t.is_alive() else [self._p.stderr])
        for f in files:
            try:
                f.close()
            except (OSError, ValueError):
                pass

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_SESSIONS = weakref.WeakSet()


@atexit.register
def _close_sessions():
    for s in list(_SESSIONS):
        s.close()
