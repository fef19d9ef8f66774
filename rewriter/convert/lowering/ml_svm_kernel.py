"""The kernel of ``ai.onnx.ml`` SVMs as ONNX Runtime computes it (``svmclassifier.h``,
``SVMCommon::batched_kernel_dot``), and SVMRegressor (``svmregressor.cc``) on top of it.

LINEAR, POLY and SIGMOID are one Gemm (X times the support vectors transposed, alpha = gamma and C =
coef0 for POLY and SIGMOID, C left out when it is 0, as the kernel passes it), then for POLY the
square (degree 2), cube (3) or power, for SIGMOID Tanh (ONNX Runtime's Tanh calls the same MLAS
routine): bit-identical in ONNX Runtime. RBF sums (x - sv)^2 over the features left to right in
float (CumSum, whose last element is that running sum), then exp(-gamma * sum): exp is the runtime's
(ONNX Runtime's Exp against the C library's expf), so kernel values agree within a few ulp."""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering.emit import F32
from rewriter.convert.lowering.ml_linear import as_rows
from rewriter.convert.lowering.registry import lowering

__all__ = ["KERNELS", "SvmKernel", "kernel_values", "svm_input"]

KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")
GEMM_EXACT = "Gemm as onnxruntime's kernel calls it: bit-identical in onnxruntime while the summed dimension is at " \
             "most 256 (beyond, its Gemm op packs the constant B and blocks the sum otherwise: measured relative " \
             "error ~1e-7); other runtimes sum the products in their own order (relative error ~ terms x 2^-24)"
RBF_TOL = "RBF: exp is the runtime's (within a few ulp of onnxruntime's expf); the squares are summed in the " \
          "kernel's order"
POLY_TOL = "POLY of a degree other than 0 to 3: onnxruntime's Eigen pow raises the values its SIMD packets hold by " \
           "repeated squaring (as written here) and the few left over by the C library's powf (measured: 1 ulp " \
           "apart on 2 of 54 values), so the kernel values agree within an ulp"


class SvmKernel:
    """kernel_type and kernel_params as the kernel reads them (no params: gamma = coef0 = degree = 0)."""

    def __init__(self, ctx, linear: bool = False):
        kind = "LINEAR" if linear else ctx.attr("kernel_type", "LINEAR")
        if kind not in KERNELS:
            kind = "SIGMOID"  # onnxruntime's MakeKernel: any other name is SIGMOID
        params = ctx.floats("kernel_params")
        if "kernel_params" not in ctx.attrs:
            ctx.block("no kernel_params (onnxruntime refuses the node)")
        if len(params) and len(params) < 3:
            ctx.block(f"kernel_params has {len(params)} values: onnxruntime reads gamma, coef0 and degree")
        self.kind = kind
        self.gamma, self.coef0, self.degree = (params[:3] if len(params) else np.zeros(3, np.float32))

    @property
    def exactness(self) -> str:
        if self.kind == "POLY" and float(self.degree) not in (0.0, 1.0, 2.0, 3.0):
            return f"{POLY_TOL}; {GEMM_EXACT}"
        return RBF_TOL if self.kind == "RBF" else GEMM_EXACT


def svm_input(ctx, x: str, features: int) -> str:
    """X as [N, features]: rank 1 is one row; rank > 2 is refused."""
    return as_rows(ctx, x, features, f"the model's vectors have {features} features")


def _gemm(e, x: str, b: np.ndarray, c: float, alpha: float = 1.0) -> str:
    inputs = [x, e.const(b, hint="vectors")]
    if c != 0:
        inputs.append(e.const(np.array([c], np.float32), hint="c"))
    attrs = {"alpha": float(alpha)} if alpha != 1 else {}
    return e.op("Gemm", inputs, transB=1, **attrs)


def kernel_values(e, kernel: SvmKernel, x: str, vectors: np.ndarray, scalar_c: float = 0.0) -> str:
    """batched_kernel_dot: [N, V] kernel values of X [N, F] against ``vectors`` [V, F]; ``scalar_c``
    is the constant the LINEAR kernel adds (0: none)."""
    if kernel.kind == "RBF":
        diff = e.op("Sub", [e.unsqueeze(x, [1]), e.const(vectors, hint="vectors")])
        sums = e.op("CumSum", [e.op("Mul", [diff, diff]), e.const(np.array(2, np.int64), hint="axis")])
        total = e.op("Gather", [sums, e.const(np.array(-1, np.int64), hint="last")], axis=2)
        return e.op("Exp", [e.op("Mul", [e.const(np.float32(-kernel.gamma), hint="minus_gamma"), total])])
    if kernel.kind == "LINEAR":
        return _gemm(e, x, vectors, scalar_c)
    dot = _gemm(e, x, vectors, kernel.coef0, kernel.gamma)
    if kernel.kind == "SIGMOID":
        return e.op("Tanh", [dot])
    return _power(e, dot, float(kernel.degree))


def _power(e, x: str, degree: float) -> str:
    """Eigen's pow by a scalar as onnxruntime 1.32 computes it in its SIMD packets (measured): an
    integer exponent of magnitude below 8 by repeated squaring (a negative one on the reciprocal; 0
    gives 1), any other through the runtime's Pow (within a few ulp). The values left over after the
    last packet take the C library's powf, which differs by an ulp at degrees above 3 (POLY_TOL)."""
    if degree != int(degree) or abs(degree) >= 8:
        return e.op("Pow", [x, e.const(np.float32(degree), hint="degree")])
    n = int(degree)
    if n == 0:
        return e.op("Expand", [e.const(np.float32(1), hint="one"), e.op("Shape", [x])])
    y = e.op("Reciprocal", [x]) if n < 0 else x
    result, m = None, abs(n)
    while m > 1:
        if m % 2:
            result = y if result is None else e.op("Mul", [result, y])
        y, m = e.op("Mul", [y, y]), m // 2
    return y if result is None else e.op("Mul", [result, y])


@lowering("SVMRegressor", exactness=GEMM_EXACT)
def svm_regressor(ctx) -> None:
    """Y = kernel values times the coefficients plus rho[0] (one Gemm, as the kernel's); without
    support vectors X times the coefficients (+ rho[0] when not 0); one_class: 1 where Y > 0, else -1.
    post_transform is ignored, as the kernel ignores it."""
    ctx.known("coefficients", "kernel_params", "kernel_type", "n_supports", "one_class", "post_transform", "rho",
              "support_vectors")
    ctx.input_elem({F32: "float"})
    coef, rho, vectors = ctx.floats("coefficients"), ctx.floats("rho"), ctx.floats("support_vectors")
    count = int(ctx.attr("n_supports", 0))
    if not len(coef) or not len(rho):
        ctx.block("coefficients and rho must not be empty (onnxruntime refuses the node)")
    e = ctx.emit
    if count > 0:
        if len(vectors) % count or not len(vectors) or len(coef) < count:
            ctx.block(f"{len(vectors)} support vector values and {len(coef)} coefficients do not fit "
                      f"n_supports={count}")
        kernel = SvmKernel(ctx)
        x = svm_input(ctx, ctx.node.input[0], len(vectors) // count)
        values = kernel_values(e, kernel, x, vectors.reshape(count, -1))
        y = e.op("Gemm", [values, e.const(coef[:count].reshape(1, count), hint="coefficients"),
                          e.const(rho[:1], hint="rho")], transB=1)
    else:
        kernel = SvmKernel(ctx, linear=True)
        x = svm_input(ctx, ctx.node.input[0], len(coef))
        y = kernel_values(e, kernel, x, coef.reshape(1, -1), float(rho[0]))
    ctx.exactness = kernel.exactness
    if int(ctx.attr("one_class", 0)):
        y = e.op("Where", [e.op("Greater", [y, e.const(np.float32(0), hint="zero")]),
                           e.const(np.float32(1), hint="one"), e.const(np.float32(-1), hint="minus_one")])
    e.identity(y, ctx.node.output[0])
