"""sympy is loaded on first use only in the command's own process, and then behaves as the real
module; a library user's process is left as it is (fresh processes)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_DEFERRED = r"""
import sys
from rewriter.cli.lazy_imports import _Deferred, defer_sympy
defer_sympy()
import rewriter.optimize
import onnx_ir
assert not any(k.startswith("sympy.") for k in sys.modules), "sympy loaded by the imports"
assert isinstance(sys.modules["sympy"], _Deferred)
dim = onnx_ir.SymbolicDim("N") + 1          # symbolic arithmetic loads it
import sympy, sympy.core
assert str(dim) == "N + 1" and isinstance(dim._expr, sympy.Expr) and sympy.__version__
assert onnx_ir._core.sympy.Max is sympy.Max
print("ok")
"""

_LIBRARY = r"""
import sys
import rewriter, rewriter.optimize, rewriter.optimize.pipeline
assert not any(type(m).__name__ == "_Deferred" for m in list(sys.modules.values())), "stand-ins installed"
print("ok")
"""

_COMMAND = r"""
import sys
from rewriter.cli.main import main
status = main(["optimize", sys.argv[1], "-o", sys.argv[2], "-q"])
assert status == 0, status
loaded = [k for k, m in sys.modules.items() if k == "sympy" or k.startswith("sympy.")]
assert loaded == ["sympy"] and type(sys.modules["sympy"]).__name__ == "_Deferred", loaded
print("ok")
"""


def _run(script, *args):
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "ok"


def test_sympy_is_imported_on_first_use_and_is_then_the_real_module():
    _run(_DEFERRED)


def test_importing_the_library_installs_no_stand_in_modules():
    _run(_LIBRARY)


def test_the_optimize_command_on_a_small_model_never_loads_sympy(tmp_path):
    _run(_COMMAND, os.path.join(ROOT, "models", "mixed_opset13.onnx"), str(tmp_path / "o.onnx"))


def test_the_private_onnx_ir_module_the_stand_in_replaces_still_reads_sympy():
    """onnx-ir is pinned below 1.2 for this: its private ``_symbolic_shapes`` module is stood in."""
    import importlib.util

    spec = importlib.util.find_spec("onnx_ir._symbolic_shapes")
    assert spec is not None and spec.origin
    with open(spec.origin, encoding="utf-8") as f:
        assert "import sympy" in f.read()
    import onnx_ir._core as core

    if not hasattr(core, "sympy"):
        pytest.fail("onnx_ir._core no longer reads sympy at module level: revisit rewriter/cli/lazy_imports.py")
