"""Verification: the ReduceProd shape rule, ONNX shape inference around it, the shape report,
numerical comparison of two models, and structural validation of inputs."""
