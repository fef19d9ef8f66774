"""The fusion rules are tried only at nodes of their pattern's root op type: every rule's roots
are read from onnxscript (a private attribute of its rules: this fails when onnxscript changes
it), and the filtered rule set rewrites a model exactly as onnxscript's own unfiltered set does."""

from __future__ import annotations

import glob
import os

import onnx
import onnx_ir as ir
import pytest
from onnxscript.rewriter import RewriteRuleSet
from onnxscript.rewriter.rules import common as rules

from rewriter.optimize.fusions import RULE_NAMES, FusionsPass, rule_roots

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "models")


def test_every_rule_has_its_root_op_types_found():
    for name in RULE_NAMES:
        if not hasattr(rules, name):
            continue
        roots = rule_roots(getattr(rules, name))
        assert roots, name
        assert all(domain == "" and op[0].isupper() for domain, op in roots), (name, roots)


def test_roots_are_the_ops_the_rules_rewrite():
    assert rule_roots(rules.fuse_batchnorm_into_conv_rule) == {("", "BatchNormalization")}
    assert rule_roots(rules.matmul_add_to_gemm_rule) == {("", "Add")}
    assert rule_roots(rules.transpose_transpose_rule) == {("", "Transpose")}
    assert rule_roots(object()) is None


def _graph_text(model: ir.Model) -> str:
    return str(ir.serde.serialize_model(model).graph)


def _export_like():
    """A model with work for many rules: Transpose pairs, Cast chains, Add 0, Mul 1, MatMul+Add,
    Min/Max clamps, Reshape pairs, Dropout, Identity-like Expand."""
    return onnx.parser.parse_model("""<ir_version: 8, opset_import: ["": 13]>
        g (float[4, 8] x, float[8, 6] w, float[6] b) => (float[6, 4] y, float[4, 6] z) {
            zero = Constant<value = float {0.0}>()
            one = Constant<value = float {1.0}>()
            lo = Constant<value = float {-1.0}>()
            hi = Constant<value = float {1.0}>()
            shape = Constant<value = int64[2] {24, 2}>()
            back = Constant<value = int64[2] {4, 12}>()
            t1 = Transpose<perm = [1, 0]>(x)
            t2 = Transpose<perm = [1, 0]>(t1)
            a0 = Add(t2, zero)
            m1 = Mul(a0, one)
            c1 = Cast<to = 11>(m1)
            c2 = Cast<to = 1>(c1)
            d = Dropout(c2)
            r1 = Reshape(d, shape)
            r2 = Reshape(r1, back)
            again = Constant<value = int64[2] {4, 8}>()
            r3 = Reshape(r2, again)
            mm = MatMul(r3, w)
            g = Add(mm, b)
            mn = Min(g, hi)
            z = Max(mn, lo)
            y = Transpose<perm = [1, 0]>(z)
        }""")


@pytest.mark.parametrize("source", ["export_like", *sorted(glob.glob(os.path.join(MODELS, "*.onnx")))])
def test_the_filtered_rules_rewrite_as_onnxscripts_own_rule_set(source):
    proto = _export_like() if source == "export_like" else onnx.load(source)
    ours, theirs = ir.serde.deserialize_model(proto), ir.serde.deserialize_model(proto)
    applied = FusionsPass()(ours)
    reference = RewriteRuleSet([getattr(rules, n) for n in RULE_NAMES if hasattr(rules, n)])
    reference.remove_unused_nodes = False
    count = reference.apply_to_model(theirs)
    assert bool(count) == applied.modified
    assert _graph_text(ours) == _graph_text(theirs)
    if source == "export_like":
        assert count >= 3
