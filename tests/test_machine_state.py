"""Machine state while measuring: /proc readings, the contention rule, the clock probe, start-up limits.

Contention is tested against REAL busy-loop processes the tests start (bounded, killed in ``finally``);
the decision rules against recorded /proc and NVML readings (the fixtures below were copied from this
project's 2-core VM and from an NVML process listing's fields).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.machine.clockprobe import ADDS_PER_ITER, KERNELS, _Chain, measure_clock, measure_fma
from mfu_sweep.measure.machine.cores import (
    CpuTicks,
    HostMonitor,
    ProcStat,
    Snapshot,
    busy_before,
    own_ticks,
    parse_pid_stat,
    parse_proc_stat,
    reading,
)
from mfu_sweep.measure.machine.gpu_neighbours import GpuNeighbours, other_processes, other_utilisation
from mfu_sweep.measure.machine.watch import peak_from_probe, spec_clock_ghz
from mfu_sweep.records.contention import (
    CONTENDED_SHARE,
    FLAG,
    contention_note,
    contention_reason,
    exclude_contended,
    flag_record,
    is_contended,
    is_flagged,
    pass_summaries,
)
from mfu_sweep.records.results import Record, Sweep, load_sweeps, save_sweep
from mfu_sweep.specs import Peak

FP32 = get_dtype("fp32")

# Recorded /proc/stat of the 2-core VM, 2 s apart (user nice system idle iowait irq softirq steal guest gn).
PROC_STAT_A = """cpu  58597 0 7183 890158 918 0 62 369 0 0
cpu0 23879 0 2634 451884 104 0 13 209 0 0
cpu1 34718 0 4549 438273 814 0 49 160 0 0
intr 123
"""
PROC_STAT_B = """cpu  58606 0 7196 890534 919 0 62 369 0 0
cpu0 23880 0 2641 452075 104 0 13 209 0 0
cpu1 34725 0 4554 438459 814 0 49 160 0 0
"""
PID_STAT = "4242 (pt_main (thread) x) R 4000 4242 4242 0 -1 4194560 1 0 0 0 250 31 7 2 20 0 3 0 1 1 1"


def test_proc_stat_parser_sums_the_worker_cores_only():
    a = parse_proc_stat(PROC_STAT_A, {0, 1})
    assert (a.busy, a.idle, a.steal) == (23879 + 2634 + 13 + 34718 + 4549 + 49, 451884 + 104 + 438273 + 814, 369)
    assert parse_proc_stat(PROC_STAT_A, {1}).steal == 160
    with pytest.raises(ValueError, match="cpus"):
        parse_proc_stat(PROC_STAT_A, {7})


def test_pid_stat_parser_survives_spaces_and_parentheses_in_the_name():
    st = parse_pid_stat(PID_STAT)
    assert (st.pid, st.ppid, st.session, st.ticks) == (4242, 4000, 4242, 250 + 31 + 7 + 2)  # with reaped children


def test_own_processes_are_the_parent_its_children_and_the_sessions_they_lead():
    procs = {p.pid: p for p in (ProcStat(10, 1, 5, 7), ProcStat(20, 10, 20, 100), ProcStat(21, 20, 20, 30),
                                ProcStat(30, 10, 5, 2), ProcStat(31, 5, 5, 999), ProcStat(40, 1, 40, 500))}
    # 31 shares the parent's terminal session (5) but is not the parent's: it is someone else's work.
    assert own_ticks(procs, 10) == {10: 7, 20: 100, 21: 30, 30: 2}


def _snap(t, stat, own):
    return Snapshot(t, parse_proc_stat(stat, {0, 1}), own)


def test_recorded_readings_give_others_share_and_the_rule_flags_at_the_threshold():
    # 2 s of the recorded VM: 20 busy ticks of 397 on the two cores; the sweep itself used 10 of them.
    got = reading(_snap(0.0, PROC_STAT_A, {1: 0}), _snap(2.0, PROC_STAT_B, {1: 10}), 100, 2, "1.69 1.20 0.61 1/100 9")
    assert got["own_cpu_s"] == pytest.approx(0.10)
    assert got["other_cpu_s"] == pytest.approx(0.10)
    assert got["other_share"] == pytest.approx(10 / 397, abs=1e-4)
    assert got["load1"] == 1.69
    assert not is_contended(got)
    assert is_contended({**got, "other_share": CONTENDED_SHARE})
    assert not is_contended({**got, "other_share": CONTENDED_SHARE - 0.001})
    assert is_contended({**got, "other_share": 0.06, "steal_share": 0.05})  # the hypervisor's neighbours count
    assert not is_contended({**got, "other_share": 0.9, "window_s": 0.05})  # too few ticks to judge


def test_only_others_time_beyond_the_cores_the_worker_leaves_idle_competes():
    # 1 s on 2 cores (200 ticks); the sweep used 100 ticks (one thread), others 80, then 150.
    a = Snapshot(0.0, CpuTicks(busy=0, idle=0, steal=0), {1: 0})
    light = Snapshot(1.0, CpuTicks(busy=180, idle=20, steal=0), {1: 100})
    heavy = Snapshot(1.0, CpuTicks(busy=200, idle=0, steal=0), {1: 50})
    assert reading(a, light, 100, 2, None)["other_share"] == pytest.approx(0.4)  # all cores used: 80 of 200
    one = reading(a, light, 100, 2, None, used=1)
    assert one["other_share"] == 0.0 and one["cores_used"] == 1  # others fit on the idle core
    assert reading(a, heavy, 100, 2, None, used=1)["other_share"] == pytest.approx(0.5)  # 150 - 100 spare, of 100


def test_a_reaped_worker_counts_as_own_not_as_others():
    # The worker (pid 2) was killed on timeout between the snapshots: its ticks left /proc, its lifetime
    # arrived in the parent's cutime, so the busy ticks are not blamed on other processes.
    a = Snapshot(0.0, CpuTicks(busy=0, idle=0, steal=0), {1: 0, 2: 50})
    b = Snapshot(1.0, CpuTicks(busy=200, idle=0, steal=0), {1: 250})
    got = reading(a, b, 100, 2, None)
    assert got["other_share"] == 0.0
    assert "/proc/loadavg" in got["unobserved"]


def test_unreadable_proc_is_reported_not_raised(tmp_path):
    monitor = HostMonitor(root=tmp_path)
    monitor.begin()
    got = monitor.end()
    assert got["other_share"] is None
    assert "/proc/stat" in got["unobserved"] and not is_contended(got)
    before, warning = busy_before(HostMonitor(root=tmp_path / "missing"), window_s=0.0)
    assert before["other_share"] is None and warning is None


# ---- NVML readings (recorded field values of nvmlDeviceGetComputeRunningProcesses / ProcessUtilization)
NvmlProc = namedtuple("NvmlProc", "pid usedGpuMemory")
NvmlSample = namedtuple("NvmlSample", "pid timeStamp smUtil memUtil encUtil decUtil")


def test_nvml_rules_on_recorded_readings():
    procs = [NvmlProc(3101, 2 << 30), NvmlProc(7777, 40 << 30)]
    samples = [NvmlSample(3101, 10, 97, 40, 0, 0), NvmlSample(7777, 11, 35, 10, 0, 0),
               NvmlSample(7777, 12, 42, 12, 0, 0)]
    others = other_processes(procs, {3101})
    assert others == [7777]
    assert other_utilisation(samples, set(others)) == pytest.approx(0.42)
    assert is_contended({"window_s": 1.0, "other_share": 0.0, "gpu": {"other_processes": 1, "other_sm_util": 0.42}})
    assert not is_contended({"window_s": 1.0, "other_share": 0.0, "gpu": {"other_processes": 1, "other_sm_util": 0.02}})
    # A neighbour whose load NVML does not report is a neighbour all the same.
    assert is_contended({"window_s": 1.0, "other_share": 0.0, "gpu": {"other_processes": 1, "other_sm_util": None}})


class _FailingNvml:
    class NVMLError(Exception):
        pass

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802 - NVML's name
        raise self.NVMLError("GPU is lost")


class _RecordedNvml:
    """NVML answering with recorded readings (the field names and units of nvidia-ml-py's structs)."""

    class NVMLError(Exception):
        pass

    def __init__(self, procs, samples, util_error=False):
        self.procs, self.samples, self.util_error, self.asked = procs, samples, util_error, []

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802 - NVML's name
        return self.procs

    def nvmlDeviceGetProcessUtilization(self, handle, last_seen):  # noqa: N802 - NVML's name
        self.asked.append(last_seen)
        if self.util_error:
            raise self.NVMLError("Not Supported")
        return [x for x in self.samples if x.timeStamp > last_seen]


def _probe(nvml):
    probe = GpuNeighbours.__new__(GpuNeighbours)
    probe.nvml, probe.handle, probe.why, probe.own, probe.last_ts = nvml, object(), None, set(), 0
    return probe


def test_gpu_neighbours_on_recorded_nvml_readings():
    procs = [NvmlProc(3101, 2 << 30), NvmlProc(7777, 40 << 30)]
    samples = [NvmlSample(3101, 10, 97, 40, 0, 0), NvmlSample(7777, 11, 35, 10, 0, 0)]
    nvml = _RecordedNvml(procs, samples)
    probe = _probe(nvml)
    got = probe.read({3101})
    assert got["other_processes"] == 1 and got["other_pids"] == [7777] and got["other_sm_util"] == pytest.approx(0.35)
    assert is_contended({"window_s": 1.0, "gpu": got})
    probe.read({3101})
    assert nvml.asked == [0, 11]  # the next reading asks only for samples after the last one seen
    alone = _probe(_RecordedNvml([NvmlProc(3101, 1)], samples)).read({3101})
    assert alone["other_processes"] == 0 and alone["other_sm_util"] == 0.0
    unsupported = _probe(_RecordedNvml(procs, samples, util_error=True)).read({3101})
    assert unsupported["other_sm_util"] is None and "Not Supported" in unsupported["unobserved"][0]
    assert is_contended({"window_s": 1.0, "gpu": unsupported})


def test_nvml_missing_or_failing_mid_sweep_is_a_note_in_the_reading():
    probe = GpuNeighbours.__new__(GpuNeighbours)
    probe.nvml, probe.handle, probe.why, probe.own, probe.last_ts = None, None, "NVML not available", set(), 0
    assert probe.read() == {"unobserved": ["NVML not available"]}
    probe.nvml = _FailingNvml()
    assert "GPU is lost" in probe.read()["unobserved"][0]


# ---- real busy processes ---------------------------------------------------------------------
BUSY = [sys.executable, "-c", "import time\nend = time.time() + 20\nwhile time.time() < end: pass"]


def _start_orphans(n: int) -> list[int]:
    """``n`` busy loops that are NOT the test's children (double fork through sh): other processes."""
    cmd = " ".join(f"{subprocess.list2cmdline(BUSY)} >/dev/null 2>&1 & echo $!;" for _ in range(n))
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=10).stdout
    return [int(p) for p in out.split()]


def _ticks(pid: int) -> int:
    return parse_pid_stat(Path(f"/proc/{pid}/stat").read_text()).ticks


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_real_busy_processes_are_seen_as_others_and_the_worker_as_own():
    monitor = HostMonitor()
    others = _start_orphans(2)
    own = subprocess.Popen(BUSY, start_new_session=True)  # like a worker: the sweep's own
    try:
        time.sleep(0.2)
        before = {pid: _ticks(pid) for pid in [*others, own.pid]}
        monitor.begin()
        time.sleep(1.5)
        got = monitor.end()
        used = {pid: (_ticks(pid) - t) / 100 for pid, t in before.items()}
    finally:
        _kill(others)
        own.kill()
        own.wait()
    # Others' CPU time covers at least what the two busy loops used (other load on the machine only adds);
    # the own busy loop is counted as own. Slack: one tick per process per snapshot.
    assert got["other_cpu_s"] >= sum(used[p] for p in others) - 0.05
    assert got["own_cpu_s"] >= used[own.pid] - 0.05
    assert got["other_share"] >= CONTENDED_SHARE and is_contended(got)


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_a_short_lived_grandchild_is_own_work():
    # Like a compiler a worker runs: it exits during the window, its time arrives in the worker's cutime.
    grandchild = subprocess.list2cmdline(BUSY).replace("+ 20", "+ 0.6")
    child = subprocess.Popen([sys.executable, "-c", f"import subprocess, time; subprocess.run({grandchild!r}, "
                              "shell=True); time.sleep(5)"], start_new_session=True)
    monitor = HostMonitor()
    try:
        monitor.begin()
        time.sleep(2.0)
        got = monitor.end()
        reaped = sum(int(x) for x in Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[13:15])
    finally:
        child.kill()
        child.wait()
    assert reaped / 100 > 0.1  # the grandchild ran and was reaped inside the window
    assert got["own_cpu_s"] >= reaped / 100 - 0.05


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_sweep_beside_busy_processes_flags_its_records(tmp_path):
    from mfu_sweep.measure.sweep import SweepPlan, run_sweep
    from mfu_sweep.measure.task import Task
    from mfu_sweep.measure.timing import TimingConfig

    # the shape runs to its whole budget (a CI target it cannot meet, samples it cannot fill): its reading
    # spans >= 0.4 s, above MIN_WINDOW_S, however fast an idle machine would have met a 1% CI
    timing = TimingConfig(budget_s=0.4, min_samples=3, max_samples=100_000, target_rel_ci=1e-9)
    tasks = [Task(shape=Shape(1, 128, 128, 128), dtype="fp32", timing=timing, check=False)]
    notes: list[str] = []
    pids = _start_orphans(2)
    try:
        time.sleep(0.2)
        sweep = run_sweep(SweepPlan(device="cpu", tasks=tasks, output=tmp_path / "s.json", isolate="none"),
                          notify=notes.append)
    finally:
        _kill(pids)
    (rec,) = sweep.records
    assert FLAG in rec.flags and rec.extra["machine"]["other_share"] >= CONTENDED_SHARE
    block = load_sweeps([tmp_path / "s.json"])[0].extra["machine"]
    assert block["passes"][0]["contended"] and block["contended_share"] == CONTENDED_SHARE
    assert any("machine busy before the sweep" in n for n in notes)
    if platform.machine().lower() in ("x86_64", "amd64"):  # the probes ran in their child process
        assert block["clock"]["measured_ghz"] > 0.3 and block["before"]["during"] == "clock and FMA probes"


# ---- clock -------------------------------------------------------------------------------------
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 machine code")
def test_the_chain_executes_every_add_and_the_probe_reads_a_plausible_clock():
    assert _Chain()(1000) == 1000 * ADDS_PER_ITER  # rax counts the adds: the loop ran as encoded
    got = measure_clock(1, rounds=2, round_s=0.05)
    assert got.error is None and 0.3 < got.ghz < 10.0


def test_a_failing_clock_probe_is_a_reason_not_a_traceback():
    def broken(n):
        raise OSError("mmap denied")

    got = measure_clock(1, chain=broken) if platform.machine().lower() in ("x86_64", "amd64") else measure_clock(1)
    assert got.ghz is None and got.error


def _cpu_peak(tf=0.3):
    return Peak(chip="cpu", tflops={"fp32": tf}, memory_bandwidth_tbs=None, source="est", estimated=True)


def test_peak_follows_the_measured_clock_and_fma_ceiling_only_when_they_beat_the_estimate():
    device = {"backend": "cpu", "threads": 2, "physical_cores_usable": 2, "reported_clock_ghz": 2.6}

    def estimate(threads, clock_ghz):
        return replace(_cpu_peak(0.1 * clock_ghz), tflops={"fp32": 0.1 * clock_ghz, "bf16": 0.2 * clock_ghz})

    spec = spec_clock_ghz(device)
    base = estimate(2, spec)
    fast, block = peak_from_probe(base, device, {"clock": {"measured_ghz": spec * 1.3}}, estimate)
    assert fast.tflops["fp32"] == pytest.approx(0.1 * spec * 1.3) and block["used_for_peak"]
    assert "spec clock" in fast.basis and fast.basis in fast.notes and block["reason"] == fast.basis
    same, block = peak_from_probe(base, device, {"clock": {"measured_ghz": spec * 1.01}}, estimate)
    assert same == base and not block["used_for_peak"]
    # An FMA ceiling above the estimate lifts that dtype only (bf16 has its own, higher rate here).
    fma = {"vfmadd231ps-ymm": {"dtype": "fp32", "gflops_per_core": 0.1 * spec * 1e3, "threads": 2}}
    lifted, block = peak_from_probe(base, device, {"clock": {"measured_ghz": spec}, "fma": fma}, estimate)
    assert lifted.tflops["fp32"] == pytest.approx(2 * 0.1 * spec) and lifted.tflops["bf16"] == base.tflops["bf16"]
    assert "FMA-throughput ceiling" in lifted.basis and block["ceilings_tflops"]["fp32"] == pytest.approx(0.2 * spec)
    failed, block = peak_from_probe(base, device, {"error": "probe process died (signal 4)"}, estimate)
    assert failed == base and "signal 4" in block["error"] and "not measured" in block["reason"]
    forced = replace(base, override=True)
    assert peak_from_probe(forced, device, {"clock": {"measured_ghz": spec * 2}}, estimate)[0] == forced


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 machine code")
def test_fma_probe_reads_a_plausible_flop_per_cycle_for_the_units_this_cpu_has():
    from mfu_sweep.specs.cpu import load_cpuinfo

    flags = load_cpuinfo().flags
    got = measure_fma(1, flags, 3.0, rounds=1, round_s=0.05)
    assert set(got) == {k for k, (needs, *_r) in KERNELS.items() if all(f in flags for f in needs)}
    for row in got.values():  # 12 independent accumulators: 1 to 4 pipes x 8 or 16 lanes x 2-4 FLOP
        assert 4 <= row["flop_per_cycle"] <= 300


# ---- counting, exclusion, compare, schema --------------------------------------------------------
def _rec(pass_index, share, seconds=1e-3):
    shape = Shape(1, 64, 64, 64)
    rec = Record(shape=shape, dtype="fp32", mode="eager", flops=shape.flops, bytes=shape.bytes(FP32),
                 intensity=shape.intensity(FP32), status="ok", samples_s=(seconds,) * 3, median_s=seconds,
                 pass_index=pass_index)
    return flag_record(rec, {"window_s": 1.0, "cpus": 2, "other_share": share, "steal_share": 0.0})


def _sweep(label, records):
    run = {"id": label, "started_at": "2026-12-03T00:00:00Z", "finished_at": None, "argv": [], "host": "h",
           "git_sha": None}
    device = {"label": label, "backend": "cpu", "name": "cpu", "chip": "cpu", "index": 0, "count": 1}
    return Sweep(tool={"name": "mfu-sweep", "version": "0"}, run=run, environment={}, device=device,
                 peak=_cpu_peak(), records=tuple(records), settings={"repeats": 2})


def test_counting_excluding_and_naming_contention():
    busy = _sweep("busy", [_rec(0, 0.01), _rec(1, 0.8)])
    quiet = _sweep("quiet", [_rec(0, 0.0), _rec(1, 0.02)])
    assert contention_note([busy, quiet]) == ("measured under contention: busy: 1 of 2 records in 1 pass "
                                             "(others took up to 80% of the device); kept; "
                                             "--exclude-contended leaves them out")
    assert [p["contended"] for p in pass_summaries(busy.records)] == [False, True]
    kept, dropped = exclude_contended([busy, quiet])
    assert dropped == 1 and len(kept[0].records) == 1 and kept[1] is quiet
    assert "busy: 1 of 2 records in 1 pass " in contention_note([busy, quiet])
    both = _sweep("busy", [_rec(0, 0.8), _rec(1, 0.8)])
    assert "busy: 2 of 2 records in 2 passes " in contention_note([both])  # never "1 passes" or "pass(es)"
    assert contention_note([quiet]) is None
    reason = contention_reason([busy, quiet], "busy", "quiet")
    assert "busy was measured under contention" in reason and "80%" in reason
    assert contention_reason([quiet], "quiet", "quiet") is None


def test_cli_compare_names_contention_and_exclude_option_drops_records(tmp_path):
    rng = [1e-3 * (1 + 0.01 * j) for j in range(3)]
    shapes = [Shape(1, s, s, s) for s in (64, 128, 256, 512)]

    def recs(share, slow):
        out = []
        for p in range(2):
            for sh in shapes:
                t = sh.flops / 1e11 * slow * (1 + 0.01 * p)
                r = Record(shape=sh, dtype="fp32", mode="eager", flops=sh.flops, bytes=sh.bytes(FP32),
                           intensity=sh.intensity(FP32), status="ok", samples_s=tuple(t * x / 1e-3 for x in rng),
                           pass_index=p)
                from mfu_sweep.records.results import finish_record

                out.append(finish_record(flag_record(r, {"window_s": 1.0, "other_share": share}), _cpu_peak()))
        return out

    for name, share, slow in (("quiet", 0.0, 1.0), ("busy", 0.7, 3.0)):
        save_sweep(tmp_path / f"{name}.json", _sweep(name, recs(share, slow)))
    files = [str(tmp_path / "quiet.json"), str(tmp_path / "busy.json")]
    out = CliRunner().invoke(main, ["compare", *files, "--no-fit"])
    assert out.exit_code == 0, out.output
    assert "contention: busy was measured under contention in 8 of 8 records" in out.output
    out = CliRunner().invoke(main, ["fit", *files, "--exclude-contended"])
    assert "left out (--exclude-contended)" in out.output


def test_old_files_load_and_new_fields_round_trip(tmp_path):
    golden = Path(__file__).parent / "golden" / "v1_sweep.json"
    (old,) = load_sweeps([golden])
    assert old.peak.basis == "" and "basis" not in old.peak.to_json()
    assert not any(is_flagged(r) for r in old.records) and contention_note([old]) is None
    new = replace(old, peak=replace(old.peak, basis="cores ran faster"),
                  records=(_rec(0, 0.5),), extra={"machine": {"contended_share": CONTENDED_SHARE, "passes": []}})
    save_sweep(tmp_path / "n.json", new)
    (back,) = load_sweeps([tmp_path / "n.json"])
    assert back.peak.basis == "cores ran faster" and FLAG in back.records[0].flags
    assert back.records[0].extra["machine"]["other_share"] == 0.5 and back.extra["machine"]["passes"] == []


# ---- time what you mean --------------------------------------------------------------------------
def test_worker_start_up_has_its_own_limit_and_a_failed_start_does_not_stop_the_sweep():
    from mfu_sweep.measure.task import Task
    from mfu_sweep.measure.timing import TimingConfig
    from mfu_sweep.measure.worker import SubprocessRunner

    task = Task(shape=Shape(1, 64, 64, 64), dtype="fp32", check=False,
                timing=TimingConfig(budget_s=0.05, min_samples=3, max_samples=5))
    runner = SubprocessRunner("cpu", None, None, per_task=True)
    try:
        runner.start_timeout_s = 0.001  # no worker imports torch that fast
        failed = runner.run(task, timeout_s=60)
        assert failed.status == "error" and failed.extra["timeout_phase"] == "start-up"
        assert "--start-timeout" in failed.error
        runner.start_timeout_s = 300.0
        # The restarted worker's start-up (torch import, device initialisation) is timed apart from the shape.
        rec = runner.run(task, timeout_s=60)
        assert rec.status == "ok" and rec.extra["worker_start_s"] > 0
    finally:
        runner.close()


def test_report_rows_legend_lines_and_analysis_json_say_why_and_how_many():
    from mfu_sweep.present.machine_facts import legend_notes, machine_facts, machine_json

    peak = replace(_cpu_peak(), basis="cores ran at ~2.82 GHz under load (measured), the spec clock is 2.60 GHz")
    recs = [_rec(0, 0.01), _rec(1, 0.8), _rec(1, 0.5)]
    rows = dict(machine_facts(peak, recs))
    assert rows["peak basis"] == peak.basis
    assert rows["contention"].startswith("2 of 3 records flagged contended in 1 pass (")
    assert "80%" in rows["contention"]
    assert dict(machine_facts(_cpu_peak(), recs[:1]))["contention"].startswith("none of 1 observed record (")
    assert legend_notes("cpu", _cpu_peak(), recs[1:2]) == ["cpu: 1 of 1 point measured under contention"]
    assert legend_notes("cpu", peak, recs) == [f"cpu: {peak.basis}", "cpu: 2 of 3 points measured under contention"]
    (row,) = machine_json([replace(_sweep("cpu", recs), peak=peak)])
    assert (row["contended_records"], row["contended_passes"], row["peak_basis"]) == (2, [1], peak.basis)
