"""Old ONNX Runtime releases as oracles: each lives in its own venv made by tools/ort_venvs.py.

``releases()`` lists the venvs that are there and passed that script's smoke test ([] when
none is: tests skip).  ``run`` and ``loads`` call the venv's python on tools/ort_run.py in
a subprocess (about half a second a call), so nothing of an old release is ever imported
here.  Outputs come back as ort_run.py encodes them: a tensor as itself under its name,
other kinds (sequences, ZipMap's list of maps) as the arrays that script's docstring
describes; ``encode`` puts the current onnxruntime's ``session.run`` results in the same
form, so the two compare key by key.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx

ORT_RUN = Path(__file__).resolve().parents[1] / "tools" / "ort_run.py"
MARKER = "rewriter-ort.json"  # written by tools/ort_venvs.py once a venv works


def venvs_dir() -> Path:
    return Path(os.environ.get("REWRITER_ORT_VENVS") or "~/.cache/rewriter/ort-venvs").expanduser()


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split("."))


def releases() -> list[str]:
    """MAJOR.MINOR of each working venv, oldest first."""
    root = venvs_dir()
    if not root.is_dir():
        return []
    found = [
        p.name
        for p in root.iterdir()
        if p.name.replace(".", "").isdigit() and (p / MARKER).is_file() and (p / "bin" / "python").exists()
    ]
    return sorted(found, key=_key)


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=True)


def _call(release: str, model, inputs: dict[str, np.ndarray] | None, timeout: float) -> dict:
    python = venvs_dir() / release / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="old-ort-") as tmp:
        tmp = Path(tmp)
        if isinstance(model, onnx.ModelProto):
            (tmp / "model.onnx").write_bytes(model.SerializeToString())
            model = tmp / "model.onnx"
        elif isinstance(model, bytes):
            (tmp / "model.onnx").write_bytes(model)
            model = tmp / "model.onnx"
        cmd = [str(python), str(ORT_RUN), str(model)]
        if inputs is not None:
            _write_npz(tmp / "in.npz", inputs)
            cmd += [str(tmp / "in.npz"), str(tmp / "out.npz")]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            stdout, stderr, why = proc.stdout, proc.stderr, f"exit status {proc.returncode}"
        except subprocess.TimeoutExpired as exc:
            stdout, stderr, why = _text(exc.stdout), _text(exc.stderr), f"timed out after {timeout}s"
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if not lines:  # onnxruntime crashed or hung: say how far it got
            stages = [line[6:] for line in stderr.splitlines() if line.startswith("stage:")]
            tail = stderr.strip()[-1000:]
            return {"ok": False, "stage": stages[-1] if stages else "load", "error": f"{why}: {tail}", "outputs": {}}
        result = {"stage": None, "error": None, **json.loads(lines[-1]), "outputs": {}}
        if result["ok"] and inputs is not None:
            with np.load(tmp / "out.npz", allow_pickle=True) as data:
                result["outputs"] = {k: data[k] for k in data.files}
        return result


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def run(release: str, model, inputs: dict[str, np.ndarray], timeout: float = 300) -> dict:
    """{"ok", "stage", "error", "ort", "kinds", "outputs": {name: array}} from ``release`` on ``inputs``.

    ``model`` is a ModelProto, its bytes, or a path (external data next to it works).
    """
    return _call(release, model, dict(inputs), timeout)


def loads(release: str, model, timeout: float = 300) -> tuple[bool, str]:
    """(True, "") when ``release`` makes an InferenceSession of ``model``, else (False, error)."""
    result = _call(release, model, None, timeout)
    return bool(result["ok"]), result.get("error") or ""


@functools.cache
def _ort_run_module():
    spec = importlib.util.spec_from_file_location("_ort_run", ORT_RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def encode(names: list[str], values: list) -> dict[str, np.ndarray]:
    """Outputs of the current onnxruntime (``session.run(names, feeds)``) in ``run``'s form."""
    out: dict[str, np.ndarray] = {}
    for name, value in zip(names, values):
        _ort_run_module()._encode(np, name, value, out)
    return out
