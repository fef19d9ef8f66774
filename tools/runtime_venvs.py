"""Make one virtualenv per release of a runtime other than ONNX Runtime, for probes and tests.

    python tools/runtime_venvs.py [--force] [--list] [RUNTIME==RELEASE ...]

RUNTIME==RELEASE is one of RELEASES below (default: all of them), e.g. ``openvino==2026.4``
(MAJOR.MINOR is enough).  Each venv lands in $REWRITER_RUNTIME_VENVS (default
~/.cache/rewriter/runtime-venvs) under RUNTIME-MAJOR.MINOR, made by the interpreter the release
needs (this one unless RELEASES names another), and holds the pinned packages
of that release and their own dependencies only.  It works when the release's runner
(tools/runtime_run_<runtime>.py) runs a Relu model right in it; then it gets a
``rewriter-runtime.json`` (the installed versions) and ``venv_python`` finds it.  A working venv
is left alone unless --force.  The project's own environment is never touched.

Pins (found by installing and running the smoke model):

* openvino 2026.4.1 / 2024.6.0: the wheel alone (numpy comes with it; 2024.6 requires numpy<2.2).
* tract 0.23.9: the wheel and numpy.
* apache-tvm 0.27.0.post1: onnx for its Relax ONNX frontend (``from_onnx`` takes a ModelProto).
* litert 2.6 (onnx2tf 2.6.9 into the LiteRT interpreter): onnx2tf requires python >= 3.12
  (``base_python("3.12")`` finds pyenv's) and pins its own dependencies, among them
  ai-edge-litert 2.1.2 (the interpreter), onnx 1.20.1, onnxruntime 1.26.0, onnxsim 0.6.5 and
  numpy 2.2.6.  TensorFlow is its optional extra, needed only by the legacy ``tf_converter``
  backend: not installed (the default ``flatbuffer_direct`` backend writes the .tflite itself).
"""

from __future__ import annotations

import argparse
import base64
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MARKER = "rewriter-runtime.json"
# Relu on float[3], IR 3, opset 7: loads everywhere.
SMOKE_MODEL = base64.b64decode("CAMSADozCgwKAXgSAXkiBFJlbHUSAWdaDwoBeBIKCggIARIECgIIA2IPCgF5EgoKCAgBEgQKAggDQgQKABAH")

# runtime -> release (MAJOR.MINOR) -> what to install; "python": the interpreter's version (None: this one)
RELEASES: dict[str, dict[str, dict]] = {
    "openvino": {
        "2026.4": {"pip": ["openvino==2026.4.1"]},
        "2024.6": {"pip": ["openvino==2024.6.0"]},
    },
    "tract": {
        "0.23": {"pip": ["tract==0.23.9", "numpy"]},
    },
    "tvm": {
        "0.27": {"pip": ["apache-tvm==0.27.0.post1", "onnx", "numpy"]},
    },
    "litert": {
        "2.6": {"pip": ["onnx2tf==2.6.9"], "python": "3.12"},
    },
}
# the module whose __version__ names the release, per runtime (LiteRT: onnx2tf's)
VERSION_OF = {"openvino": ["openvino"], "tract": ["tract"], "tvm": ["tvm"], "litert": ["onnx2tf", "ai_edge_litert"]}


def venvs_dir() -> Path:
    return Path(os.environ.get("REWRITER_RUNTIME_VENVS") or "~/.cache/rewriter/runtime-venvs").expanduser()


def runner(runtime: str) -> Path:
    """The runner script a venv of ``runtime`` runs (see tools/runtime_run_common.py)."""
    return HERE / f"runtime_run_{runtime}.py"


def venv_path(runtime: str, release: str) -> Path:
    return venvs_dir() / f"{runtime}-{release}"


def venv_python(runtime: str, release: str) -> Path | None:
    """The python of a working venv of ``runtime`` ``release`` (MAJOR.MINOR), None when absent."""
    venv = venv_path(runtime, release)
    python = venv / "bin" / "python"
    return python if (venv / MARKER).is_file() and python.exists() else None


def installed() -> dict[str, dict]:
    """{"runtime-release": marker info} of every working venv."""
    root = venvs_dir()
    out = {}
    if root.is_dir():
        for p in sorted(root.iterdir()):
            if (p / MARKER).is_file() and (p / "bin" / "python").exists():
                out[p.name] = json.loads((p / MARKER).read_text())
    return out


def base_python(version: str | None) -> str:
    """This interpreter, or pyenv's newest python ``version`` (e.g. "3.12")."""
    if version is None or sys.version.startswith(version + "."):
        return sys.executable
    env = os.environ.get("REWRITER_PYTHON" + version.replace(".", ""))
    if env:
        return env
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob(os.path.join(root, "versions", version + ".*", "bin", "python")))
    if found:
        return found[-1]
    exe = shutil.which(f"python{version}")
    if exe:
        return exe
    raise SystemExit(f"no python {version} (pyenv install {version}, or set REWRITER_PYTHON{version.replace('.', '')})")


def _pip(python: Path | str, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(cmd, check=False, capture_output=True, text=True)


def smoke(runtime: str, python: Path) -> tuple[dict | None, str]:
    """(versions, "") when the venv's runner runs the Relu model right, else (None, why)."""
    if not python.exists():
        return None, "no python"
    with tempfile.TemporaryDirectory() as tmp:
        model, inputs, outputs = (Path(tmp) / n for n in ("m.onnx", "in.npz", "out.npz"))
        model.write_bytes(SMOKE_MODEL)
        np.savez(inputs, x=np.array([-1.0, 0.0, 2.0], dtype=np.float32))
        proc = subprocess.run([str(python), str(runner(runtime)), str(model), str(inputs), str(outputs)],
                              check=False, capture_output=True, text=True, timeout=600)
        try:
            result = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return None, f"exit {proc.returncode}: {proc.stderr.strip()[-800:]}"
        if not result.get("ok"):
            return None, f"{result.get('stage')}: {result.get('error')}"
        with np.load(outputs) as out:
            if not np.array_equal(out["y"], [0.0, 0.0, 2.0]):
                return None, f"wrong output {out['y']}"
    mods = VERSION_OF[runtime] + ["numpy"]
    code = ("import importlib, json, sys\nv = {'python': sys.version.split()[0]}\n"
            f"for m in {mods!r}:\n"
            "    try:\n"
            "        mod = importlib.import_module(m)\n"
            "        v[m] = getattr(mod, '__version__', None) or mod.version()\n"
            "    except Exception:\n"
            "        v[m] = None\n"
            "print(json.dumps(v))")
    proc = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True)
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "runner": result.get("runtime")}, ""


def ensure(runtime: str, release: str, force: bool = False) -> dict:
    spec = RELEASES[runtime][release]
    venv = venv_path(runtime, release)
    python = venv / "bin" / "python"
    marker = venv / MARKER
    if not force and marker.exists():
        versions, _ = smoke(runtime, python)
        if versions:
            info = {**json.loads(marker.read_text()), **versions}
            marker.write_text(json.dumps(info, indent=1) + "\n")
            return {**info, "status": "kept"}
    start = time.monotonic()
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([base_python(spec.get("python")), "-m", "venv", str(venv)], check=True)
    _pip(python, "install", "-q", "--upgrade", "pip")
    proc = _pip(python, "install", "-q", *spec["pip"])
    if proc.returncode:
        shutil.rmtree(venv)
        return {"venv": venv.name, "status": "failed", "error": (proc.stdout + proc.stderr).strip()[-800:]}
    versions, why = smoke(runtime, python)
    if versions is None:
        return {"venv": venv.name, "status": "failed", "error": why}
    info = {"runtime": runtime, "release": release, "pip": spec["pip"], **versions,
            "made": time.strftime("%Y-%m-%d", time.gmtime())}
    marker.write_text(json.dumps(info, indent=1) + "\n")
    return {**info, "status": f"made in {time.monotonic() - start:.0f}s"}


def parse(item: str) -> tuple[str, str]:
    runtime, _, release = item.partition("==")
    runtime = runtime.strip().lower()
    if runtime not in RELEASES:
        raise SystemExit(f"unknown runtime {runtime!r} (known: {', '.join(RELEASES)})")
    key = ".".join(release.strip().split(".")[:2])
    if key not in RELEASES[runtime]:
        raise SystemExit(f"{runtime} {release!r}: known releases {', '.join(RELEASES[runtime])}")
    return runtime, key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help="RUNTIME==RELEASE (default: all)")
    parser.add_argument("--force", action="store_true", help="remake venvs that already work")
    parser.add_argument("--list", action="store_true", help="list the working venvs and stop")
    args = parser.parse_args(argv)
    print(f"venvs in {venvs_dir()}")
    if args.list:
        for name, info in installed().items():
            print(f"{name:16} {json.dumps({k: v for k, v in info.items() if k not in ('pip',)})}")
        return 0
    wanted = [parse(r) for r in args.releases] or [(rt, rel) for rt, rels in RELEASES.items() for rel in rels]
    failed = 0
    for runtime, release in wanted:
        info = ensure(runtime, release, args.force)
        if info["status"] == "failed":
            failed += 1
            print(f"{runtime}-{release:8} FAILED {info['error']}")
        else:
            mods = ", ".join(f"{m} {info.get(m)}" for m in VERSION_OF[runtime] + ["numpy"])
            print(f"{runtime}-{release:8} {mods}; python {info.get('python')}  {info['status']}")
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
