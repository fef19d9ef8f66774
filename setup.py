"""Build script for the native ReduceProd kernel (rewriter.kernels._native).

Project metadata lives in pyproject.toml; this file only declares the C extension.
No -march flags: the hot loops carry GCC target_clones (avx512f/avx2/default) that
are picked at run time, and -ffp-contract=off keeps every multiply a separately
rounded IEEE operation (the kernel's error bounds rely on it).
"""

import sys

import numpy
from setuptools import Extension, setup

if sys.platform == "win32":
    compile_args = ["/O2", "/fp:strict"]
    link_args = []
else:
    compile_args = ["-O3", "-ffp-contract=off", "-fno-strict-aliasing", "-std=gnu11", "-Wno-psabi"]
    link_args = ["-pthread"]

setup(
    ext_modules=[
        Extension(
            "rewriter.kernels._native",
            sources=["rewriter/kernels/_native.c"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
        )
    ],
)
