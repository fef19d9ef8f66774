"""The ops whose outputs are random: never folded to a constant, never merged as repeats.

Op names of the default domain only, so both representations use the one list: the ModelProto
side and the optimizer on onnx_ir (its constant folder and its common-subexpression pass).
They are the ops with a ``seed`` attribute in some schema version of ``onnx.defs`` (a test
derives the set from there): the random generators, and Dropout, whose mask is random in
training mode (two Dropouts of one input are not one node; a training Dropout of a constant
is not a constant).
"""

from __future__ import annotations

__all__ = ["NON_DETERMINISTIC_OPS"]

NON_DETERMINISTIC_OPS: frozenset[str] = frozenset({
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
    "Dropout",
})
