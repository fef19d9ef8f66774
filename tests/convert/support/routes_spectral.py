"""Routes of the expressibility oracle (see ``routes.py``) for DFT and STFT, which ONNX defines
without a function body. Derived from the operator docs and ``onnx.defs`` alone.

Both ops are linear in the signal. The docs define, for a DFT of length N along one axis,
``y[k] = sum_n e^{-2 pi i kn/N} x[n]`` (the inverse with ``+`` and a factor ``1/N``; a signal
longer than ``dft_length`` is cut, a shorter one zero-padded; onesided keeps the first
``floor(N/2)+1`` bins, and with inverse=1 reads them as a Hermitian spectrum, IRFFT), and STFT as
that DFT of each window-weighted frame of ``frame_length`` samples taken every ``frame_step``
samples, ``floor((length - frame_length) / frame_step) + 1`` of them. So once the signal length
along the axis, the DFT length and the flags are fixed, every output is a sum of input samples
times constants: a MatMul with a constant matrix (Reshape/Transpose around it), the frames
gathered at constant indices when the signal length is static, or a strided Conv whose filters
are the matrix's columns when it is not (Conv computes exactly that many windows). Hence:

- **DFT** is expressible when the input's rank and its last dim (1 real, 2 complex) are static;
  the axis (DFT-17's attribute, default 1; DFT-20's input, default -2) is constant and in
  ``[-r, -2] u [0, r-2]``; ``dft_length`` is absent or a constant scalar >= 1; the length along
  the axis is static, or ``dft_length`` is given (a Pad and a Slice make it that); RFFT
  (onesided, forward) has real input and IRFFT (onesided, inverse) complex input, the only
  combinations the docs define.
- **STFT** is expressible when the signal is ``[batch, length, 1|2]`` (or ``[batch, length]``, a
  real signal as ONNX Runtime reads it); ``frame_step`` is a constant scalar >= 1; ``frame_length``
  is absent or constant; the window, when given, has a static length equal to ``frame_length``
  when both are given; the frame length is known (``frame_length``, the window's length, or a
  static signal length) and at most a static signal length.
- **Ops at the target** (``onnx.defs``): Reshape, Transpose and MatMul (DFT; Pad and Slice for a
  dynamic length), Gather and MatMul or Conv (STFT; Mul for a computed window) exist there and
  their schema there allows the type the sums are taken in: float and double as themselves;
  float16 and bfloat16 in float (a float16 sum of n products strays beyond the op's tolerance),
  so Cast must exist with a numeric ``to`` (Cast-6) and, for bfloat16, allow it.
- A constant matrix beyond 2**25 elements (the converter's documented size limit) is not counted.
"""

from __future__ import annotations

import onnx
import onnx.defs

__all__ = ["ROUTES"]

LIMIT = 1 << 25
_TYPES = {onnx.TensorProto.FLOAT: "float", onnx.TensorProto.DOUBLE: "double",
          onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.BFLOAT16: "bfloat16"}


def _schema(op: str, target: int):
    try:
        return onnx.defs.get_schema(op, target, "")
    except onnx.defs.SchemaError:
        return None


def _allows(op: str, target: int, type_str: str) -> bool:
    s = _schema(op, target)
    if s is None:
        return False
    return any(type_str in c.allowed_type_strs for c in s.type_constraints if c.type_param_str == "T")


def _dims(types, name):
    t = types(name) if name else None
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim]


def _elem(types, name):
    t = types(name) if name else None
    return t.tensor_type.elem_type if t is not None and t.HasField("tensor_type") else None


def _scalar(node, index, constants, what):
    """(value or None when absent, reason or None)."""
    if index >= len(node.input) or not node.input[index]:
        return None, None
    value = constants(node.input[index])
    if value is None or value.size != 1:
        return None, f"{what} is not a constant scalar"
    return int(value.reshape(-1)[0]), None


def _ops_at_target(elem, target, compute_ops, other_ops) -> str | None:
    name = _TYPES.get(elem)
    if name is None:
        return "the data type is not float, double, float16 or bfloat16"
    compute = "float" if name in ("float16", "bfloat16") else name
    if compute != name:
        cast = _schema("Cast", target)
        if cast is None or cast.attributes["to"].type != onnx.defs.OpSchema.AttrType.INT:
            return f"{name} needs Cast with a numeric 'to' (from opset 6) to be summed in float"
        if not any(f"tensor({name})" in c.allowed_type_strs for c in cast.type_constraints):
            return f"Cast-{cast.since_version} does not take {name}"
    for op in compute_ops:
        if not _allows(op, target, f"tensor({compute})"):
            return f"{op} at opset {target} does not take {compute}"
    for op in other_ops:
        if _schema(op, target) is None:
            return f"{op} does not exist at opset {target}"
    return None


def _attr(node, name, default):
    return next((a.i for a in node.attribute if a.name == name), default)


def dft_route(node, source, target, types, constants) -> str | None:
    x = node.input[0]
    dims = _dims(types, x)
    if dims is None or len(dims) < 2:
        return "the input's rank is unknown"
    rank, channels = len(dims), dims[-1]
    if channels not in (1, 2):
        return "the input's last dim is not a static 1 or 2"
    if source >= 20:
        axis, why = _scalar(node, 2, constants, "axis")
        if why:
            return why
        axis = -2 if axis is None else axis
    else:
        axis = _attr(node, "axis", 1)
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        return "axis out of range"
    inverse, onesided = _attr(node, "inverse", 0), _attr(node, "onesided", 0)
    if onesided and (channels == 2) != bool(inverse):
        return "onesided with this input is not defined"
    length, why = _scalar(node, 1, constants, "dft_length")
    if why:
        return why
    n = dims[axis % rank]
    if n is None and length is None:
        return "the signal length along the axis is not static and no dft_length is given"
    rows = n if n is not None else length
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    if length < 1 or rows < 1:
        return "an empty DFT"
    bins = length if (inverse and onesided) or not onesided else length // 2 + 1
    if rows * channels * bins * 2 > LIMIT:
        return "the constant matrix is beyond the size limit"
    others = ["Reshape", "Transpose"] + (["Pad", "Slice"] if n is None else [])
    return _ops_at_target(_elem(types, x), target, ["MatMul"], others)


def stft_route(node, source, target, types, constants) -> str | None:
    signal = node.input[0]
    dims = _dims(types, signal)
    if dims is None or len(dims) not in (2, 3):
        return "the signal is not [batch, length, 1|2] (or [batch, length])"
    channels = dims[2] if len(dims) == 3 else 1
    if channels not in (1, 2):
        return "the signal's last dim is not a static 1 or 2"
    total = dims[1]
    step, why = _scalar(node, 1, constants, "frame_step")
    if why or step is None or step < 1:
        return why or "frame_step is not positive"
    frame, why = _scalar(node, 3, constants, "frame_length")
    if why:
        return why
    window = node.input[2] if len(node.input) > 2 and node.input[2] else None
    computed_window = False
    if window:
        value = constants(window)
        w = list(value.shape) if value is not None else _dims(types, window)
        if w is None or len(w) != 1 or w[0] is None:
            return "the window's length is not static"
        if frame is not None and frame != w[0]:
            return "the window's length differs from frame_length"
        frame = w[0]
        computed_window = value is None
    if frame is None:
        frame = total
    if frame is None or frame < 1:
        return "the frame length is not known"
    if total is not None and total < frame:
        return "the frame is longer than the signal"
    bins = frame // 2 + 1 if _attr(node, "onesided", 1) else frame
    if frame * channels * bins * 2 > LIMIT:
        return "the constant matrix is beyond the size limit"
    framing = (["MatMul"], ["Gather", "Reshape"]) if total is not None else (["Conv"], ["Reshape", "Transpose"])
    return _ops_at_target(_elem(types, signal), target, framing[0], framing[1] + (["Mul"] if computed_window else []))


ROUTES: dict = {"DFT": dft_route, "STFT": stft_route}
