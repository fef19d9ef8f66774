"""DFT (opsets 17 and 20) and STFT (opset 17), which ONNX defines without a function body,
decomposed into older ops for targets that lack them: the transform is a product with constant
cos/sin matrices (``spectral_matrices.py``).

- **DFT**: the axis is transposed next to the real/imaginary dim, the two are flattened together
  (Reshape), one MatMul with the ``[n * channels, bins * parts]`` matrix computes every output
  bin's real and imaginary parts, a Reshape splits them and a Transpose puts the axis back. A
  ``dft_length`` other than the signal length crops or zero-pads inside the matrix; with a
  dynamic length along the axis, a Pad by ``dft_length`` zeros and a Slice to ``dft_length``
  come first. Needs: the input's rank and its last dim (1 or 2) static, its length along the
  axis static or a ``dft_length`` given; ``dft_length`` and DFT-20's ``axis`` absent or constant.
- **STFT**: with a static signal length, the frames are gathered with a constant index matrix
  (Gather) and multiplied by the matrix (MatMul); with a dynamic one (as audio front ends export
  it), a strided Conv whose filters are the matrix's columns computes frames and transform at
  once (its output length ``floor((T - n) / step) + 1`` is STFT's frame count). A constant window
  is folded into the matrix, a computed one multiplies the frames (or the filters). Needs: a
  constant ``frame_step``, ``frame_length`` absent or constant, the window's length static, the
  frame length at most a static signal length. A rank-2 signal ``[batch, length]`` is read as a
  real one, as ONNX Runtime does (the ONNX docs define rank 3 only).

Types: float and double are computed in their own type; float16 and bfloat16 are cast to float
and the result cast back (float16 needs a target >= 6, bfloat16 one >= 13, where Cast takes
them). A double STFT of dynamic length is a double Conv: valid ONNX, but ONNX Runtime's CPU
kernels have no double Conv. Inserted nodes are written for opset 13 (Cast, Pad, Slice, Reshape,
Transpose, MatMul, Gather, Conv, Mul; the engine takes them to the target). Refused as the docs
leave them undefined: RFFT (onesided, forward) of complex input, IRFFT of real input. A declared
output dim that contradicts what the op computes is corrected (onnx 1.23's shape inference gives
an STFT without ``onesided`` ``frame_length`` bins, the default 1 computes ``frame_length//2+1``).

**Exactness.** Not bit for bit: the matrix entries are the float64 cos/sin values rounded to the
compute type, and the sums are taken in another order than an FFT's (a dot product of ``n * channels``
terms). The results equal the op's within floating-point tolerance, about ``n * eps * max|x|``
absolute (eps of the compute type); float16/bfloat16 results are rounded once, from float. A
constant window folded into the matrix rounds ``w[j] * cos`` instead of ``x[j] * w[j]``. The
matrices are refused above :data:`MAX_ELEMENTS` elements.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from rewriter.convert.decompositions import decomposition
from rewriter.convert.decompositions.spectral_matrices import conv_weights, dft_matrix
from rewriter.graph.attributes import attribute_int

__all__ = ["MAX_ELEMENTS"]

OPSET = 13
MAX_ELEMENTS = 1 << 25  # a constant matrix (or index table) larger than this is refused (128 MB of float)

_NP = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64}


class _Chain:
    """Nodes inserted one after another, each value typed (elem type, dims with None unknown)."""

    def __init__(self, ctx, value: str, elem: int, dims: list):
        self.ctx, self.value, self.elem, self.dims = ctx, value, elem, list(dims)

    def add(self, op: str, inputs, dims, elem: int | None = None, output: str | None = None, **attrs) -> str:
        node = self.ctx.insert_before(op, inputs, [output] if output else 1, **attrs)
        self.elem = self.elem if elem is None else elem
        self.dims = list(dims)
        self.ctx.set_type(node.output[0], helper.make_tensor_type_proto(self.elem, self.dims))
        self.value = node.output[0]
        return self.value

    def then(self, op: str, extra, dims, **attrs) -> str:
        return self.add(op, [self.value, *extra], dims, **attrs)


def _compute_type(ctx, name: str, what: str) -> int:
    """The type the transform is computed in for a value of ``name``'s type; blocks otherwise."""
    elem = ctx.elem_type(name)
    if elem in (TensorProto.FLOAT, TensorProto.DOUBLE):
        return elem
    if elem == TensorProto.FLOAT16:
        if ctx.final_opset is not None and ctx.final_opset < 6:
            ctx.block(f"the {what} is float16, computed in float (float16 sums of n terms stray beyond the op's "
                      f"tolerance), and Cast takes a numeric 'to' only from opset 6")
        return TensorProto.FLOAT
    if elem == TensorProto.BFLOAT16:
        if ctx.final_opset is not None and ctx.final_opset < 13:
            ctx.block(f"the {what} is bfloat16, which no op takes below opset 13 (Cast and MatMul from 13)")
        return TensorProto.FLOAT
    known = TensorProto.DataType.Name(elem).lower() if elem else "of unknown type"
    ctx.block(f"the {what} is {known}: the decomposition needs float, double, float16 or bfloat16")
    raise AssertionError  # block raises


def _scalar(ctx, node, index: int, what: str) -> int | None:
    """The int value of the optional scalar input ``index`` (None when absent); blocks when it
    is not a constant scalar."""
    if index >= len(node.input) or not node.input[index]:
        return None
    value = ctx.constant(node.input[index])
    if value is None:
        ctx.block(f"{what} input '{node.input[index]}' is not a constant (the decomposition builds constant "
                  f"matrices from it)")
    if value.size != 1:
        ctx.block(f"{what} input '{node.input[index]}' is not a scalar")
    return int(value.reshape(-1)[0])


def _size(ctx, n: int, channels: int, length: int, inverse: bool, onesided: bool) -> None:
    """Blocks when the matrix of :func:`dft_matrix` would exceed :data:`MAX_ELEMENTS` (checked
    before it is built)."""
    if inverse and onesided:
        bins, parts = length, 1
    else:
        bins, parts = (length // 2 + 1 if onesided else length), 2
    size = n * channels * bins * parts
    if size > MAX_ELEMENTS:
        ctx.block(f"the DFT matrix would hold {size} elements (the decomposition's limit is {MAX_ELEMENTS})")


def _cast_in(chain: _Chain, compute: int) -> None:
    if chain.elem != compute:
        chain.then("Cast", [], chain.dims, elem=compute, to=compute)


def _declared(ctx, output: str, dims: list) -> None:
    """Correct a static dim that the scope declares for ``output`` when it contradicts ``dims``:
    onnx's shape inference (1.23) takes STFT's absent ``onesided`` as 0 (the default is 1) and
    writes ``frame_length`` bins where STFT computes ``frame_length // 2 + 1``."""
    body = ctx.scope.body
    values = [*body.value_info] if ctx.scope.is_function else [*body.output, *body.value_info]
    for vi in values:
        if vi.name != output or not vi.type.tensor_type.HasField("shape"):
            continue
        declared = vi.type.tensor_type.shape.dim
        if len(declared) != len(dims):
            ctx.block(f"'{output}' is declared of rank {len(declared)}, but the op computes rank {len(dims)}")
        for d, want in zip(declared, dims):
            if want is not None and d.HasField("dim_value") and d.dim_value != want:
                d.dim_value = want
                ctx.record(f"{ctx.node.op_type} output's declared shape corrected to what the op computes")


def _finish(chain: _Chain, elem: int, output: str, op: str, extra, dims, **attrs) -> None:
    """The last node(s): ``op`` producing ``output``, through a Cast back when computing in float."""
    _declared(chain.ctx, output, dims)
    if chain.elem != elem:
        chain.then(op, extra, dims, **attrs)
        chain.then("Cast", [], dims, elem=elem, output=output, to=elem)
    else:
        chain.then(op, extra, dims, output=output, **attrs)


@decomposition("DFT", OPSET, reorders_sums=True)
def dft(node, ctx) -> None:
    """DFT-17/20 as Transpose/Reshape/MatMul/Reshape/Transpose with a constant matrix (see the
    module docstring for the conditions and the exactness: equal within float tolerance, the
    sums reordered)."""
    x = node.input[0]
    elem = ctx.elem_type(x)
    compute = _compute_type(ctx, x, "input")
    shape = ctx.shape(x)
    if shape is None:
        ctx.block(f"the rank of input '{x}' is unknown")
    rank = len(shape)
    channels = shape[-1] if rank >= 2 else None
    if channels not in (1, 2):
        ctx.block(f"the last dim of input '{x}' (real/imaginary parts) is {channels}, not a static 1 or 2")
    if ctx.step[0] >= 20:
        axis = _scalar(ctx, node, 2, "axis")
        axis = -2 if axis is None else axis
    else:
        axis = attribute_int(node, "axis", 1)
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        ctx.block(f"axis {axis} is out of range for input of rank {rank}")
    axis %= rank
    inverse, onesided = bool(attribute_int(node, "inverse", 0)), bool(attribute_int(node, "onesided", 0))
    if onesided and not inverse and channels == 2:
        ctx.block("onesided=1 with inverse=0 (RFFT) takes real input only, and the input is complex")
    if onesided and inverse and channels == 1:
        ctx.block("onesided=1 with inverse=1 (IRFFT) takes complex input only, and the input is real")
    n = shape[axis]
    length = _scalar(ctx, node, 1, "dft_length")
    if n is None and length is None:
        ctx.block(f"the length of input '{x}' along axis {axis} is not static and no dft_length is given (the "
                  f"DFT matrix needs one of them)")
    if n is not None and n < 1:
        ctx.block(f"the length of input '{x}' along axis {axis} is {n}")
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    if length < 1:
        ctx.block(f"dft_length is {length}")
    _size(ctx, length if n is None else n, channels, length, inverse, onesided)
    chain = _Chain(ctx, x, elem, shape)
    if n is None:  # a dynamic length: zero-padded by dft_length, then cut to it (the DFT's own crop/pad)
        padded = list(shape)
        padded[axis] = None
        pads = [0] * (2 * rank)
        pads[rank + axis] = length
        chain.then("Pad", [ctx.ints_constant("dft_pads", tuple(pads))], padded)
        padded[axis] = n = length
        chain.then("Slice", [ctx.ints_constant("dft_starts", (0,)), ctx.ints_constant("dft_ends", (length,)),
                             ctx.ints_constant("dft_axes", (axis,))], padded)
    a = dft_matrix(n, channels, length, inverse, onesided)
    bins, parts = a.shape[2], a.shape[3]
    matrix = ctx.add_constant("dft_matrix", a.reshape(n * channels, bins * parts).astype(_NP[compute]))
    _cast_in(chain, compute)
    inner = [d for i, d in enumerate(shape[:-1]) if i != axis]  # the other dims, in order
    perm = [i for i in range(rank - 1) if i != axis] + [axis, rank - 1]
    moved = perm != list(range(rank))
    if moved:
        chain.then("Transpose", [], [*inner, n, channels], perm=perm)
    flat = len(inner)
    chain.then("Reshape", [ctx.ints_constant("dft_shape", (0,) * flat + (-1,))], [*inner, n * channels])
    chain.then("MatMul", [matrix], [*inner, bins * parts])
    split = ctx.ints_constant("dft_shape", (0,) * flat + (bins, parts))
    out_dims = list(shape[:-1])
    out_dims[axis] = bins
    out_dims.append(parts)
    if moved:
        chain.then("Reshape", [split], [*inner, bins, parts])
        back = [perm.index(i) for i in range(rank)]
        _finish(chain, elem, node.output[0], "Transpose", [], out_dims, perm=back)
    else:
        _finish(chain, elem, node.output[0], "Reshape", [split], out_dims)
    for name in node.input:
        if name:
            ctx.maybe_unused(name)
    ctx.record("DFT -> MatMul with a constant DFT matrix")
    ctx.remove()


def _stft_window(ctx, node, signal: str, elem: int, total):
    """STFT's window input (None when absent), its constant value (None when computed), and the
    frame length (the window's, else frame_length, else the signal's length); blocks when one
    of them is not static or they disagree."""
    window = node.input[2] if len(node.input) > 2 and node.input[2] else None
    frame_length = _scalar(ctx, node, 3, "frame_length")
    window_value = None
    if window is not None:
        if ctx.elem_type(window) != elem:
            ctx.block(f"the window '{window}' is not of the signal's type")
        window_shape = ctx.shape(window)
        if window_shape is None or len(window_shape) != 1 or window_shape[0] is None:
            ctx.block(f"the length of the window '{window}' is not static")
        if frame_length is not None and frame_length != window_shape[0]:
            ctx.block(f"the window's length {window_shape[0]} differs from frame_length {frame_length}")
        frame_length = window_shape[0]
        window_value = ctx.constant(window)
    if frame_length is None:
        if total is None:
            ctx.block(f"neither window nor frame_length is given and the length of the signal '{signal}' is not "
                      f"static (the frame length defaults to it)")
        frame_length = total
    n = frame_length
    if n < 1:
        ctx.block(f"frame_length is {n}")
    if total is not None and total < n:
        ctx.block(f"the frame length {n} exceeds the signal's length {total}")
    return window, window_value, n


@decomposition("STFT", OPSET, reorders_sums=True)
def stft(node, ctx) -> None:
    """STFT-17 as Gather/MatMul (static signal length) or a strided Conv (dynamic one) with a
    constant matrix (see the module docstring for the conditions and the exactness: equal
    within float tolerance, the sums reordered)."""
    signal = node.input[0]
    elem = ctx.elem_type(signal)
    compute = _compute_type(ctx, signal, "signal")
    shape = ctx.shape(signal)
    if shape is None or len(shape) not in (2, 3):
        ctx.block(f"the signal '{signal}' has rank {None if shape is None else len(shape)}: the decomposition "
                  f"takes [batch, length, 1 or 2] (or [batch, length], a real signal)")
    channels = shape[2] if len(shape) == 3 else 1
    if channels not in (1, 2):
        ctx.block(f"the last dim of the signal '{signal}' is {channels}, not a static 1 or 2")
    total = shape[1]
    step = _scalar(ctx, node, 1, "frame_step")
    if step < 1:
        ctx.block(f"frame_step is {step}")
    window, window_value, n = _stft_window(ctx, node, signal, elem, total)
    onesided = bool(attribute_int(node, "onesided", 1))
    _size(ctx, n, channels, n, False, onesided)
    a = dft_matrix(n, channels, n, False, onesided)
    if window_value is not None:
        a = a * window_value.astype(np.float64)[:, None, None, None]
    bins = a.shape[2]
    frames = None if total is None else (total - n) // step + 1
    batch = shape[0]
    out_dims = [batch, frames, bins, 2]
    chain = _Chain(ctx, signal, elem, shape)
    _cast_in(chain, compute)
    computed_window = None
    if window is not None and window_value is None:
        w = _Chain(ctx, window, elem, [n])
        _cast_in(w, compute)
        computed_window = w
    if frames is not None and frames * n <= MAX_ELEMENTS:
        index = (np.arange(frames, dtype=np.int64)[:, None] * step + np.arange(n, dtype=np.int64)[None, :])
        chain.then("Gather", [ctx.add_constant("stft_frames", index)], [batch, frames, n, *shape[2:]], axis=1)
        if computed_window is not None:
            if len(shape) == 3:
                computed_window.then("Reshape", [ctx.ints_constant("stft_window_shape", (n, 1))], [n, 1])
            chain.then("Mul", [computed_window.value], chain.dims)
        if len(shape) == 3:
            chain.then("Reshape", [ctx.ints_constant("stft_shape", (0, 0, -1))], [batch, frames, n * channels])
        matrix = ctx.add_constant("stft_matrix", a.reshape(n * channels, bins * 2).astype(_NP[compute]))
        chain.then("MatMul", [matrix], [batch, frames, bins * 2])
        _finish(chain, elem, node.output[0], "Reshape", [ctx.ints_constant("stft_shape", (0, 0, bins, 2))],
                out_dims)
    else:
        if len(shape) == 3:
            chain.then("Transpose", [], [batch, channels, total], perm=[0, 2, 1])
        else:
            chain.then("Reshape", [ctx.ints_constant("stft_shape", (0, 1, -1))], [batch, 1, total])
        weights = ctx.add_constant("stft_filters", conv_weights(a).astype(_NP[compute]))
        if computed_window is not None:
            computed_window.then("Reshape", [ctx.ints_constant("stft_window_shape", (1, 1, n))], [1, 1, n])
            weights = computed_window.add("Mul", [weights, computed_window.value], [bins * 2, channels, n])
        chain.then("Conv", [weights], [batch, bins * 2, frames], kernel_shape=[n], strides=[step])
        chain.then("Reshape", [ctx.ints_constant("stft_shape", (0, bins, 2, -1))], [batch, bins, 2, frames])
        _finish(chain, elem, node.output[0], "Transpose", [], out_dims, perm=[0, 3, 1, 2])
    for name in node.input:
        if name:
            ctx.maybe_unused(name)
    ctx.record("STFT -> " + ("Gather/MatMul" if frames is not None and frames * n <= MAX_ELEMENTS else "Conv")
               + " with a constant DFT matrix")
    ctx.remove()
