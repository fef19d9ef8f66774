"""Exact routes the expressibility oracle (``expressible.py``) counts for nodes that its rules
would call inexpressible: decompositions of ops ONNX defines without a function body, and type
routes for older schemas lacking a type. Each route is derived here from ``onnx.defs`` and the
operator docs, independently of ``rewriter.convert``.

A route ``fn(node, source, target, types, constants)`` returns None when the node is expressible
at ``target`` by it, else a reason (then the oracle's own rules decide, and its reason is kept).
"""

from __future__ import annotations

from tests.convert.support.routes_einsum import ROUTES as _EINSUM
from tests.convert.support.routes_spectral import ROUTES as _SPECTRAL
from tests.convert.support.routes_types import ROUTES as _TYPES

__all__ = ["ROUTES"]

ROUTES: dict = {}
for _part in (_EINSUM, _SPECTRAL, _TYPES):
    for _op, _fn in _part.items():
        ROUTES.setdefault(_op, []).append(_fn)
