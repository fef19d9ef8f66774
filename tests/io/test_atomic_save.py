"""Saving is atomic (issue 27): the output appears complete or not at all. The writer puts
everything in a temporary file in the output's directory, fsyncs it, then renames it over the
target (the data file first, the model last); it never writes the target in place, and never
copies a finished temporary file over it and deletes the temporary.

Oracles: the bytes of the files (the old ones kept aside, the new ones as an undisturbed save
writes them), onnx.load and onnx.checker, and the system calls the writer makes (recorded by
wrapping os.replace, os.rename, os.fsync, os.open, builtins.open and shutil's copies).
"""

from __future__ import annotations

import builtins
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from rewriter.io import save as save_module
from rewriter.io import save_model
from tests.io import atomic_writer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WRITER = os.path.join(ROOT, "tests", "io", "atomic_writer.py")


def _files(directory) -> dict[str, bytes]:
    return {n: open(os.path.join(directory, n), "rb").read() for n in sorted(os.listdir(directory))}


def _public(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files a reader sees (the writer's temporaries start with '.rewriter-')."""
    return {n: b for n, b in files.items() if not n.startswith(".rewriter-")}


def _old(directory, layout: str) -> dict[str, bytes]:
    """A complete older model at directory/m.onnx (with its data file for 'always')."""
    save_model(atomic_writer.model(-1.0), os.path.join(directory, "m.onnx"), external_data=layout)
    return _public(_files(directory))


def _new(tmp_path, layout: str) -> dict[str, bytes]:
    """What an undisturbed save of the child's model writes (the other complete outcome)."""
    directory = tmp_path / f"undisturbed-{layout}"
    directory.mkdir()
    save_model(atomic_writer.model(2.5), str(directory / "m.onnx"), external_data=layout)
    return _public(_files(directory))


def _kill_writer(directory, layout: str, pause: str) -> None:
    """Start the writer in a child, wait until it is at ``pause``, SIGKILL it."""
    marker = os.path.join(str(directory), "..", f"marker-{os.path.basename(str(directory))}")
    marker = os.path.abspath(marker)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, WRITER, os.path.join(str(directory), "m.onnx"), layout, pause, marker],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        while not os.path.exists(marker):
            if child.poll() is not None:
                out = child.stdout.read().decode(errors="replace")
                pytest.fail(f"the writer ended (exit {child.returncode}) before its pause point: {out[-2000:]}")
            time.sleep(0.01)
        if pause == "none":  # let it get going: the temporary file has some bytes
            while child.poll() is None and not any(
                    n.startswith(".rewriter-") and os.path.getsize(os.path.join(str(directory), n)) > 0
                    for n in os.listdir(str(directory))):
                time.sleep(0.001)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)  # its own process group: only what this test started
        child.wait()


def _temporaries(directory) -> list[str]:
    return [n for n in os.listdir(directory) if n.startswith(".rewriter-")]


@pytest.mark.parametrize("layout", ["never", "always"])
@pytest.mark.parametrize("pause", ["write", "fsync"])
def test_a_writer_killed_mid_write_leaves_the_old_complete_file(tmp_path, layout, pause):
    directory = tmp_path / "out"
    directory.mkdir()
    old = _old(str(directory), layout)
    _kill_writer(directory, layout, pause)
    assert _temporaries(str(directory)), "the premise: the writer was killed while it had a temporary file"
    assert _public(_files(str(directory))) == old  # byte for byte: the old model and its data file
    loaded = onnx.load(str(directory / "m.onnx"))
    onnx.checker.check_model(loaded)
    assert numpy_helper.to_array(loaded.graph.initializer[0])[0] == -1.0


@pytest.mark.parametrize("layout", ["never", "always"])
@pytest.mark.parametrize("pause", ["write", "fsync"])
def test_a_writer_killed_mid_write_leaves_no_target_when_there_was_none(tmp_path, layout, pause):
    directory = tmp_path / "out"
    directory.mkdir()
    _kill_writer(directory, layout, pause)
    assert _temporaries(str(directory))  # the premise, as above
    assert _public(_files(str(directory))) == {}  # neither m.onnx nor m.onnx.data


@pytest.mark.parametrize("layout", ["never", "always"])
def test_a_writer_killed_at_any_moment_leaves_one_complete_model(tmp_path, layout):
    """No pause point: killed as soon as its temporary file has bytes; the target is the old
    model or the new one, complete (whichever the kill allowed), never a mix or a part."""
    directory = tmp_path / "out"
    directory.mkdir()
    old, new = _old(str(directory), layout), _new(tmp_path, layout)
    _kill_writer(directory, layout, "none")
    assert _public(_files(str(directory))) in (old, new)


# ---------------------------------------------------------------- how it writes

class _Calls:
    """The file system calls save_model makes, recorded (and carried out)."""

    def __init__(self, monkeypatch, target: str):
        self.target = os.path.abspath(target)
        self.renames: list[tuple[str, str, bytes, int]] = []  # (src, dst, src's bytes then, src's inode)
        self.fsynced: list[tuple[int, int, bool]] = []  # (inode, position in the call order, a directory?)
        self.copies: list[str] = []
        self.written_in_place: list[str] = []
        self.order = 0
        real_replace, real_rename, real_fsync, real_open = os.replace, os.rename, os.fsync, os.open
        real_builtin_open = builtins.open

        def rename_with(real):
            def wrapped(src, dst, *args, **kwargs):
                with real_builtin_open(src, "rb") as f:
                    data = f.read()
                self.order += 1
                self.renames.append((os.path.abspath(src), os.path.abspath(dst), data, os.stat(src).st_ino))
                return real(src, dst, *args, **kwargs)
            return wrapped

        def fsync(fd):
            st = os.fstat(fd)
            self.order += 1
            self.fsynced.append((st.st_ino, len(self.renames), os.path.isdir(f"/proc/self/fd/{fd}")))
            return real_fsync(fd)

        def opening(path, flags, *args, **kwargs):
            if isinstance(path, (str, os.PathLike)) and os.path.abspath(path) in self._targets() and \
                    flags & (os.O_WRONLY | os.O_RDWR):
                self.written_in_place.append(os.fspath(path))
            return real_open(path, flags, *args, **kwargs)

        def builtin_open(file, mode="r", *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) in self._targets() and \
                    any(c in mode for c in "wax+"):
                self.written_in_place.append(os.fspath(file))
            return real_builtin_open(file, mode, *args, **kwargs)

        def copy(name, real):
            def wrapped(*args, **kwargs):
                self.copies.append(name)
                return real(*args, **kwargs)
            return wrapped

        monkeypatch.setattr(os, "replace", rename_with(real_replace))
        monkeypatch.setattr(os, "rename", rename_with(real_rename))
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "open", opening)
        monkeypatch.setattr(builtins, "open", builtin_open)
        for name in ("copy", "copy2", "copyfile", "copyfileobj", "move"):
            monkeypatch.setattr(shutil, name, copy(name, getattr(shutil, name)))

    def _targets(self) -> set[str]:
        return {self.target, self.target + ".data"}


@pytest.mark.parametrize("layout", ["never", "always"])
@pytest.mark.parametrize("existing", [False, True])
def test_save_renames_a_fsynced_temporary_of_the_same_directory_over_the_target(tmp_path, monkeypatch, layout,
                                                                                 existing):
    target = str(tmp_path / "m.onnx")
    if existing:
        _old(str(tmp_path), layout)
    model = atomic_writer.model(2.5)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.arange(1 << 16, dtype=np.float32), "w"))
    calls = _Calls(monkeypatch, target)
    written = save_model(model, target, external_data=layout)
    monkeypatch.undo()
    final = _files(str(tmp_path))
    wanted = [target] + ([target + ".data"] if layout == "always" else [])
    assert written == wanted
    assert calls.copies == [] and calls.written_in_place == []  # no copy-then-delete, no writing in place
    assert [dst for _, dst, _, _ in calls.renames] == wanted[::-1]  # the data file first, the model last
    for src, dst, data, inode in calls.renames:
        assert os.path.dirname(src) == str(tmp_path)  # a temporary beside the target: rename is atomic there
        assert src != dst and os.path.basename(src).startswith(".rewriter-")
        assert not os.path.exists(src)  # renamed, so gone under its temporary name
        assert data == final[os.path.basename(dst)]  # complete when renamed
        assert os.stat(dst).st_ino == inode  # the very file: renamed, not copied
        before = [i for i, (ino, renamed, _) in enumerate(calls.fsynced) if ino == inode]
        assert before, f"{src} was not fsynced"
        assert calls.fsynced[before[0]][1] < len(calls.renames)  # fsynced before its rename
        assert calls.fsynced[before[0]][1] <= [d for _, d, _, _ in calls.renames].index(dst)
    assert any(is_dir and renamed == len(calls.renames) for _, renamed, is_dir in calls.fsynced), \
        "the directory is fsynced after the renames"
    assert _temporaries(str(tmp_path)) == []
    loaded = onnx.load(target)
    onnx.checker.check_model(loaded)
    np.testing.assert_array_equal(numpy_helper.to_array(loaded.graph.initializer[0]),
                                  np.arange(1 << 16, dtype=np.float32))


def test_a_failed_write_removes_its_temporary_and_leaves_the_target(tmp_path, monkeypatch):
    """The other half of "complete or absent": an error while writing (disk full) leaves the
    old target and no temporary behind."""
    old = _old(str(tmp_path), "never")
    real = save_module._write_all

    def full_disk(fd, data):
        if len(data) > 1 << 20:
            real(fd, memoryview(data)[:1000])
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(save_module, "_write_all", full_disk)
    with pytest.raises(Exception, match="No space left"):
        save_model(atomic_writer.model(2.5), str(tmp_path / "m.onnx"), external_data="never")
    assert _files(str(tmp_path)) == old
