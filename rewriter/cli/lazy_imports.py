"""Load sympy only when a symbolic dimension expression needs it.

onnx_ir imports sympy (about 0.4 s, close to half of a whole ``rewriter optimize`` process on
a small model) for arithmetic on symbolic dims, which an optimization rarely does. Before
onnx_ir is first imported, :func:`defer_sympy` puts stand-ins for ``sympy`` and
``onnx_ir._symbolic_shapes`` (the onnx_ir module that reads sympy's attributes at import) in
``sys.modules``. The first attribute read on a stand-in imports the real module and copies
its namespace into the stand-in, so whoever holds the stand-in sees the real module from then
on: behaviour is unchanged, only the import moves to where it is first used.
(:class:`importlib.util.LazyLoader` does not help: an ``import`` statement reads ``__spec__``,
which loads the module.) Nothing happens when either module is already imported.

Only the command line calls it, first thing in its own process: importing rewriter as a library
changes nothing in the importer's ``sys.modules``. It stands in for a private onnx_ir module, so
onnx-ir is pinned below the next minor release (tests/cli/test_lazy_imports.py checks the use).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

__all__ = ["defer_sympy"]

_NAMES = ("sympy", "onnx_ir._symbolic_shapes")


class _Deferred(types.ModuleType):
    """A module that imports the real one on the first attribute it does not have."""

    def __getattr__(self, name: str):  # __path__ too: importing a submodule loads the package
        real = _load(self.__name__)
        return getattr(real, name)


def _load(name: str) -> types.ModuleType:
    stand_in = sys.modules.get(name)
    if isinstance(stand_in, _Deferred):
        del sys.modules[name]
    real = importlib.import_module(name)
    if isinstance(stand_in, _Deferred) and stand_in is not real:
        stand_in.__dict__.update(real.__dict__)
    return real


def defer_sympy() -> None:
    """Let ``sympy`` (and the onnx_ir module that reads it at import) load on first use."""
    if "onnx_ir" in sys.modules or any(name in sys.modules for name in _NAMES):
        return
    if importlib.util.find_spec("sympy") is None:
        return
    for name in _NAMES:
        module = _Deferred(name)
        module.__spec__ = None  # an import statement finding it takes it as loaded
        sys.modules[name] = module
