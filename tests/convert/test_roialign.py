"""RoiAlign across 16 (coordinate_transformation_mode, default half_pixel)."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import TensorProto, cases, converts, helper, model, np, refused, run_backend_case

RNG = np.random.default_rng(0)
FEEDS = {"x": RNG.normal(size=[1, 2, 8, 8]).astype(np.float32),
         "rois": np.array([[0, 0, 4, 4], [1.5, 2, 7, 6.5]], dtype=np.float32),
         "idx": np.array([0, 0], dtype=np.int64)}


def _roi(opset, **attrs):
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], name="roi", output_height=2, output_width=2,
                            **attrs)
    return model([node], opset, [("x", TensorProto.FLOAT, [1, 2, 8, 8]), ("rois", TensorProto.FLOAT, [2, 4]),
                                 ("idx", TensorProto.INT64, [2])], [("y", TensorProto.FLOAT, [2, 2, 2, 2])])


def test_up_keeps_the_old_behaviour():
    result, _ = converts(_roi(10), 16, FEEDS, rtol=1e-5)
    assert result.graph.node[0].attribute[-1].s == b"output_half_pixel"


@pytest.mark.parametrize("attrs", [{}, {"coordinate_transformation_mode": "half_pixel"}])
def test_half_pixel_is_refused_below_16(attrs):
    refused(_roi(16, **attrs), 13, "'roi'", "16 -> 10", "half_pixel")


def test_output_half_pixel_goes_down():
    result, _ = converts(_roi(16, coordinate_transformation_mode="output_half_pixel"), 13, FEEDS, rtol=1e-5)
    assert not any(a.name == "coordinate_transformation_mode" for a in result.graph.node[0].attribute)


@pytest.mark.parametrize("case", cases("RoiAlign"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
