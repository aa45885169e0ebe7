"""Runs HugeCTR's own Python scripts (samples/, test/pybind_test/, the
notebooks' scripts) against ctrkit.hugectr, with `import hugectr` resolved
to ctrkit.hugectr and nothing else changed, and reports what each does.

    python3 -m tests.hugectr_scripts [--hugectr GITDIR [--ref v23.09.00]] [--json] [SCRIPT.py...]

(in python/, with CTRKIT_BIN or ctrkit on PATH). --hugectr runs every
script of a HugeCTR checkout at --ref (collect()) and prints a markdown
table.

The scripts name data sets, GPUs and trained files that are not here, so
this is an API check, not training: every hugectr call runs for real
(constructors, Model.add, compile and summary, which run `ctrkit summary`
on the model's config) except the ones that need the data: Model.fit
binds its arguments to ctrkit's fit, checks the model compiles and that
`ctrkit train` has every flag fit would pass, the
low-level loop talks to a stand-in session that answers every request of
docs/SESSION.md (its train() ends an epoch after 20 batches; its AUC is 1,
so the scripts' own AUC checks pass), and
DataGenerator.generate builds its `ctrkit gen` command without running
it. mpi4py is a one-rank stand-in. A script passes when it runs to its
end; otherwise the report gives the first error, which names the
argument or layer ctrkit does not take. docs/PYTHON_COVERAGE.md is the
table for HugeCTR v23.09.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)

_BOOT = r'''
import inspect, json, os, runpy, sys, traceback, types
sys.path.insert(0, %(pyroot)r)
import ctrkit.hugectr as h
from ctrkit import _proc
sys.modules["hugectr"] = h
sys.modules["hugectr.inference"] = h.inference
sys.modules["hugectr.tools"] = h.tools
sys.modules["hugectr.data"] = h.data
calls = []

class _Comm(object):
    def Get_rank(self): return 0
    def Get_size(self): return 1
    def Barrier(self): pass
    def barrier(self): pass
mpi = types.ModuleType("mpi4py")
mpi.MPI = types.ModuleType("mpi4py.MPI")
mpi.MPI.COMM_WORLD = _Comm()
mpi.MPI.Is_thread_main = lambda: True
mpi.MPI.Is_initialized = lambda: True
mpi.MPI.Init_thread = lambda *a: 0
mpi.MPI.Query_thread = lambda: 3
mpi.MPI.THREAD_MULTIPLE = 3
sys.modules["mpi4py"], sys.modules["mpi4py.MPI"] = mpi, mpi.MPI

_fit = h.Model.fit
def fit(self, *a, **kw):
    inspect.signature(_fit).bind(self, *a, **kw)
    if not self._compiled:
        self.compile()
    # The command line fit would run: every flag is one the binary has.
    for a in self._train_flags():
        if a.startswith("--") and not _proc.has_flag("train", a.split("=")[0]):
            raise RuntimeError("fit passes %%s, which this ctrkit train lacks" %% a.split("=")[0])
    calls.append("fit")
    return []
h.Model.fit = fit

class _Session(object):
    trained = 0
    def request(self, op, **kw):
        calls.append(op)
        if op == "train":
            _Session.trained += 1
            done = _Session.trained %% 20 == 0
            return {"trained": not done, "eof": done}
        if op in ("set_source", "start_data_reading"):
            _Session.trained = 0
        # AUC 1: the scripts' own AUC thresholds pass (nothing is trained).
        return {"loss": 0.5, "auc": 1.0, "hit_rate": 1.0, "lr": 0.001, "iter": _Session.trained}
    def close(self): pass
_proc.Session = _Session
h._proc.Session = _Session

def generate(self):
    self._args()
    calls.append("generate")
h.tools.DataGenerator.generate = generate

status, err = "ok", ""
try:
    runpy.run_path(%(script)r, run_name="__main__")
except SystemExit as e:
    if e.code not in (None, 0):
        status, err = "error", "exit %%s" %% e.code
except BaseException as e:
    status = "error"
    tb = traceback.extract_tb(e.__traceback__)
    line = [f.lineno for f in tb if f.filename == %(script)r]
    err = "%%s: %%s (line %%s)" %% (type(e).__name__, str(e).splitlines()[0] if str(e) else "", line[-1] if line else "?")
sys.stdout.flush()
print("\n@@RESULT " + json.dumps({"status": status, "error": err, "calls": sorted(set(calls))}))
'''


def run_one(path, args=(), timeout=120):
    """Runs one script with args in a fresh directory; returns {"status",
    "error", "calls"}."""
    path = os.path.abspath(path)
    with tempfile.TemporaryDirectory(prefix="ctrkit-hs-") as d:
        code = _BOOT % {"pyroot": PYROOT, "script": path}
        try:
            p = subprocess.run([sys.executable, "-c", code] + list(args), cwd=d, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": "error", "error": "timed out after %ds" % timeout, "calls": []}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("@@RESULT "):
            return json.loads(line[len("@@RESULT "):])
    return {"status": "error", "error": "no result: " + p.stdout[-300:].replace("\n", " | "), "calls": []}


def _git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir] + list(args), stdout=subprocess.PIPE, check=True,
                          universal_newlines=True).stdout


def collect(gitdir, ref, out):
    """Writes HugeCTR's scripts at ref under out: samples/**.py and
    test/pybind_test/*.py (with test/scripts/*.json, the configs its CI
    passes), and the scripts notebooks/ write with %%writefile. Returns
    [(name, path, args)], the pybind tests once per CI invocation
    (ci/**/*.sub)."""
    import re
    files = _git(gitdir, "ls-tree", "-r", "--name-only", ref).splitlines()
    runs = []

    def put(name, text):
        dst = os.path.join(out, name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "w") as f:
            f.write(text)
        return dst

    for f in files:
        if f.startswith("test/scripts/") and f.endswith(".json"):
            put(f, _git(gitdir, "show", "%s:%s" % (ref, f)))
    ci = {}
    for f in files:
        if f.startswith("ci/") and f.endswith(".sub"):
            for m in re.finditer(r"python3? /workdir/(test/pybind_test/\S+\.py)([^&\"\n]*)",
                                 _git(gitdir, "show", "%s:%s" % (ref, f))):
                a = [x.replace("/workdir/", "{out}/") for x in m.group(2).split()]
                ci.setdefault(m.group(1), [])
                if a not in ci[m.group(1)]:
                    ci[m.group(1)].append(a)
    for f in files:
        text = None
        if (f.startswith("samples/") or f.startswith("test/pybind_test/")) and f.endswith(".py"):
            text = _git(gitdir, "show", "%s:%s" % (ref, f))
            if "import hugectr" not in text:
                continue
            dst = put(f, text)
            for a in ci.get(f, [[]]):
                name = " ".join([f] + [x.replace("{out}/", "") for x in a])
                runs.append((name, dst, [x.replace("{out}", out) for x in a]))
        elif f.startswith("notebooks/") and f.endswith(".ipynb"):
            nb = json.loads(_git(gitdir, "show", "%s:%s" % (ref, f)))
            for c in nb.get("cells", []):
                src = "".join(c.get("source", []))
                m = re.match(r"%%writefile\s+['\"]?([^'\"\s]+\.py)['\"]?\s*\n", src)
                if c.get("cell_type") == "code" and m and "hugectr" in src:
                    name = "%s/%s" % (f, os.path.basename(m.group(1)))
                    # The notebooks' command lines (python train.py --data_path …).
                    a = ["--data_path", out, "--model_path", out] if "add_argument(\"--data_path\"" in src else []
                    runs.append((name + "".join(" " + x.replace(out, "DIR") for x in a), put(name, src[m.end():]), a))
    return runs


def table(results):
    """A markdown table of [(name, result)]."""
    lines = ["| script | result |", "|---|---|"]
    for name, r in results:
        res = "runs" if r["status"] == "ok" else r["error"].replace("|", "\\|")
        lines.append("| `%s` | %s |" % (name, res))
    ok = sum(1 for _, r in results if r["status"] == "ok")
    lines.append("")
    lines.append("%d of %d run to their end." % (ok, len(results)))
    return "\n".join(lines)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hugectr", help="a HugeCTR git directory: run its scripts at --ref")
    ap.add_argument("--ref", default="v23.09.00")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("scripts", nargs="*", help="scripts to run (no arguments)")
    a = ap.parse_args(argv)
    runs = [(p, p, []) for p in a.scripts]
    tmp = None
    if a.hugectr:
        tmp = tempfile.mkdtemp(prefix="ctrkit-hugectr-")
        runs += collect(a.hugectr, a.ref, tmp)
    results = []
    try:
        for name, path, args in runs:
            r = run_one(path, args)
            results.append((name, r))
            if not a.json:
                print("%-70s %s %s" % (name, r["status"], r["error"]), file=sys.stderr)
    finally:
        if tmp:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps(dict(results), indent=1, sort_keys=True))
    else:
        print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
