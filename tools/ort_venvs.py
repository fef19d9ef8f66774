"""Make one virtualenv per old ONNX Runtime release, for tests that use them as oracles.

    python tools/ort_venvs.py [--force] [VERSION ...]

VERSION is MAJOR.MINOR (installs the newest patch of that minor on the package index),
MAJOR.MINOR.PATCH (exactly that), or "newest"; by default 1.15 ... 1.23 and the newest.
Each venv lands in $REWRITER_ORT_VENVS (default ~/.cache/rewriter/ort-venvs) under
MAJOR.MINOR, holds onnxruntime and its own dependencies only, and gets numpy<2 where the
release does not work with numpy 2 (found by trying: install, smoke-test, pin, re-test;
1.18 pins numpy<2 in its own metadata, 1.15-1.17 crash or fail on import with numpy 2).
A venv that already passes the smoke test is left alone (--force remakes it).  A venv
that works has a ``rewriter-ort.json`` in it; tests/old_ort.py lists only those.
The project's own environment is never touched.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ORT_RUN = HERE / "ort_run.py"
MARKER = "rewriter-ort.json"
DEFAULT = ["1.15", "1.16", "1.17", "1.18", "1.19", "1.20", "1.21", "1.22", "1.23", "newest"]
# Relu on float[3], IR 3, opset 7: loads in every release of interest.
SMOKE_MODEL = base64.b64decode("CAMSADozCgwKAXgSAXkiBFJlbHUSAWdaDwoBeBIKCggIARIECgIIA2IPCgF5EgoKCAgBEgQKAggDQgQKABAH")


def venvs_dir() -> Path:
    return Path(os.environ.get("REWRITER_ORT_VENVS") or "~/.cache/rewriter/ort-venvs").expanduser()


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _pip(python: Path | str, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(cmd, capture_output=True, text=True)


def newest() -> str:
    """The newest onnxruntime version the index offers this interpreter."""
    proc = _pip(sys.executable, "index", "versions", "onnxruntime")
    match = re.search(r"Available versions:\s*([^\s,]+)", proc.stdout)
    if match:
        return match.group(1)
    with tempfile.TemporaryDirectory() as tmp:  # pip without `index`: download and read the name
        proc = _pip(sys.executable, "download", "--no-deps", "-d", tmp, "onnxruntime")
        for wheel in Path(tmp).glob("onnxruntime-*.whl"):
            return wheel.name.split("-")[1]
    raise SystemExit(f"cannot find the newest onnxruntime:\n{proc.stdout}{proc.stderr}")


def resolve(version: str) -> tuple[str, str]:
    """(venv name MAJOR.MINOR, pip requirement) for a command-line VERSION."""
    if version in ("newest", "latest"):
        version = newest()
    parts = version.split(".")
    if len(parts) == 2:
        return version, f"onnxruntime=={version}.*"
    if len(parts) == 3:
        return ".".join(parts[:2]), f"onnxruntime=={version}"
    raise SystemExit(f"bad version {version!r}: want MAJOR.MINOR, MAJOR.MINOR.PATCH or newest")


def smoke(venv: Path) -> tuple[dict | None, str]:
    """(versions, "") when the venv loads and runs a Relu model right, else (None, why)."""
    python = venv_python(venv)
    if not python.exists():
        return None, "no python"
    with tempfile.TemporaryDirectory() as tmp:
        model, inputs, outputs = (Path(tmp) / n for n in ("m.onnx", "in.npz", "out.npz"))
        model.write_bytes(SMOKE_MODEL)
        np.savez(inputs, x=np.array([-1.0, 0.0, 2.0], dtype=np.float32))
        proc = subprocess.run(
            [str(python), str(ORT_RUN), str(model), str(inputs), str(outputs)], capture_output=True, text=True
        )
        try:
            result = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return None, f"exit {proc.returncode}: {proc.stderr.strip()[-500:]}"
        if not result.get("ok"):
            return None, f"{result.get('stage')}: {result.get('error')}"
        with np.load(outputs) as out:
            if not np.array_equal(out["y"], [0.0, 0.0, 2.0]):
                return None, f"wrong output {out['y']}"
    proc = subprocess.run(
        [str(python), "-c", "import json, numpy, onnxruntime as o; "
         "print(json.dumps({'onnxruntime': o.__version__, 'numpy': numpy.__version__}))"],
        capture_output=True, text=True,
    )
    return json.loads(proc.stdout), ""


def _matches(installed: str, requirement: str) -> bool:
    wanted = requirement.split("==", 1)[1]
    return installed.startswith(wanted[:-1]) if wanted.endswith(".*") else installed == wanted


def ensure(name: str, requirement: str, force: bool = False) -> dict:
    venv = venvs_dir() / name
    marker = venv / MARKER
    if not force and marker.exists():
        versions, _ = smoke(venv)
        if versions and _matches(versions["onnxruntime"], requirement):
            info = json.loads(marker.read_text())
            return {**info, **versions, "status": "kept"}
    start = time.monotonic()
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv_python(venv)
    proc = _pip(python, "install", "-q", requirement)
    if proc.returncode:
        shutil.rmtree(venv)
        return {"release": name, "status": "failed", "error": (proc.stdout + proc.stderr).strip()[-800:]}
    pinned = False
    versions, why = smoke(venv)
    if versions is None:
        pinned = True
        proc = _pip(python, "install", "-q", "numpy<2")
        versions, why2 = smoke(venv) if proc.returncode == 0 else (None, proc.stderr.strip()[-500:])
        if versions is None:
            shutil.rmtree(venv)
            return {"release": name, "status": "failed", "error": f"{why} / with numpy<2: {why2}"}
    info = {"release": name, "requirement": requirement, **versions, "numpy_pinned": pinned, "numpy2_error": why}
    marker.write_text(json.dumps(info, indent=1) + "\n")
    return {**info, "status": f"made in {time.monotonic() - start:.0f}s"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=DEFAULT)
    parser.add_argument("--force", action="store_true", help="remake venvs that already work")
    args = parser.parse_args(argv)
    print(f"venvs in {venvs_dir()}")
    failed = 0
    for version in args.versions:
        name, requirement = resolve(version)
        info = ensure(name, requirement, args.force)
        failed += info["status"] == "failed"
        if info["status"] == "failed":
            print(f"{name:6} FAILED {info['error']}")
        else:
            if int(info["numpy"].split(".")[0]) >= 2:
                pin = "numpy 2 ok"
            else:  # either we pinned it after numpy 2 failed, or the release's metadata did
                pin = "numpy<2 (pinned here)" if info["numpy_pinned"] else "numpy<2 (its metadata)"
            print(f"{name:6} onnxruntime {info['onnxruntime']:8} numpy {info['numpy']:8} {pin:22} {info['status']}")
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
