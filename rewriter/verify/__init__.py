"""Verification, in three subpackages by what they check:

- ``inputs/``: input validation, before any work: is this a model we accept (structure, op
  schemas, references, ReduceProd axes and flags, UTF-8 strings)? ``validate_model`` raises a
  ``RewriterError`` naming the node.
- ``shapes/``: shape checks of a model: every ReduceProd output's shape by the project's rule
  against ONNX's strict inference and the declarations (``verify_reduce_prod_shapes``, the
  ``check`` command's report).
- ``numerics/``: numerical verification of a rewrite: the original and the result run on the
  same random inputs, every output compared (``verify_numerics``).
"""
