"""``Pad`` / ``negative_cropped``: a Pad with a negative pad (which removes elements) written as a
Slice that removes them, then a Pad of the rest.

Measured (tests/targets/test_pad_crops.py): tract 0.23.9 aborts on any Pad with a negative pad,
every mode, static dims or not ("ndarray: could not broadcast array from shape: [1, 6] to: [1,
0]", a panic: onnx-asr's kaldi front end pads its preemphasis by [0, 1, 0, -1] in edge mode);
the Slice and the Pad run and give ONNX Runtime's values. ONNX Runtime removes first and pads
the rest ("Pad reflect requires axis length >= 2 after slicing"), and so does this: the same
values in every mode (its test checks constant, edge and reflect against ONNX Runtime on random
pads). Pads given as an attribute (Pad before opset 11), or not constant, are left as they are.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.node_splice import splice_found
from rewriter.targets.restriction_lookups import constant_array

__all__ = ["negative_cropped"]

_END = np.iinfo(np.int64).max


def _plan(node: onnx.NodeProto, scope: traversal.Scope) -> tuple[list, np.ndarray] | None:
    """(the axes the pads are for, the pads) of a Pad with constant pads of which one is
    negative, else None. Axes are the Pad's own (opset 18's input) or all of them."""
    if node.op_type != "Pad" or not is_default_domain(node.domain) or len(node.input) < 2 or not node.input[1]:
        return None
    pads = constant_array(node.input[1], scope)
    if pads is None or pads.dtype != np.int64 or pads.ndim != 1 or pads.size % 2 or not (pads < 0).any():
        return None
    if len(node.input) > 3 and node.input[3]:
        axes = constant_array(node.input[3], scope)
        if axes is None or axes.size * 2 != pads.size:
            return None
        return [int(a) for a in axes.reshape(-1)], pads
    return list(range(pads.size // 2)), pads


def _constant(values, name: str, taken: set) -> tuple[onnx.NodeProto, str]:
    out = fresh_name(taken, name)
    return helper.make_node("Constant", [], [out], name=fresh_name(taken, out),
                            value=numpy_helper.from_array(np.asarray(values, np.int64), out)), out


def _write(node: onnx.NodeProto, plan: tuple, taken: set) -> list[onnx.NodeProto]:
    axes, pads = plan
    begin, end = pads[:len(axes)], pads[len(axes):]
    cut = [i for i in range(len(axes)) if begin[i] < 0 or end[i] < 0]
    starts = [max(-int(begin[i]), 0) for i in cut]
    ends = [int(end[i]) if end[i] < 0 else _END for i in cut]
    base = node.name or node.output[0]
    made = [_constant(v, f"{base}_crop_{what}", taken) for what, v in
            (("starts", starts), ("ends", ends), ("axes", [axes[i] for i in cut]))]
    cropped = fresh_name(taken, f"{base}_cropped")
    nodes = [m for m, _ in made]
    nodes.append(helper.make_node("Slice", [node.input[0], *(o for _, o in made)], [cropped],
                                  name=fresh_name(taken, f"{base}_crop")))
    rest = np.maximum(pads, 0)
    if not rest.any():
        nodes.append(helper.make_node("Identity", [cropped], list(node.output), name=node.name))
        return nodes
    kept, name = _constant(rest, f"{base}_pads", taken)
    pad = onnx.NodeProto()
    pad.CopyFrom(node)
    pad.input[0], pad.input[1] = cropped, name
    return nodes + [kept, pad]


def negative_cropped(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place every Pad (any scope, pads an input) with a constant negative pad; one note."""
    del inferred  # (the form is read from the pads)
    done = splice_found(model, lambda node, scope: None if scope.opset is not None and scope.opset < 11
                        else _plan(node, scope), _write)
    if not done:
        return []
    return [f"{len(done)} Pad node(s) with a negative pad written as a Slice removing those elements, then a Pad of "
            f"the rest ({release} aborts on a negative pad): {first_few(repr(n) for n in done)}"]
