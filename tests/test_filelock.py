"""The one-writer lock: a second holder fails at once naming the first; a dead holder's lock is taken over."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from mfu_sweep.util.filelock import LockError, lock_path, output_lock

HOLD = """
import os, sys
from mfu_sweep.util.filelock import output_lock
lock = output_lock(sys.argv[1]).acquire()
print("held", flush=True)
if sys.argv[2] == "die":
    os.kill(os.getpid(), 9)   # killed while holding: no release
sys.stdin.read()              # hold until the test closes stdin
lock.release()
"""


def _holder(target, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(target), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_writer_fails_naming_the_holder(tmp_path) -> None:
    target = tmp_path / "out.json"
    proc = _holder(target, "hold")
    try:
        with pytest.raises(LockError) as info:
            output_lock(target).acquire()
        msg = str(info.value)
        assert f"pid {proc.pid} on host {socket.gethostname()}, started 20" in msg and "\n" not in msg
    finally:
        proc.stdin.close()
        proc.wait()
    with output_lock(target) as lock:  # released: free again, nothing stale
        assert lock.note is None
    assert not lock_path(target).exists()


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path) -> None:
    target = tmp_path / "out.json"
    proc = _holder(target, "die")
    assert proc.wait() == -signal.SIGKILL
    assert lock_path(target).exists()
    with output_lock(target) as lock:
        assert lock.note and f"stale lock of pid {proc.pid}" in lock.note and "gone; taken over" in lock.note
    assert not lock_path(target).exists()


def test_same_process_cannot_take_it_twice(tmp_path) -> None:
    target = tmp_path / "a.json"
    with output_lock(target), pytest.raises(LockError, match=f"pid {os.getpid()}"):
        output_lock(target).acquire()
