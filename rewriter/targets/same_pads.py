"""``auto_pad`` SAME written as explicit pads where they do not depend on the input's size
(``rewrite_forms`` form ``same_pads_explicit``; TVM 0.27's data).

TVM 0.27's Relax ONNX frontend computes a MaxPool's or AveragePool's SAME_UPPER / SAME_LOWER pads
from the input's spatial dims as integers, and refuses a symbolic one ("int() argument must be a
string, a bytes-like object or a real number, not 'Var'"; PP-OCRv6_rec_small's MaxPool.0 over
its width). With every stride 1 the ONNX spec's pads do not depend on the dim: the output has the
input's size and the total pad of an axis is its kernel size less one, split with the odd one at
the end (SAME_UPPER) or at the start (SAME_LOWER). Such a pool gets those pads and ``auto_pad``
NOTSET: the same values, whatever the input's size. Not with a dilation: ONNX Runtime pads a
dilated SAME pool by the kernel size (its output is smaller than the input), the spec (and TVM)
by the dilated extent.
"""

from __future__ import annotations

import onnx
from onnx import helper

from rewriter.graph import traversal
from rewriter.graph.names import first_few
from rewriter.graph.schemas import is_default_domain

__all__ = ["POOLS", "explicit_pads"]

POOLS = ("MaxPool", "AveragePool")


def _pads(node: onnx.NodeProto) -> list[int] | None:
    """The explicit pads of ``node`` (a pool with auto_pad SAME_*, strides and dilations 1), else None."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    mode = attrs.get("auto_pad", b"NOTSET")
    kernel = attrs.get("kernel_shape")
    if mode not in (b"SAME_UPPER", b"SAME_LOWER") or not kernel:
        return None
    if any(s != 1 for s in [*attrs.get("strides", []), *attrs.get("dilations", [])]):
        return None
    totals = [k - 1 for k in kernel]
    begins = [t // 2 if mode == b"SAME_UPPER" else t - t // 2 for t in totals]
    return begins + [t - b for t, b in zip(totals, begins)]


def explicit_pads(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each pool of ``POOLS`` with auto_pad SAME_*, strides and dilations 1 (module docstring)."""
    del inferred
    done = []
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            if node.op_type not in POOLS or not is_default_domain(node.domain):
                continue
            pads = _pads(node)
            if pads is None:
                continue
            kept = [a for a in node.attribute if a.name not in ("auto_pad", "pads")]
            del node.attribute[:]
            node.attribute.extend([*kept, helper.make_attribute("pads", pads)])
            done.append(node.name or node.output[0])
    if not done:
        return []
    return [(f"{len(done)} pool(s) with auto_pad SAME and strides 1 given their pads (the same whatever the input's "
             f"size), which {release} reads on symbolic dims: {first_few(repr(n) for n in done)}")]
