"""Size, judged by the float tensors: of the bytes the source's float32 tensors hold
(initializers, Constant and ConstantOfShape values, in every graph, subgraph and function),
how many are stored in the half type in the result. Metadata, names and per-node attributes
are kept as they are, never dropped to meet a size: the file's ratio depends on how much of it
they are, this fraction does not. A half model is expected to halve at least
:data:`HALVED_AT_LEAST` of them; what stays float32 is named (the summary's reasons).
"""

from __future__ import annotations

import onnx

from rewriter.io.tensors import all_tensors, expected_bytes

__all__ = ["float_bytes", "halved_line", "HALVED_AT_LEAST"]

HALVED_AT_LEAST = 0.95
_FLOAT = onnx.TensorProto.FLOAT


def _bytes_by_type(model: onnx.ModelProto) -> dict[int, int]:
    """Element type -> bytes its tensors hold (from their dims: no data is read)."""
    found: dict[int, int] = {}
    for t, _ in all_tensors(model):
        size = expected_bytes(t)
        if size:
            found[t.data_type] = found.get(t.data_type, 0) + size
    return found


def float_bytes(source: onnx.ModelProto, result: onnx.ModelProto) -> tuple[int, int]:
    """(bytes of ``source``'s float32 tensors, how many of them ``result`` no longer holds in
    float32): a tensor stored in both types, or kept float32, is not halved."""
    before = _bytes_by_type(source).get(_FLOAT, 0)
    after = _bytes_by_type(result).get(_FLOAT, 0)
    return before, max(0, before - after)


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def halved_line(dtype: str, total: int, halved: int) -> str:
    """The summary's line: the fraction of float32 tensor bytes now stored in ``dtype``."""
    if not total:
        return "float32 tensors: none in the model (the size is its graph)"
    share = halved / total
    short = (f"; below {HALVED_AT_LEAST:.0%}: the nodes kept float32 above hold the rest"
             if share < HALVED_AT_LEAST else "")
    return f"float32 tensor bytes stored in {dtype}: {share:.1%} ({_size(halved)} of {_size(total)}){short}"
