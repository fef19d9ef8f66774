"""rewriter: migrate ONNX models between opsets, fold ReduceProd constants, verify shapes.

The public API is loaded lazily so that ``import rewriter`` (and the CLI start-up) stays cheap.
"""

from __future__ import annotations

import importlib

from rewriter.errors import RewriterError

__version__ = "0.1.0"

__all__ = [
    "RewriterError",
    "convert_opset",
    "fold_constants",
    "verify_shapes",
    "verify_numerics",
    "reduce_prod",
    "ConvertOpsetPass",
    "FoldReduceProdPass",
    "VerifyShapesPass",
]

_LAZY = {
    "convert_opset": "rewriter.convert",
    "ConvertOpsetPass": "rewriter.passes",
    "fold_constants": "rewriter.fold",
    "FoldReduceProdPass": "rewriter.passes",
    "verify_shapes": "rewriter.shapes",
    "VerifyShapesPass": "rewriter.passes",
    "verify_numerics": "rewriter.numerics",
    "reduce_prod": "rewriter.kernels",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rewriter' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__ + ["__version__"])
