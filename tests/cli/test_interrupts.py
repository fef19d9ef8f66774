"""Ctrl-C at any moment: exit 130, one line, nothing written, and in directory mode a true count.

Oracles: the process's exit status and stderr as a terminal shows them, and the file system
(what is in the output directory, what temporary files are left)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import onnx
import pytest

from rewriter.cli import interrupts
from rewriter.cli import runner


def test_an_interrupt_outside_an_armed_block_is_held(sigint_handler):
    interrupts.install(armed=False)
    interrupts._state["pending"] = False
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.01)  # the handler runs between bytecodes of the main thread
    assert interrupts.pending()
    with pytest.raises(KeyboardInterrupt):  # the next file does not start
        with interrupts.armed():
            pytest.fail("the block ran though an interrupt was pending")


def test_an_interrupt_inside_an_armed_block_raises_there(sigint_handler):
    interrupts.install(armed=False)
    interrupts._state["pending"] = False
    reached = False
    with pytest.raises(KeyboardInterrupt):
        with interrupts.armed():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):
                time.sleep(0)
            reached = True
    assert not reached and not interrupts._state["armed"]


def test_a_held_interrupt_raises_when_the_disarmed_block_ends(sigint_handler):
    interrupts.install(armed=True)
    interrupts._state["pending"] = False
    done = False
    with pytest.raises(KeyboardInterrupt):
        with interrupts.disarmed():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            done = True  # the block itself is not cut short
    assert done


def test_a_failure_reported_while_an_interrupt_is_pending_is_the_interrupt(sigint_handler, capsys):
    # a library may turn KeyboardInterrupt into its own error (ONNX Runtime: "initialization failed")
    interrupts._state["pending"] = True
    with pytest.raises(KeyboardInterrupt):
        runner._fail(None, "ONNX Runtime cannot load the result: initialization failed", runner.EXIT_PROBLEM)
    assert capsys.readouterr().err == ""
    interrupts._state["pending"] = False
    assert runner._fail(None, "bad", runner.EXIT_ERROR) == runner.EXIT_ERROR
    assert capsys.readouterr().err == "error: bad\n"


def test_an_interrupt_while_a_temporary_file_is_made_leaves_nothing(tmp_path, monkeypatch):
    from rewriter.io import save as save_module

    real_open = os.open

    def open_then_interrupt(path, flags, mode=0o777):
        fd = real_open(path, flags, mode)
        if os.path.basename(path).startswith(".rewriter-"):
            os.close(fd)
            raise KeyboardInterrupt  # the file exists; the caller never saw its descriptor
        return fd

    monkeypatch.setattr(save_module.os, "open", open_then_interrupt)
    model = onnx.load("models/mixed_opset13.onnx")
    with pytest.raises(KeyboardInterrupt):
        save_module.save_model(model, str(tmp_path / "out.onnx"))
    assert os.listdir(tmp_path) == []


def _wait_for_numpy(proc) -> None:
    """Until the process has loaded numpy's extension (it is importing onnx: the libraries load;
    before that it is the interpreter's own start-up, which no program can make quiet)."""
    deadline = time.time() + 30
    while time.time() < deadline and proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/maps") as f:
                if "_multiarray_umath" in f.read():
                    return
        except OSError:
            return
        time.sleep(0.005)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to see the libraries load")
@pytest.mark.parametrize("delay", [0.0, 0.1, 0.3, 0.6])
def test_ctrl_c_at_any_moment_of_a_single_file_command(tmp_path, delay):
    out = tmp_path / "o.onnx"
    proc = subprocess.Popen([sys.executable, "-m", "rewriter", "convert", "models/mixed_opset13.onnx",
                             "--opset", "18", "-o", str(out), "--verify"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_for_numpy(proc)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the command finished before the interrupt arrived")
    assert proc.returncode == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted"), err
    if out.exists():  # it came as the write ended: the message says so, and the file is whole
        assert lines[0] == f"error: interrupted after {out} was written"
        onnx.checker.check_model(str(out))
    else:
        assert lines[0] == "error: interrupted; nothing was written"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".rewriter-")]


def test_an_interrupted_check_does_not_speak_of_writing(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "rewriter", "check", "models/mixed_opset13.onnx"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_for_numpy(proc)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the command finished before the interrupt arrived")
    assert proc.returncode == 130 and err == "error: interrupted\n", err


# ---------------------------------------------------------------- what was written, not when (issue 39)

def _interrupt_at(monkeypatch, where: str) -> None:
    """Ctrl-C just before the output's write begins ("before"), or just as it ends ("after": the
    new file renamed into place, the interrupt landing before the command learns it returned)."""
    from rewriter import io as rewriter_io

    real = rewriter_io.save_model

    def save(*args, **kwargs):
        if where == "before":
            raise KeyboardInterrupt
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(rewriter_io, "save_model", save)


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_interrupt_message_says_whether_out_was_rewritten(tmp_path, capsys, monkeypatch, sigint_handler, where):
    from rewriter.cli import main

    out = tmp_path / "o.onnx"
    out.write_bytes(b"the previous output, written a moment ago")  # its time is the command's start
    _interrupt_at(monkeypatch, where)
    status = main(["convert", "models/mixed_opset13.onnx", "--opset", "18", "-o", str(out)])
    err = capsys.readouterr().err
    assert status == 130
    if where == "before":
        assert err == "error: interrupted; nothing was written\n"
        assert out.read_bytes() == b"the previous output, written a moment ago"
    else:
        assert err == f"error: interrupted after {out} was written\n"
        onnx.checker.check_model(str(out))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_interrupted_directory_run_counts_the_files_written_and_keeps_their_lines(tmp_path, capsys, monkeypatch,
                                                                                     sigint_handler, jobs):
    """a.onnx converts, b.onnx is not a model (fails), c.onnx is interrupted once a's output is in
    place: one file written, one failed, and both have their line."""
    from rewriter.cli import batch, main

    src, dst = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    data = open("models/mixed_opset13.onnx", "rb").read()
    (src / "a.onnx").write_bytes(data)
    (src / "b.onnx").write_bytes(b"not a model")
    (src / "c.onnx").write_bytes(data)
    real = batch.run_one

    def run_one(args):
        if args.model.endswith("c.onnx"):
            deadline = time.time() + 60
            while not (dst / "a.onnx").exists() and time.time() < deadline:  # (-j 2: a runs beside it)
                time.sleep(0.01)
            time.sleep(0.3)  # a's worker hands its result back
            raise KeyboardInterrupt
        return real(args)

    monkeypatch.setattr(batch, "run_one", run_one)
    status = main(["convert", str(src), "--opset", "18", "-o", str(dst), "-j", jobs])
    captured = capsys.readouterr()
    assert status == 130, captured.err
    assert captured.err == (f"error: interrupted: 1 of 3 file(s) written below {dst}, 1 failed; the file(s) in "
                            "progress were not written\n")
    lines = captured.out.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["ok    a.onnx", "FAIL  b.onnx"], captured.out
    assert sorted(p.name for p in dst.iterdir()) == ["a.onnx"]
