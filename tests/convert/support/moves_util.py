"""Helpers for the attribute<->input move tests: backend cases with their non-data inputs
made constants (initializers), so that the downward steps can move them to attributes."""

from __future__ import annotations

import types

import onnx
from onnx import numpy_helper

from tests.convert.support.feature_util import _array


def constantized(case, keep=1):
    """``case`` with every graph input after the first ``keep`` turned into an initializer
    holding the case's own data (None when there is nothing to turn)."""
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    inputs, expected = case.data_sets[0]
    if len(m.graph.input) <= keep:
        return None
    kept = list(m.graph.input)[:keep]
    for vi, value in list(zip(m.graph.input, inputs))[keep:]:
        m.graph.initializer.append(numpy_helper.from_array(_array(value), vi.name))
    del m.graph.input[:]
    m.graph.input.extend(kept)
    if m.ir_version < 4:
        m.ir_version = 4
    return types.SimpleNamespace(name=case.name + "_const", model=m, data_sets=[(list(inputs)[:keep], expected)])
