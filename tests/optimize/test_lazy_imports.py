"""sympy is loaded on first use only, and then behaves as the real module (a fresh process)."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = r"""
import sys
import rewriter.optimize
import onnx_ir
from rewriter.optimize.lazy_imports import _Deferred
assert not any(k.startswith("sympy.") for k in sys.modules), "sympy loaded by the imports"
assert isinstance(sys.modules["sympy"], _Deferred)
dim = onnx_ir.SymbolicDim("N") + 1          # symbolic arithmetic loads it
import sympy, sympy.core
assert str(dim) == "N + 1" and isinstance(dim._expr, sympy.Expr) and sympy.__version__
assert onnx_ir._core.sympy.Max is sympy.Max
print("ok")
"""


def test_sympy_is_imported_on_first_use_and_is_then_the_real_module():
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
