"""The sweep's journal: one synced line per record beside the file, folded by every reader and at the end.

Unit tests build small documents by hand; the kill tests run real CPU sweeps. The big file of
the SIGKILL test is one real record of this machine copied under 3,000 other shapes: SYNTHETIC
padding (made-up shapes, the same timings), which only the bookkeeping reads.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.gemm.shapes import parse_shape
from mfu_sweep.measure.checkpoint import Checkpoint
from mfu_sweep.measure.passes import order_seed, shuffled
from mfu_sweep.measure.planning import make_tasks
from mfu_sweep.measure.sweep import SweepPlan, run_sweep
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.records.journal import Journal, journal_path, parse_journal, read_journal
from mfu_sweep.records.results import ResultError, load_sweeps, parse_document, read_json, save_sweep, validate_file

GOLDEN = Path(__file__).parent / "golden" / "v1_sweep.json"


def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def at_shape(record: dict, shape: dict, peak: dict) -> dict:
    """``record``'s timings under another ``shape`` (SYNTHETIC), its flops, bytes, rates and MFU made to agree."""
    from mfu_sweep.gemm.dtypes import DTYPES
    from mfu_sweep.gemm.shapes import Shape

    new, dims = copy.deepcopy(record), Shape.from_json(shape)
    new.update(shape=shape, flops=dims.flops, bytes=dims.bytes(DTYPES[record["dtype"]]))
    new["intensity"] = new["flops"] / new["bytes"]
    if new.get("median_s"):
        new["tflops"] = new["flops"] / new["median_s"] / 1e12
        new["mfu"] = new["tflops"] / peak["tflops"][record["dtype"]] if new.get("mfu") is not None else None
    return new


def journalled(tmp_path: Path, base: int = 2, lines: int = 2) -> tuple[Path, dict, list[dict]]:
    """A sweep file of the golden's first ``base`` records and a journal of ``lines`` more (copies of the last)."""
    doc = golden()
    extra = [at_shape(doc["records"][-1], {"batch": 1, "m": 8 * (i + 1), "n": 8, "k": 8}, doc["peak"])
             for i in range(lines)]
    doc["records"] = doc["records"][:base]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    journal = Journal(path).open(doc["run"]["id"], base)
    for rec in extra:
        journal.append(rec)
    journal.close()
    return path, doc, extra


def test_every_reader_sees_the_journalled_records(tmp_path: Path) -> None:
    path, doc, extra = journalled(tmp_path)
    assert json.loads(path.read_text())["records"] == doc["records"]  # the file itself: only what it began with
    assert read_json(path)["records"] == doc["records"] + extra
    (sweep,) = load_sweeps([path])
    assert [r.shape.m for r in sweep.records[2:]] == [8, 16]
    assert validate_file(path) == []
    merged = tmp_path / "m.json"
    res = CliRunner().invoke(main, ["merge", str(path), "-o", str(merged)])
    assert res.exit_code == 0, res.output
    assert len(load_sweeps([merged])[0].records) == 4 and not journal_path(merged).exists()
    res = CliRunner().invoke(main, ["export", str(path), "--format", "csv"])
    assert res.exit_code == 0 and res.output.count("\n") == 5, res.output  # the header, 2 + 2 journalled


def test_a_journal_that_does_not_extend_the_file_is_not_folded(tmp_path: Path) -> None:
    """Killed between writing the folded file and removing the journal: the journal's records are in the file
    already, and must not come twice. Nor is another run's journal folded into this file."""
    path, doc, extra = journalled(tmp_path)
    folded = dict(doc, records=doc["records"] + extra)
    path.write_text(json.dumps(folded))  # the fold's write, the journal still there
    assert read_json(path)["records"] == folded["records"]
    path.write_text(json.dumps(dict(doc, run={**doc["run"], "id": "another-run"})))
    assert read_json(path)["records"] == doc["records"]


def test_a_torn_last_line_is_left_out_with_a_note(tmp_path: Path, capsys) -> None:
    path, doc, extra = journalled(tmp_path, lines=3)
    raw = journal_path(path).read_bytes()
    journal_path(path).write_bytes(raw[:-40])  # killed in the middle of writing the last record
    assert read_json(path)["records"] == doc["records"] + extra[:2]
    err = capsys.readouterr().err
    assert "cut short" in err and str(journal_path(path)) in err and "--resume" in err
    journal_path(path).write_bytes(raw[:-1])  # whole, only the newline missing: kept, no note
    assert read_json(path)["records"] == doc["records"] + extra
    assert capsys.readouterr().err == ""


def test_a_broken_line_before_the_last_is_an_error_naming_the_journal_and_line(tmp_path: Path) -> None:
    path, _, _ = journalled(tmp_path, lines=3)
    lines = journal_path(path).read_bytes().split(b"\n")
    lines[2] = lines[2][:30]
    journal_path(path).write_bytes(b"\n".join(lines))
    with pytest.raises(ResultError, match=r"s\.json\.journal'?: line 3 is not JSON"):
        read_json(path)
    res = CliRunner().invoke(main, ["validate", str(path)])
    assert res.exit_code != 0 and "line 3" in res.output and "Traceback" not in res.output
    with pytest.raises(ValueError, match="not an mfu-sweep journal header"):
        parse_journal(path, b'{"record": {}}\n')
    with pytest.raises(ValueError, match="format=2 is not supported"):
        parse_journal(path, b'{"journal": "mfu-sweep", "format": 2}\n')


def test_a_failed_write_is_cut_back_and_a_failed_sync_is_raised_naming_the_journal(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """A full disk in the middle of a line: the half line is cut off, so the journal still reads. A sync that
    fails in the background is raised by the next append (or the close), naming the journal."""
    path, doc, extra = journalled(tmp_path, lines=1)
    journal = Journal(path)
    journal.open(doc["run"]["id"], len(doc["records"]))
    journal.append(extra[0])
    real_write, calls = os.write, []

    def half_then_full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("mfu_sweep.records.journal.os.write", half_then_full)
    with pytest.raises(OSError, match="No space left") as err:
        journal.append(extra[0])
    assert err.value.filename == str(journal_path(path)) and len(calls) == 2
    assert read_json(path)["records"] == doc["records"] + extra  # the half line is gone
    monkeypatch.setattr("mfu_sweep.records.journal.os.write", real_write)

    def failed_sync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("mfu_sweep.records.journal.os.fdatasync", failed_sync)
    journal.append(extra[0])  # written; its sync fails in the background
    with pytest.raises(OSError, match="Input/output error") as err:
        journal.append(extra[0])
    assert err.value.filename == str(journal_path(path))
    journal.close()


def test_the_checkpoint_writes_one_line_per_record_whatever_the_file_holds(tmp_path: Path) -> None:
    """Bytes written per record do not grow with the file; the end folds and removes the journal."""
    (sweep,) = parse_document(golden())
    record = sweep.records[0]
    written = {}
    for n in (4, 4000):
        path = tmp_path / f"n{n}.json"
        big = sweep.with_records([record] * n)
        point = Checkpoint(path)
        point.start(big)
        written[n] = [point.add(record) for _ in range(3)]
        assert read_journal(path).header["base_records"] == n
        point.finish(big.with_records([record] * (n + 3)))
        assert not journal_path(path).exists() and len(json.loads(path.read_text())["records"]) == n + 3
    assert written[4] == written[4000] and len(set(written[4])) == 1


def test_saving_a_sweep_removes_the_journal_it_supersedes(tmp_path: Path) -> None:
    path, _, _ = journalled(tmp_path)
    (sweep,) = load_sweeps([path])  # folded
    save_sweep(path, sweep)
    assert not journal_path(path).exists()
    assert len(load_sweeps([path])[0].records) == 4


# ----- real sweeps: a SIGKILL in the middle of a resume of a big file -------------------------

def _big_file(tmp_path: Path, n: int) -> Path:
    """A real one-shape sweep of this CPU, its record copied under ``n`` - 1 other shapes (SYNTHETIC padding).

    Run through the library in this process with the machine watch off (no clock probe: seconds saved);
    its stored command says ``--isolate none``, so its resumes run in one process too, and names this
    process's torch thread count (another in-process test may have set it), which the device's
    fingerprint holds and the resumes must match.
    """
    import torch

    path = tmp_path / "big.json"
    timing, threads = TimingConfig(budget_s=0.02, max_samples=5), torch.get_num_threads()
    argv = ["mfu-sweep", "sweep", "--device", "cpu", "--isolate", "none", "--repeats", "1", "--budget-s", "0.02",
            "--max-samples", "5", "--threads", str(threads), "--shape", "64x64x64", "-o", str(path)]
    tasks = make_tasks([(parse_shape("64x64x64"), "custom")], ["fp32"], ["eager"], timing=timing)
    run_sweep(SweepPlan(device="cpu", tasks=tasks, output=path, isolate="none", argv=argv, watch=False,
                        settings={"seed": 0, "timing": vars(timing), "dtypes": ["fp32"], "modes": ["eager"],
                                  "threads": threads}))
    doc = json.loads(path.read_text())
    (rec,) = doc["records"]
    doc["records"] += [at_shape(rec, {"batch": 1, "m": 16 * i, "n": 16, "k": 16}, doc["peak"]) for i in range(1, n)]
    doc["run"]["planned"] = n
    path.write_text(json.dumps(doc))
    return path


def test_sigkill_during_a_resume_of_a_big_file_then_a_second_resume_completes_it(tmp_path: Path) -> None:
    """The resume journals three new shapes and hangs in the fourth (a test fault), where it is killed: the file
    loads with the 3,000 records and the three new ones; a second resume measures the other three and folds."""
    n = 3000
    path = _big_file(tmp_path, n)
    before = read_json(path)["records"]
    new = [80, 96, 112, 128, 144, 160]
    order = [s for s in shuffled([64, *new], order_seed(0, 0)) if s != 64]  # the pass's order; 64 is in the file
    args = [sys.executable, "-m", "mfu_sweep", "sweep", "--resume", "-o", str(path),
            *[a for s in [64, *new] for a in ("--shape", f"{s}x{s}x{s}")]]
    env = {**os.environ, "MFU_SWEEP_TEST_FAULT": f"hang:{order[3]}x{order[3]}x{order[3]}"}
    with (tmp_path / "log.txt").open("w") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=log, env=env)
        deadline = time.time() + 300  # generous: other work on the machine slows the start
        while time.time() < deadline and proc.poll() is None:
            if journal_path(path).exists() and journal_path(path).read_bytes().count(b"\n") == 1 + 3:
                break  # the header and three records (reading the journal alone leaves the cores to the sweep)
            time.sleep(0.05)
        time.sleep(0.3)  # now hanging in the fourth shape
        assert proc.poll() is None, (tmp_path / "log.txt").read_text()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert journal_path(path).exists(), (tmp_path / "log.txt").read_text()
    (killed,) = load_sweeps([path])  # the file loads, with every finished record
    got = read_json(path)["records"]
    assert got[:n] == before and [r["shape"]["m"] for r in got[n:]] == order[:3]
    assert killed.run["planned"] == n + len(new) and killed.run["finished_at"] is None
    res = subprocess.run([*args, "--quiet"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert not journal_path(path).exists()
    done = json.loads(path.read_text())
    assert done["records"][: len(got)] == got and [r["shape"]["m"] for r in done["records"][n:]] == order
    assert done["run"]["finished_at"] and len(done["run"]["resumed_at"]) == 2 and validate_file(path) == []
    assert all(r["overhead_s"] >= 0 and r["worker_s"] >= r["measure_wall_s"] for r in done["records"][n:])
