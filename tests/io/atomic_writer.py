"""A child process for tests/io/test_atomic_save.py: saves a large model with
``rewriter.io.save_model`` and, at a chosen point, says so (creates the marker file) and waits
to be killed with SIGKILL.

    python tests/io/atomic_writer.py TARGET LAYOUT PAUSE MARKER

LAYOUT: ``never`` (all inline) or ``always`` (weights in TARGET.data). PAUSE: ``write`` (half of
the first big write done, the rest not), ``fsync`` (everything written, before the first
fsync), ``none`` (no pause: the parent kills it whenever it likes). The pause points only stop
the real writer where it is; they change nothing it writes.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ELEMENTS = 8 << 20  # float32: 32 MiB


def model(fill: float):
    w = numpy_helper.from_array(np.full(ELEMENTS, fill, np.float32), "w")
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ELEMENTS])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ELEMENTS])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _hold(marker: str) -> None:
    with open(marker, "w") as f:
        f.write(str(os.getpid()))
    while True:  # until SIGKILL
        time.sleep(1)


def main(target: str, layout: str, pause: str, marker: str) -> None:
    from rewriter.io import save

    if pause == "write":
        real = save._write_all

        def half_then_hold(fd, data):
            if len(data) < 1 << 20:
                return real(fd, data)
            view = memoryview(data)
            real(fd, view[:len(view) // 2])
            os.fsync(fd)  # the half is on disk whatever the page cache does with the process gone
            _hold(marker)

        save._write_all = half_then_hold
    elif pause == "fsync":
        def hold(fd):
            _hold(marker)

        save.os.fsync = hold  # the module's os: every fsync save_model makes
    elif pause == "none":
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
    save.save_model(model(2.5), target, external_data=layout)


if __name__ == "__main__":
    main(*sys.argv[1:5])
