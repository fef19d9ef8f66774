"""What the engine decides per (op, opset, target) before looking at a node (rewriter.convert.paths):
how its nodes start, and whether every one of them is kept without a look (a Keep), checked
case by case and, over every op, against onnx.defs read here."""

from __future__ import annotations

import itertools

import onnx
import onnx.defs
import pytest

from rewriter.convert import paths, registry, steps
from rewriter.convert.paths import Keep
from tests.convert.test_coverage import _signature

LATEST = onnx.defs.onnx_opset_version()


def _keep(op, opset, target, lacks=None):
    how = paths.start(op, opset, target, lacks)
    return paths.keep_without_looking(op, how, *(paths.path(op, opset, target) if how.what == "steps" else ((), [])))


@pytest.mark.parametrize("op, opset, target, expected", [
    ("Relu", 14, 15, Keep.NO_STEPS),  # Relu-14 is the schema at 15 too
    ("Relu", 18, 14, Keep.NO_STEPS),
    ("Relu", 13, 14, Keep.TYPE_ONLY),  # 14 added integer types
    ("Relu", 6, 18, Keep.TYPE_ONLY),
    ("Relu", 14, 13, Keep.LOOK),  # down: an int8 Relu cannot go, a float one can
    ("ReduceMean", 13, 18, Keep.LOOK),  # the axes attribute becomes an input
    ("MeanVarianceNormalization", 13, 13, Keep.LOOK),  # no step, but a normalizer to run
    ("LayerNormalization", 17, 13, Keep.LOOK),  # expanded into its function body
    ("GroupNormalization", 21, 18, Keep.LOOK),  # only deprecated at 18: expanded
    ("Gelu", 13, 21, Keep.LOOK),  # not at the model's opset: refused
    ("NoSuchOp", 13, 18, Keep.LOOK),
])
def test_keep_decisions(op, opset, target, expected):
    assert _keep(op, opset, target) is expected


def test_a_runtime_that_lacks_the_op_makes_every_node_looked_at():
    assert _keep("Relu", 13, 14) is Keep.TYPE_ONLY
    assert _keep("Relu", 13, 14, lacks=lambda domain, op, v: (domain, op, v) == ("", "Relu", 14)) is Keep.LOOK
    assert _keep("Relu", 14, 15, lacks=lambda domain, op, v: False) is Keep.NO_STEPS


@pytest.mark.parametrize("op, opset, target, what, src", [
    ("NoSuchOp", 13, 18, "unknown", None),
    ("Gelu", 13, 21, "missing", None),
    ("LayerNormalization", 17, 13, "expand", 17),
    ("GroupNormalization", 21, 18, "expand", 21),
    ("ReduceMean", 13, 18, "steps", 13),
    ("Relu", 15, 18, "steps", 14),
])
def test_how_nodes_start(op, opset, target, what, src):
    how = paths.start(op, opset, target)
    assert (how.what, how.src) == (what, src)
    assert how.normalizer is None
    assert paths.start("MeanVarianceNormalization", 13, 13).normalizer is not None
    assert paths.start("Relu", 13, 14, lambda domain, op, v: True).what == "expand"


# ---------------------------------------------------------------- every op, against onnx.defs

def _since(op, opset):
    try:
        return onnx.defs.get_schema(op, opset, "").since_version
    except onnx.defs.SchemaError:
        return None


def _allowed(schema, which, i):
    formals = schema.inputs if which == "input" else schema.outputs
    if not formals:
        return None
    p = formals[min(i, len(formals) - 1)]
    for c in schema.type_constraints:
        if c.type_param_str == p.type_str:
            return set(c.allowed_type_strs)
    return {p.type_str}


def _widens(op, a, b):
    """Schema ``b`` allows, for every formal, every type schema ``a`` does (read from onnx.defs)."""
    sa, sb = onnx.defs.get_schema(op, a, ""), onnx.defs.get_schema(op, b, "")
    for which in ("input", "output"):
        count = max(len(getattr(sa, which + "s")), len(getattr(sb, which + "s")))
        for i in range(count):
            ta, tb = _allowed(sa, which, i), _allowed(sb, which, i)
            if ta is None or tb is None or not ta <= tb:
                return False
    return True


def _expanded(op, src, dst):
    """Going down to a schema that is only deprecated, from one with a function body."""
    if dst >= src or not onnx.defs.get_schema(op, dst, "").deprecated:
        return False
    schema = onnx.defs.get_schema(op, src, "")
    return bool(schema.function_opset_versions or schema.context_dependent_function_opset_versions)


def _versions(op):
    return sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == ""})


OPSETS = (1, 7, 11, 13, 17, 18, 21, LATEST)


@pytest.mark.parametrize("op", registry.all_ops())
def test_keep_over_every_op_agrees_with_the_schemas(op):
    versions = _versions(op)
    for opset, target in itertools.product(OPSETS, OPSETS):
        keep = _keep(op, opset, target)
        src, dst = _since(op, opset), _since(op, target)
        plain = src is not None and dst is not None and not _expanded(op, src, dst) and registry.normalizer(op) is None
        assert (keep is Keep.NO_STEPS) == (plain and src == dst), (op, opset, target, keep)
        if not plain or src == dst:
            assert keep is not Keep.TYPE_ONLY, (op, opset, target)
            continue
        i, j = versions.index(src), versions.index(dst)
        between = [(versions[k], versions[k + 1]) for k in range(i, j)] if i < j else \
            [(versions[k], versions[k - 1]) for k in range(i, j, -1)]
        kept_anyway = all(
            registry.lookup(op, a, b) is None and _signature(op, a) == _signature(op, b) and _widens(op, a, b)
            and tuple(sorted((a, b))) not in {(lo, hi) for o, lo, hi in steps.MEANING_CHANGED if o == op}
            for a, b in between)
        assert (keep is Keep.TYPE_ONLY) == kept_anyway, (op, opset, target, keep, between)
