"""Running a model in a runtime's own venv (tools/runtime_venvs.py) through its runner
(tools/runtime_run_<runtime>.py), for the tests of the measured targets; the test skips when the
venv is absent."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "run_in", "tool"]


def tool(name: str):
    """A module of tools/ (not a package), imported once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return module


def run_in(runtime: str, release: str, model: onnx.ModelProto, feeds: dict, timeout: float = 300) -> dict:
    """The runner's result line for ``model`` on ``feeds`` in that release ("values": its outputs
    when "ok"); skips the test when the release's venv is absent."""
    python = tool("runtime_venvs").venv_python(runtime, release)
    if python is None:
        pytest.skip(f"no {runtime} {release} venv (python tools/runtime_venvs.py {runtime}=={release})")
    runner = ROOT / "tools" / f"runtime_run_{runtime}.py"
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / n for n in ("m.onnx", "in.npz", "out.npz")]
        onnx.save(model, paths[0])
        np.savez(paths[1], **feeds)
        proc = subprocess.run([str(python), str(runner), *map(str, paths)], check=False, capture_output=True,
                              text=True, timeout=timeout)
        lines = proc.stdout.strip().splitlines()
        if not lines:  # the runtime itself crashed (a panic, a signal): no result line
            err = proc.stderr.splitlines()
            panic = [line for i, line in enumerate(err) if "panicked at" in line or i and "panicked at" in err[i - 1]]
            return {"ok": False, "stage": "crash", "error": f"the runner exited {proc.returncode}: "
                                                             f"{' '.join(panic[:2]) or proc.stderr.strip()[-300:]}"}
        result = json.loads(lines[-1])
        if result["ok"]:
            with np.load(paths[2], allow_pickle=True) as out:  # string outputs are object arrays
                result["values"] = [out[k] for k in result["outputs"]]
    return result
