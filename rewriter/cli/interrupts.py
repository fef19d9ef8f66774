"""Ctrl-C (SIGINT) for the command line: exit 130 with one line, at any moment, nothing written.

Python's own handler raises ``KeyboardInterrupt`` wherever the signal lands, which can be
inside a library that turns it into an ordinary error (ONNX Runtime's session set-up reports
"initialization failed"), or inside a worker process's pool machinery. Here the handler
remembers every interrupt (:func:`pending`) and raises only while armed; a failure reported
while an interrupt is pending is reported as the interrupt (``runner._fail``).
"""

from __future__ import annotations

import contextlib
import signal

__all__ = ["install", "pending", "armed", "disarmed"]

_state = {"armed": True, "pending": False}


def _handler(signum, frame) -> None:
    _state["pending"] = True
    if _state["armed"]:
        _state["armed"] = False  # a second signal cannot land in the clean-up
        raise KeyboardInterrupt


def install(*, armed: bool) -> None:
    """Take over SIGINT for this process; ``armed`` says whether it raises right away."""
    _state["armed"] = armed
    signal.signal(signal.SIGINT, _handler)


def pending() -> bool:
    """Whether an interrupt has arrived in this process."""
    return _state["pending"]


@contextlib.contextmanager
def armed():
    """Raise ``KeyboardInterrupt`` on an interrupt inside the block (and at its start, when one
    is already pending); outside it, an interrupt is only remembered."""
    _state["armed"] = True
    try:
        if _state["pending"]:
            raise KeyboardInterrupt
        yield
    finally:
        _state["armed"] = False


@contextlib.contextmanager
def disarmed():
    """Hold interrupts inside the block (e.g. while worker processes are forked, so that they
    start with a handler that does not raise); raise on leaving it when one came."""
    before = _state["armed"]
    _state["armed"] = False
    try:
        yield
    finally:
        _state["armed"] = before
    if before and _state["pending"]:
        raise KeyboardInterrupt
