"""One writer per result file, with REAL sweeps in subprocesses (tiny CPU shapes)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.records.fingerprint import fingerprint_from_fields
from mfu_sweep.records.results import load_sweeps, validate_file
from mfu_sweep.util.filelock import Holder, lock_path

SHAPES = ["--shape", "64x64x64", "--shape", "96x96x96", "--shape", "128x128x128"]
FAST = ["sweep", "--device", "cpu", "--budget-s", "0.05", "--max-samples", "10", "--quiet", "--repeats", "1", *SHAPES]


def _sweep(out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mfu_sweep", *FAST, "-o", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})


def _wait_for_holder(out: Path, pid: int, proc: subprocess.Popen) -> None:
    """Until the lock file names ``pid`` (a deadline only against hanging, not a timing assertion)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            holder = Holder.from_text(lock_path(out).read_text())
        except FileNotFoundError:
            holder = None
        if holder and holder.pid == pid:
            return
        time.sleep(0.02)
    raise AssertionError(f"first sweep never took the lock: {proc.communicate()}")


def test_second_sweep_on_the_same_file_fails_and_the_first_is_unharmed(tmp_path: Path) -> None:
    out = tmp_path / "conc.json"
    first = _sweep(out)
    _wait_for_holder(out, first.pid, first)
    os.kill(first.pid, signal.SIGSTOP)  # holds the lock for certain while the second one tries
    try:
        second = subprocess.run([sys.executable, "-m", "mfu_sweep", *FAST, "-o", str(out), "--force"],
                                capture_output=True, text=True, timeout=300)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    stdout, stderr = first.communicate(timeout=300)
    assert second.returncode != 0
    err = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "another writer holds its lock" in err[0], second.stderr
    assert f"pid {first.pid} on host {socket.gethostname()}, started 20" in err[0]
    assert first.returncode == 0, stderr
    (sweep,) = load_sweeps([out])
    assert sorted(r.shape.m for r in sweep.records) == [64, 96, 128] and all(r.ok for r in sweep.records)
    assert sweep.run["finished_at"] and "wrote" in stdout
    # a real sweep records this machine's fingerprint and its fields
    assert sweep.device["fingerprint"].startswith("cpu-") and validate_file(out) == []
    fields = sweep.device["fingerprint_fields"]
    assert fields["kind"] == "cpu" and fields["threads"] >= 1 and fields["physical_cores"] >= 1
    assert fingerprint_from_fields("cpu", fields).id == sweep.device["fingerprint"]
    assert not lock_path(out).exists()


def test_sweep_takes_over_a_stale_lock_with_a_note(tmp_path: Path) -> None:
    out = tmp_path / "stale.json"
    first = _sweep(out)
    _wait_for_holder(out, first.pid, first)
    first.send_signal(signal.SIGKILL)  # dies holding the lock: the file stays, the flock goes
    first.communicate()
    assert lock_path(out).exists()
    proc = subprocess.run([sys.executable, "-m", "mfu_sweep", *FAST, "-o", str(out), "--force"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"note: stale lock of pid {first.pid} on host {socket.gethostname()}" in proc.stderr
    assert len(json.loads(out.read_text())["records"]) == 3


HOLD = """
import sys
from mfu_sweep.util.filelock import output_lock
lock = output_lock(sys.argv[1]).acquire()
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


def test_merge_output_takes_the_lock(tmp_path: Path) -> None:
    from synthetic import example_pair, write_sweep

    a, b = (write_sweep(tmp_path, d) for d in example_pair())
    out = tmp_path / "m.json"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = CliRunner().invoke(main, ["merge", str(a), str(b), "-o", str(out)])
        assert res.exit_code != 0 and f"pid {holder.pid}" in res.output and not out.exists()
    finally:
        holder.stdin.close()
        holder.wait()
    assert CliRunner().invoke(main, ["merge", str(a), str(b), "-o", str(out)]).exit_code == 0


def test_ceilings_into_fails_before_measuring_when_locked(tmp_path: Path) -> None:
    from synthetic import example_pair, write_sweep

    target = write_sweep(tmp_path, example_pair()[0])
    before = target.read_text()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(target)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = CliRunner().invoke(main, ["ceilings", "--device", "cpu", "--into", str(target)])
        assert res.exit_code != 0 and f"pid {holder.pid}" in res.output and "copy bandwidth" not in res.output
    finally:
        holder.stdin.close()
        holder.wait()
    assert target.read_text() == before


def test_import_output_takes_the_lock(tmp_path: Path) -> None:
    p100 = Path(__file__).parent / "data" / "import" / "DeepBench_NV_P100.xlsx"
    out = tmp_path / "imported"
    out.mkdir()
    target = out / "NV_P100.json"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(target)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = CliRunner().invoke(main, ["import", "deepbench", str(p100), "-o", str(out)])
        assert res.exit_code != 0 and f"pid {holder.pid}" in res.output and not target.exists()
    finally:
        holder.stdin.close()
        holder.wait()
    assert CliRunner().invoke(main, ["import", "deepbench", str(p100), "-o", str(out)]).exit_code == 0
    assert target.exists() and not lock_path(target).exists()
