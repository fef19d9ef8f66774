"""Random valid Einsum equations and shapes (1-3 operands, repeated labels, size-1 broadcasts,
ellipses, implicit and explicit outputs, symbolic dims), converted below 12 and run in ONNX
Runtime against numpy.einsum."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

from rewriter.convert import convert_model
from tests.convert.support.einsum_util import NP, close, einsum_model, oracle, ort_run
from tests.oracle import assert_valid

POOL = "abcdAB"


@st.composite
def einsum_cases(draw):
    sizes = {c: draw(st.integers(1, 4)) for c in POOL}
    width = draw(st.integers(0, 2))
    ellipsis_sizes = [draw(st.integers(1, 3)) for _ in range(width)]
    use_ellipsis = draw(st.booleans())
    terms, shapes, declared = [], [], []
    for _ in range(draw(st.integers(1, 3))):
        labels = draw(st.lists(st.sampled_from(POOL), max_size=4))
        ones = {c: draw(st.booleans()) and draw(st.booleans()) for c in set(labels)}  # a size-1 broadcast
        shape = [1 if ones[c] else sizes[c] for c in labels]
        has = use_ellipsis and draw(st.booleans())
        at = draw(st.integers(0, len(labels))) if has else 0
        term = "".join(labels)
        if has:
            term = term[:at] + "..." + term[at:]
            shape[at:at] = [1 if draw(st.booleans()) and draw(st.booleans()) else s for s in ellipsis_sizes]
        symbolic = [draw(st.booleans()) and d != 1 and labels.count(c) == 1
                    for d, c in zip(shape, (labels[:at] + ["."] * (width if has else 0) + labels[at:]))]
        terms.append(term)
        shapes.append(tuple(shape))
        declared.append([f"d{len(declared)}_{i}" if s else d for i, (d, s) in enumerate(zip(shape, symbolic))])
    any_ellipsis = any("..." in t for t in terms)
    letters = sorted({c for t in terms for c in t if c != "."})
    if draw(st.booleans()):
        output = draw(st.permutations(draw(st.lists(st.sampled_from(letters), unique=True)) if letters else []))
        out = "".join(output)
        if any_ellipsis and (width or draw(st.booleans())):
            at = draw(st.integers(0, len(out)))
            out = out[:at] + "..." + out[at:]
        equation = ",".join(terms) + "->" + out
    else:
        equation = ",".join(terms)
    elem = draw(st.sampled_from([TensorProto.DOUBLE, TensorProto.DOUBLE, TensorProto.FLOAT, TensorProto.INT64]))
    target = draw(st.sampled_from([11, 11, 11, 9, 7]))
    return equation, shapes, declared, elem, target


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(einsum_cases(), st.integers(0, 2**32 - 1))
def test_random_equations(case, seed):
    equation, shapes, declared, elem, target = case
    rng = np.random.default_rng(seed)
    dtype = NP[elem]
    arrays = [rng.integers(-3, 4, size=s).astype(dtype) if elem == TensorProto.INT64
              else rng.normal(size=s).astype(dtype) for s in shapes]
    expected = np.einsum(equation, *arrays)
    m = einsum_model(equation, declared, elem, out_rank=expected.ndim)
    assert oracle(m, target) is None
    result, _ = convert_model(m, target)
    assert_valid(result)
    assert "Einsum" not in [n.op_type for n in result.graph.node]
    got = ort_run(result, {f"x{i}": a for i, a in enumerate(arrays)})[0]
    close(np.asarray(expected, dtype=dtype), got, dtype)
