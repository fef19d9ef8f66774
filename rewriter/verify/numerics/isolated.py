"""A function run in a forked child process, so that a native crash in it (ONNX Runtime
dividing an integer by zero on random inputs: SIGFPE; a segmentation fault) becomes an
exception naming the signal instead of the end of the whole process.

The child inherits the parent's memory (the model is not copied or serialized), ignores
Ctrl-C (the parent handles it, and kills the child), and sends back its result, or the
message of what it raised, pickled through a pipe. Where ``os.fork`` does not exist the
function runs in the process itself.
"""

from __future__ import annotations

import os
import pickle
import signal

__all__ = ["ChildCrashed", "run_isolated"]


class ChildCrashed(RuntimeError):
    """The child process died of a signal (or without a result)."""


def run_isolated(fn, *args):
    """``fn(*args)`` in a forked child; its result, or a RuntimeError with what it raised;
    :class:`ChildCrashed` when it died of a signal."""
    if not hasattr(os, "fork"):
        return fn(*args)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.close(read_end)
            try:
                payload = (True, fn(*args))
            except BaseException as e:  # noqa: BLE001 - sent to the parent as its message
                payload = (False, f"{type(e).__name__}: {e}" if not str(e) else str(e))
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(payload, out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # noqa: BLE001 - nothing may unwind into the parent's code
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as source:
            data = source.read()
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise ChildCrashed(f"the runtime crashed ({name})")
    if not data:
        raise ChildCrashed("the runtime exited without a result")
    ok, payload = pickle.loads(data)
    if not ok:
        raise RuntimeError(payload)
    return payload
