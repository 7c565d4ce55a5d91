"""peer_env.py - where bench/peers.py finds the frameworks and how it starts them:
a python that imports torch (or onnxruntime) among this interpreter and every
python3 on PATH (FT_TORCH_PYTHON / FT_ORT_PYTHON name one), onnxruntime-node under
bench/baselines/node_modules, the OpenBLAS directory put first for torch's BLAS,
and the workers' environment (thread pools, the OpenBLAS pin, OpenMP's wait).
Standard library only.
"""
import json
import os
import shutil
import subprocess
import sys

BASE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(BASE))
OPENBLAS_DEB_DIR = "usr/lib/x86_64-linux-gnu/openblas-openmp"
LOCAL_BLAS = os.path.join(ROOT, "build", "peers", "openblas")
TOOL_SPINCOUNT = "1000"  # tools/omp_policy.c FT_TOOL_SPINCOUNT: the tool's OpenMP wait when the user sets none

def _probe(cmd, env=None):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return r.stdout.strip(), None


def pythons():
    """Candidate interpreters, in order: this one, then every python3 on PATH."""
    out = [sys.executable]
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, "python3")
        if os.access(p, os.X_OK) and os.path.realpath(p) not in [os.path.realpath(q) for q in out]:
            out.append(p)
    return out


_found = {}


def find_python(module, env_var):
    """(interpreter that imports `module`, its version) or (None, why). $env_var wins."""
    if module in _found:
        return _found[module]
    cands = [os.environ[env_var]] if os.environ.get(env_var) else pythons()
    why = []
    for p in cands:
        out, err = _probe([p, "-c", "import %s as m; print(m.__version__)" % module])
        if out:
            _found[module] = (p, out.splitlines()[-1])
            return _found[module]
        why.append("%s: %s" % (p, err))
    _found[module] = (None, "%s is not importable by %s" % (module, "; ".join(why) or "any python3"))
    return _found[module]


def find_ort():
    """('python', interpreter) with the onnxruntime module, ('node', node) with
    onnxruntime-node installed under bench/baselines, or (None, why)."""
    py, why_py = find_python("onnxruntime", "FT_ORT_PYTHON")
    if py:
        _, err = _probe([py, "-c", "import numpy"])
        if not err:
            return "python", py
        why_py = "onnxruntime without numpy (%s)" % err
    node = shutil.which("node")
    if not node:
        return None, "%s; no node on PATH for onnxruntime-node" % why_py
    out, err = _probe([node, os.path.join(BASE, "ort_runner.js"), '{"cmd": "info"}'])
    if out and '"ok":true' in out.replace(" ", "").splitlines()[-1]:
        return "node", node
    msg = out.splitlines()[0] if out else err
    try:
        msg = json.loads(msg)["error"]
    except (ValueError, KeyError, TypeError):
        pass
    return None, "%s; %s" % (why_py, msg)


def torch_libdir(explicit=None):
    """The directory put first on torch's library path for its BLAS, or None."""
    for d in (explicit, os.environ.get("FT_TORCH_LIBDIR"), "/" + OPENBLAS_DEB_DIR,
              os.path.join(LOCAL_BLAS, OPENBLAS_DEB_DIR)):
        if d and os.path.exists(os.path.join(d, "libblas.so.3")):
            return d
    return None


def fetch_openblas():
    """Debian's OpenBLAS (OpenMP build) unpacked under build/peers/openblas, not installed:
    the host's libblas.so.3 alternative is left alone."""
    deb_dir = os.path.join(ROOT, "build", "peers", "debs")
    os.makedirs(deb_dir, exist_ok=True)
    r = subprocess.run(["apt-get", "download", "libopenblas0-openmp"], cwd=deb_dir, capture_output=True, text=True)
    debs = sorted(f for f in os.listdir(deb_dir) if f.startswith("libopenblas0-openmp") and f.endswith(".deb"))
    if not debs:
        raise RuntimeError("apt-get download libopenblas0-openmp failed: " + r.stderr.strip()[-300:])
    subprocess.run(["dpkg", "-x", os.path.join(deb_dir, debs[-1]), LOCAL_BLAS], check=True)
    return os.path.join(LOCAL_BLAS, OPENBLAS_DEB_DIR)


def worker_env(threads, libdir=None, openblas="auto", omp_wait="same"):
    """A worker's environment: every pool (OpenMP, OpenBLAS, MKL) at `threads`, set before
    the runtime loads; the OpenBLAS pins as `openblas` says (auto: dropped, so OpenBLAS
    detects the CPU as a normal install does; keep; or a core name); OpenMP's wait policy
    as `omp_wait` says (same: the one `ftengine bench` runs with, GOMP_SPINCOUNT=1000 unless
    the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, so both sides' libgomp teams wait alike;
    default: libgomp's own, whose 300000 spins stall a team on a loaded host)."""
    env = dict(os.environ)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS"):
        env[v] = str(threads)
    if omp_wait == "same" and not (env.get("OMP_WAIT_POLICY") or env.get("GOMP_SPINCOUNT")):
        env["GOMP_SPINCOUNT"] = TOOL_SPINCOUNT
    if openblas == "auto":
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    elif openblas != "keep":
        env["OPENBLAS_CORETYPE"] = openblas
    if libdir:
        env["LD_LIBRARY_PATH"] = libdir + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env
