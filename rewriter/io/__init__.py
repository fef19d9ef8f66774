"""Model files: load (lazy weights, checked external references), save (streamed, atomic),
the protobuf wire-format helpers both use, and the tensor helpers they share."""

from rewriter.io.load import (check_model, external_data_dir, load_model, read_external_tensor, tensor_reader,
                              without_big_data)
from rewriter.io.save import check_output, output_path, parse_layout, save_model

__all__ = ["load_model", "save_model", "parse_layout", "read_external_tensor", "tensor_reader", "check_model",
           "external_data_dir", "without_big_data", "check_output", "output_path"]
