"""Einsum (opset 12) decomposed into Transpose/Reshape/MatMul/Mul/ReduceSum for older targets.

(Not written yet: nothing is registered, so Einsum below 12 is refused.)
"""

from __future__ import annotations

__all__: list[str] = []
