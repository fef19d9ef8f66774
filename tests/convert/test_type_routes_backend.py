"""The official backend node tests of Min, Max, Clip, Pow, QuantizeLinear and DequantizeLinear
converted to the opsets below the type they use (7, 8, 9, 10, 11, and 13/19 for the 16-bit
cases), judged as test_backend.py judges them: a conversion reproduces the case's own expected
outputs (ONNX Runtime with its optimizations off, else onnx.reference) and passes the checker; a
refusal is allowed only where the oracle (tests/convert/support/expressible.py with routes_types.py)
says the case is inexpressible (or the gap is listed in test_backend.KNOWN_GAPS /
test_backend_ops.INTERMEDIATE_GAPS: per-axis QuantizeLinear at 10). On top of that, the cases each type route exists for must
convert, and the ones no exact route reaches must be refused."""

from __future__ import annotations

import pytest

from tests.convert import test_backend as backend
from tests.convert.test_backend_ops import INTERMEDIATE_GAPS
from tests.oracle import backend_cases

OPS = ("Min", "Max", "Clip", "Pow", "QuantizeLinear", "DequantizeLinear")
TARGETS = (7, 8, 9, 10, 11, 13, 19)
CASES = [c for op in OPS for c in backend_cases(op)]

_WIDE = ("int64", "uint64")
# (case, target) that must convert exactly, by an exact type route
MUST_CONVERT = {
    **{(f"test_{op}_{t}", target): "Where/Less" for op in ("min", "max") for t in _WIDE for target in (9, 10, 11)},
    **{(f"test_{op}_{t}", target): "through double" for op in ("min", "max")
       for t in ("int8", "int16", "int32", "uint8", "uint16", "uint32") for target in (7, 8, 11)},
    **{(c, target): "integer Clip" for c in ("test_clip_default_int8_min", "test_clip_default_int8_max",
                                           "test_clip_default_int8_inbounds") for target in (7, 8, 9, 10, 11)},
    **{(f"test_pow_types_{p}", target): "Pow route" for p in ("float32_int32", "int32_float32", "float32_uint32",
                                                             "int32_int32") for target in (7, 9, 11)},
    **{(f"test_quantizelinear_{t}", target): "16-bit Q" for t in ("uint16", "int16") for target in (11, 13, 19)},
    **{(f"test_dequantizelinear_{t}", target): "16-bit DQ" for t in ("uint16", "int16") for target in (10, 11, 13, 19)},
}
# (case, target) that no exact route reaches: refused, and the oracle agrees
MUST_REFUSE = {
    **{(f"test_{op}_{t}", target): "no Where below 9" for op in ("min", "max") for t in _WIDE for target in (7, 8)},
    **{(f"test_pow_types_{p}", target): "64-bit" for p in ("float32_int64", "float32_uint64", "int64_int64",
                                                          "int64_float32") for target in (7, 11)},
    **{(f"test_quantizelinear_{t}", target): "no Round below 11" for t in ("uint16", "int16") for target in (7, 10)},
    **{(f"test_dequantizelinear_{t}", target): "no DequantizeLinear below 10" for t in ("uint16", "int16")
       for target in (7, 9)},
}


def test_the_cases_are_there():
    names = {c.name for c in CASES}
    assert {name for name, _ in [*MUST_CONVERT, *MUST_REFUSE]} <= names


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", OPS)
def test_backend_cases_convert_exactly_or_are_inexpressible(op, target):
    problems = []
    for case in backend_cases(op):
        if backend.default_opset(case.model) <= target:
            continue
        outcome, detail, keys = backend._classify(case, target)
        if outcome == "refused-expressible" and keys and all(k in INTERMEDIATE_GAPS for k in keys):
            outcome = "refused-expressible (known gap)"  # an older gap the type routes do not touch
        if outcome.startswith("defect") or outcome == "refused-expressible":
            problems.append(f"{case.name} -> {target}: {outcome}: {detail} {keys or ''}")
        if (case.name, target) in MUST_CONVERT and outcome != "succeeded":
            problems.append(f"{case.name} -> {target}: must convert ({MUST_CONVERT[case.name, target]}), got "
                            f"{outcome}: {detail}")
        if (case.name, target) in MUST_REFUSE and outcome != "refused-inexpressible":
            problems.append(f"{case.name} -> {target}: must be refused ({MUST_REFUSE[case.name, target]}), got "
                            f"{outcome}: {detail}")
    assert not problems, "\n".join(problems)
