"""Real CPU sweeps through the CLI: end to end, resume, isolation, timeouts, crashes, compile mode."""

from __future__ import annotations

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
from mfu_sweep.measure.passes import order_seed, shuffled
from mfu_sweep.records.journal import journal_path
from mfu_sweep.records.results import ResultError, Sweep, load_sweeps, read_json, validate_file

FAST = ["--device", "cpu", "--budget-s", "0.05", "--max-samples", "10", "--quiet", "--repeats", "1"]


def cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def records(path: Path) -> list[dict]:
    """The file's records as every reader sees them: with a running or killed sweep's journal folded in."""
    return read_json(path)["records"]


def test_in_process_sweep_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    refused = CliRunner().invoke(main, ["sweep", *FAST, "--isolate", "none", "--shape", "64x64x64",
                                        "--dtype", "fp32", "--dtype", "tf32", "-o", str(out)])
    # a dtype the device cannot run is refused before the sweep, with the list it can run; nothing is written
    assert refused.exit_code == 1 and "--dtype tf32" in refused.output and "runs fp32, bf16" in refused.output
    assert not out.exists()
    res = cli("sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "--shape", "2x32x48x64",
              "--dtype", "fp32", "--dtype", "bf16", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "4/4 ok" in res.output
    assert validate_file(out) == []
    (sweep,) = load_sweeps([out])
    assert sweep.run["planned"] == 4
    by = {(str(r.shape), r.dtype): r for r in sweep.records}
    ok = by[("64x64x64", "fp32")]
    assert ok.status == "ok" and ok.rel_error < 1e-5 and ok.mfu > 0 and ok.timer == "host"
    assert by[("2x32x48x64", "bf16")].rel_error < 2e-2
    assert sweep.run["finished_at"] and sweep.run["argv"][0] == "mfu-sweep"
    assert sweep.settings["isolate"] == "none"


def test_square_family_default_output_path(tmp_path: Path) -> None:
    res = cli("sweep", *FAST, "--isolate", "none", "--max-flop", "3e6", "--points", "2")
    assert res.exit_code == 0, res.output
    files = list(Path("sweeps").glob("*.json"))
    assert len(files) == 1 and files[0].stem.endswith("-cpu")
    assert {r["family"] for r in records(files[0])} == {"square"}


def _bad(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code != 0, res.output
    assert "Traceback" not in res.output and res.exception is None or isinstance(res.exception, SystemExit)
    return res.output


@pytest.mark.parametrize("args,fragment", [
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--device", "cpu:x"], "index 'x'"),
    (["--dtype", "fp64"], "'fp64'"),
    (["--chip", "h999"], "unknown chip 'h999'"),
    (["--shape", "10x0x10"], "'10x0x10': shape field n=0"),
    (["--shape", "10x10"], "'10x10'"),
    (["--shape-file", "/nonexistent.csv"], "/nonexistent.csv"),
    (["--min-flop", "-5"], "-5"),
    (["--max-flop", "1e3", "--min-flop", "1e6"], "max-flop"),
    (["--peak-tflops", "0"], "0.0"),
    (["--spec-file", "/nonexistent.toml"], "/nonexistent.toml"),
    (["--shape", "16777216x16777216x16"], "GiB"),
    (["--cache", "cold"], "'cold'"),
    (["--cache", "flush", "--timer", "graph"], "--cache flush"),
    (["--threads", "0"], "--threads"),
    (["--threads", "4096"], "usable cores"),
    (["--device", "cuda", "--threads", "1"], "CPU device only"),
])
def test_bad_sweep_options(args: list[str], fragment: str) -> None:
    out = _bad("sweep", "--isolate", "none", "--quiet", *args)
    assert fragment in out, out


def test_existing_output_needs_resume_or_force(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("{}")
    assert "--resume" in _bad("sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "-o", str(out))
    assert "cannot resume" in _bad("sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "-o",
                                   str(tmp_path / "none.json"), "--resume")


def test_unwritable_output(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user that ignores permissions")
        assert "not writable" in _bad("sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "-o",
                                      str(ro / "r.json"))
    finally:
        ro.chmod(0o700)
    assert "cannot be created" in _bad("sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "-o",
                                       "/proc/nope/r.json")


def test_resume_from_other_device_or_version(tmp_path: Path) -> None:
    golden = json.loads((Path(__file__).parent / "golden" / "v1_sweep.json").read_text())
    other = dict(golden, device={**golden["device"], "name": "Some Other CPU"})
    f = tmp_path / "other.json"
    f.write_text(json.dumps(other))
    # --resume takes the file's own command (FAST's --max-samples would differ from it and be refused)
    assert "device.name='Some Other CPU'" in _bad("sweep", "-o", str(f), "--resume")
    f.write_text(json.dumps(dict(golden, schema_version=7)))
    assert "schema_version=7" in _bad("sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "-o", str(f),
                                      "--resume")


def test_resume_keeps_one_way_of_measuring(tmp_path: Path) -> None:
    import torch

    threads = torch.get_num_threads()
    out = tmp_path / "r.json"
    assert cli("sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "-o", str(out)).exit_code == 0
    msg = _bad("sweep", *FAST, "--isolate", "none", "--shape", "96x96x96", "--cache", "flush", "-o", str(out),
               "--resume")
    assert "settings.cache='rotate'" in msg and "'flush'" in msg
    msg = _bad("sweep", *FAST, "--isolate", "none", "--shape", "96x96x96", "--threads", "1", "-o", str(out),
               "--resume")
    assert "settings.threads=None" in msg
    assert len(records(out)) == 1
    # --isolate none ran the refused --threads 1 attempt in this process, which set torch's global thread
    # count; a real CLI run is a fresh process. Undo it, or the resume (rightly) sees another fingerprint.
    torch.set_num_threads(threads)
    res = cli("sweep", *FAST, "--isolate", "none", "--shape", "96x96x96", "-o", str(out), "--resume")
    assert res.exit_code == 0 and len(records(out)) == 2


# ----- isolation: real worker processes -----------------------------------

def run_cli_subprocess(args: list[str], env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mfu_sweep", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, **kw)


def test_timeout_and_crash_become_records_and_sweep_goes_on(tmp_path: Path) -> None:
    # The hang sleeps an hour, so the whole --timeout is waited out: 3 s is ~20x what a FAST shape's own
    # work takes on an idle 2-core VM (a worker's start-up is not timed against it: --start-timeout).
    out = tmp_path / "r.json"
    env = {"MFU_SWEEP_TEST_FAULT": "crash:96x96x96,hang:128x128x128"}
    proc = run_cli_subprocess(["sweep", *FAST, "--shape", "64x64x64", "--shape", "96x96x96", "--shape",
                               "128x128x128", "--shape", "160x160x160", "--timeout", "3", "-o", str(out)],
                              env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "2/4 ok; 1 timeout, 0 oom, 0 mismatch, 1 error" in proc.stdout
    by = {r["shape"]["m"]: r for r in records(out)}
    assert by[96]["status"] == "error" and "SIGSEGV" in by[96]["error"]
    assert by[128]["status"] == "timeout" and "within 3 s" in by[128]["error"]
    assert by[64]["status"] == by[160]["status"] == "ok"
    assert by[160]["samples_s"]


def test_progress_into_a_file_is_plain_lines_never_frames(tmp_path: Path) -> None:
    """``sweep ... 2> err.txt`` (a make or CI log): a line per pass, none over 300 characters, no ``\r``."""
    out = tmp_path / "r.json"
    args = ["sweep", *[a for a in FAST if a != "--quiet"], "--repeats", "2", "--shape", "64x64x64",
            "--shape", "96x96x96", "-o", str(out)]
    with (tmp_path / "err.txt").open("w") as err:
        proc = subprocess.run([sys.executable, "-m", "mfu_sweep", *args], stdout=subprocess.DEVNULL, stderr=err,
                              timeout=300)
    log = (tmp_path / "err.txt").read_bytes().decode()  # read_text() would turn each \r into a line end
    assert proc.returncode == 0, log
    assert "\r" not in log
    lines = log.splitlines()
    closing = [ln.split(",")[0] for ln in lines if ln.startswith("pass ") and " s in all" in ln]
    assert closing == ["pass 1/2: 2/2 shapes", "pass 2/2: 2/2 shapes"]  # (a slow pass adds a line every 15 s)
    assert max(map(len, lines)) <= 300, max(lines, key=len)


def test_injected_oom_is_status_oom(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = cli("sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "--shape", "96x96x96", "-o", str(out),
              env={"MFU_SWEEP_TEST_FAULT": "oom:64x64x64"})
    assert res.exit_code == 0
    assert [r["status"] for r in records(out)] == ["oom", "ok"]


def test_compile_mode_records_compile_time(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = cli("sweep", *FAST, "--isolate", "none", "--shape", "128x128x128", "--mode", "eager", "--mode", "compile",
              "-o", str(out))
    assert res.exit_code == 0, res.output
    by = {r["mode"]: r for r in records(out)}
    comp = by["compile"]
    assert comp["status"] == "ok" and comp["compile_s"] > 0
    assert comp["first_call_s"] > comp["median_s"] and comp["first_call_ratio"] > 1
    assert 0 < comp["mfu"] and comp["rel_error"] < 1e-5
    assert by["eager"]["compile_s"] is None
    assert comp["allocates_output"] is True and "allocates_output" not in by["eager"]  # said in the record


@pytest.mark.slow
def test_cold_compile_really_is_cold(tmp_path: Path) -> None:
    """Four compiles of one shape, each in its own worker: a --cold-compile sweep of two passes (cold twice:
    the second gets no cache hit from the first), then a warm sweep of two passes (the first fills the cache,
    the second reuses it: the control, a hit in the record's compile_cache_hits). Two sweeps of two passes, not four
    of one, so four compiles cost two sweep start-ups."""
    warm_cache = tmp_path / "inductor-warm"
    env = {"TORCHINDUCTOR_CACHE_DIR": str(warm_cache)}
    args = [*FAST[:-2], "--repeats", "2", "--shape", "96x96x96", "--mode", "compile"]
    assert FAST[-2:] == ["--repeats", "1"]

    others: list[float] = []  # others' share of the cores while each shape ran (the record's machine reading)

    hits: dict[str, tuple[int, int]] = {}  # inductor's FX-graph cache hits of each sweep's two passes

    def compile_s(name: str, *extra: str) -> tuple[float, float]:
        out = tmp_path / f"{name}.json"
        proc = run_cli_subprocess(["sweep", *args, "-o", str(out), *extra], env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
        first, second = sorted(records(out), key=lambda r: r["pass"])
        # each compile in a worker of its own: nothing of the first is left in memory for the second
        assert first["worker_pid"] != second["worker_pid"]
        for rec in (first, second):
            assert rec["status"] == "ok" and rec["mode"] == "compile", rec
            if "contended" in rec["flags"]:
                others.append((rec.get("machine") or {}).get("other_share") or 1.0)
        hits[name] = (first["compile_cache_hits"], second["compile_cache_hits"])
        assert first["compile_cache_misses"] >= 1  # the first compile of a fresh cache
        return first["compile_s"], second["compile_s"]

    cold1, cold2 = compile_s("cold", "--cold-compile")
    assert not warm_cache.exists(), "cold runs must not touch the warm cache"
    warm1, warm2 = compile_s("warm")
    assert warm_cache.is_dir() and any(warm_cache.rglob("*")), "a warm run fills the cache"
    assert hits == {"cold": (0, 0), "warm": (0, hits["warm"][1])} and hits["warm"][1] >= 1, hits  # the control
    if others:  # measured, not guessed: under load the four compile times are not comparable
        pytest.skip(f"compile times measured under contention (others took up to {max(others):.0%} of the "
                    f"cores in {len(others)} of the 4 compiles): the cold/warm ratios need a quiet machine")
    # a plain GEMM compiles to one library call (no kernel to build), so a cache hit saves little time: the
    # cache counters above decide; the times only must not show the second cold compile as a hit
    assert cold2 > 0.5 * cold1, f"second cold run got a cache hit: {cold1:.2f} s then {cold2:.2f} s"
    assert warm2 < 1.5 * warm1, f"the warm cache's hit took longer: {warm1:.2f} s then {warm2:.2f} s"
    settings = json.loads((tmp_path / "cold.json").read_text())["settings"]
    assert settings["compile_cache"].startswith("cold")


def test_ctrl_c_abandons_the_shape_in_flight_and_says_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    sizes = [64, 96, 128]
    first, second, last = shuffled(sizes, order_seed(0, 0))  # the order the one pass runs them in
    args = ["sweep", "--device", "cpu", "--budget-s", "0.1", "--quiet", "--repeats", "1", "-o", str(out),
            "--timeout", "600", *[a for s in sizes for a in ("--shape", f"{s}x{s}x{s}")]]
    env = {**os.environ, "MFU_SWEEP_TEST_FAULT": f"hang:{last}x{last}x{last}"}
    # A shell that starts the suite in the background (`make test &`) ignores SIGINT for its children, and a
    # Python started with SIGINT ignored never turns it into KeyboardInterrupt: give the sweep the default.
    proc = subprocess.Popen([sys.executable, "-m", "mfu_sweep", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300  # generous: two busy loops beside the suite slow the worker's start
    while time.time() < deadline:
        try:
            if len(records(out)) == 2:
                break
        except (ResultError, KeyError):
            pass
        time.sleep(0.05)
    time.sleep(0.5)  # the worker is now hanging in the last shape
    proc.send_signal(signal.SIGINT)
    # The hang lasts until --timeout 600: exiting at all within the wait shows Ctrl-C did not wait for it
    # (no wall-clock assert: under load the exit itself may take seconds).
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "--resume" in err and str(out) in err
    assert [r["shape"]["m"] for r in records(out)] == [first, second]
    assert json.loads(out.read_text())["run"]["finished_at"] is None
    assert not journal_path(out).exists()  # Ctrl-C folds the journal: the file stands alone


def _default_labelled_sweep(tmp_path: Path, monkeypatch, cache: str, suffix: str) -> tuple[Path, Sweep]:
    """One 128^3 sweep with ``--cache cache`` and no -o or --label: its file under sweeps/ (its stem ends in
    ``suffix``) and the sweep read back."""
    monkeypatch.chdir(tmp_path)
    res = cli("sweep", *FAST, "--isolate", "none", "--shape", "128x128x128", "--cache", cache, "--threads", "1")
    assert res.exit_code == 0, res.output
    (path,) = Path("sweeps").glob("*.json")
    assert path.stem.endswith(suffix)
    (sweep,) = load_sweeps([path])
    return path, sweep


def test_cache_none_sweep_labels_itself_hot(tmp_path: Path, monkeypatch) -> None:
    _, sweep = _default_labelled_sweep(tmp_path, monkeypatch, "none", "-cpu-hot")
    assert sweep.settings["cache"] == "none" and sweep.records[0].extra["input_sets"] == 1


def test_cache_flush_sweep_labels_itself_and_records_the_policy(tmp_path: Path, monkeypatch) -> None:
    path, sweep = _default_labelled_sweep(tmp_path, monkeypatch, "flush", "-cpu-flush")
    assert sweep.device["label"] == path.stem and sweep.device["threads"] == 1
    assert sweep.settings["cache"] == "flush" and sweep.settings["threads"] == 1
    (rec,) = sweep.records
    assert rec.status == "ok" and rec.timer == "host+flush" and rec.extra["cache"] == "flush"
    assert rec.extra["input_sets"] == 1 and rec.extra["flush_bytes"] >= 2**20
    # the peak estimate follows the thread count: one core
    assert "fp32: 1 core x" in sweep.peak.source


def test_run_argv_is_this_invocation_not_the_host_program(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["sweep", *FAST, "--isolate", "none", "--shape", "64x64x64", "-o", str(out)]
    assert cli(*args).exit_code == 0
    (sweep,) = load_sweeps([out])
    assert sweep.run["argv"] == ["mfu-sweep", *args]


def test_sweep_parent_process_never_imports_torch(tmp_path: Path) -> None:
    """The parent only schedules and writes; torch belongs to the worker (benchmarks/isolation_overhead.py).
    Also on --resume -o FILE, which once imported torch to name the default output it did not need."""
    out = str(tmp_path / "r.json")
    code = ("import sys; from mfu_sweep.cli import main; "
            f"main(['sweep', '--device', 'cpu', '--quiet', '--budget-s', '0.05', '--repeats', '2', "
            f"'--shape', '64x64x64', "
            f"'--timer', 'auto', '--soak', '0', '--threads', '1', '-o', {out!r}], "
            "standalone_mode=False); "
            f"main(['sweep', '--resume', '--quiet', '--shape', '64x64x64', '--shape', '80x80x80', '-o', {out!r}], "
            "standalone_mode=False); "
            "assert 'torch' not in sys.modules, 'the sweep parent imported torch'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


# ----- start-up work is the worker's, not the shape's ------------------------------------------

def test_128_cubed_after_a_timed_out_shape_is_ok_in_every_pass_at_timeout_2(tmp_path: Path) -> None:
    """Every 128^3 record runs in a fresh worker (a new pass, or the restart after the hung shape).

    Two passes show both: pass 0 runs 96^3 first (128^3 then runs in the worker started after the hang),
    pass 1 runs 128^3 first (the first shape of the pass's fresh worker), as the records' order shows.
    ``--target-ci`` is never reached, so each 128^3 measurement runs its whole 1 s budget (wall time,
    whatever the load): the shape's own work is ~1.1 s of the 2 s limit. Before the fix the first eager
    shape of a worker also imported torch._dynamo (1.3 s on an idle 2-core VM) against its --timeout,
    and 1 s + 1.3 s > 2 s in every pass. Robust under load by construction: on a starved machine the
    shape's own work can pass 2 s too, so a 128^3 record may time out only where the sweep's own machine
    reading flagged it ``contended`` (others used the cores); on a quiet machine every pass must be ok.
    The twin below checks the same fix without a clock.
    """
    passes = 2
    out = tmp_path / "r.json"
    proc = run_cli_subprocess(["sweep", "--device", "cpu", "--quiet", "--repeats", str(passes), "--budget-s", "1",
                               "--target-ci", "1e-9", "--max-samples", "100000", "--timeout", "2",
                               "--shape", "96x96x96", "--shape", "128x128x128", "-o", str(out)],
                              env={"MFU_SWEEP_TEST_FAULT": "hang:96x96x96"}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    recs = records(out)
    assert [[r["shape"]["m"] for r in recs if r["pass"] == p] for p in range(passes)] == [[96, 128], [128, 96]]
    by = {(r["shape"]["m"], r["pass"]): r for r in recs}
    assert [by[96, p]["status"] for p in range(passes)] == ["timeout"] * passes
    quiet = [by[128, p] for p in range(passes) if "contended" not in by[128, p]["flags"]]
    assert [(r["status"], r["error"]) for r in quiet] == [("ok", None)] * len(quiet), \
        [(r["machine"], r.get("worker_start_s")) for r in quiet]
    ok = [by[128, p] for p in range(passes) if by[128, p]["status"] == "ok"]
    assert all(r["stop_reason"] == "budget" and r["worker_start_s"] > 0 for r in ok)


def test_a_workers_first_shape_imports_nothing_its_start_up_could_have(tmp_path: Path):
    """Deterministic twin of the test above: after ``hello`` (the worker's start-up, under --start-timeout)
    an eager shape imports no module, and a compiled one only the code inductor generates for it.

    Why it once failed only in a full run: the start-up compiles a tiny GEMM to import inductor's whole
    pipeline, and when an earlier process had left that GEMM in the shared inductor cache the start-up hit
    the cache, skipped lowering and code generation, and the first compiled shape (a cache miss) paid their
    81 lazy imports (sympy.combinatorics ...). Alone, the cache held both or neither. Now the start-up
    compiles with the graph caches off (``worker._graph_caches_off``), checked here by counting cache hits
    of a start-up whose GEMM is in the cache, and the subprocess has a cache of its own, so what other
    tests (or other users of /tmp/torchinductor_*) left there cannot change what it measures.
    """
    code = (
        "import sys, json\n"
        "from mfu_sweep.measure.worker import hello, initialise_compile\n"
        "from mfu_sweep.measure.bench import run_task\n"
        "from mfu_sweep.measure.task import Task\n"
        "from mfu_sweep.measure.timing import TimingConfig\n"
        "from mfu_sweep.gemm.shapes import Shape\n"
        "backend, info = hello('cpu', None, None, modes=['eager', 'compile'])\n"
        "new = {}\n"
        "for mode in ('eager', 'compile'):\n"
        "    before = set(sys.modules)\n"
        "    rec = run_task(backend, Task(Shape(1, 96, 96, 96), 'fp32', mode, timing=TimingConfig(budget_s=0.02)))\n"
        "    new[mode] = [rec.status, sorted(set(sys.modules) - before)]\n"
        "import torch\n"
        "from torch._dynamo.utils import counters\n"
        "from mfu_sweep.measure.worker import _tiny_gemm\n"
        "hits = lambda: counters['inductor']['fxgraph_cache_hit'] + counters['aot_autograd']['autograd_cache_hit']\n"
        "_tiny_gemm(backend, 'compile'); torch._dynamo.reset()\n"  # the start-up's own GEMM, into the cache
        "base = hits()\n"
        "_tiny_gemm(backend, 'compile'); torch._dynamo.reset()\n"  # control: compiled again, it is a hit
        "control = hits() - base\n"
        "initialise_compile(backend, True)\n"
        "print(json.dumps({'new': new, 'env': info['environment'], 'control_hits': control,\n"
        "                  'start_up_hits': hits() - base - control}))\n"
    )
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["new"]["eager"] == ["ok", []]
    status, mods = got["new"]["compile"]
    assert status == "ok" and not [m for m in mods if m.startswith(("torch._dynamo", "torch._inductor.compile_fx",
                                                                      "torch.fx", "sympy"))], mods
    assert got["env"]["compile_init_s"] > 0 and "compile_init_error" not in got["env"]
    # the tiny GEMM is in the cache (a second compile of it hits), yet the start-up compiles it afresh
    assert got["control_hits"] > 0 and got["start_up_hits"] == 0, got


def test_a_resume_with_other_shapes_counts_what_the_file_holds_and_what_the_run_costs(tmp_path: Path) -> None:
    """Issue 36: a file of 4 records resumed with 3 other shapes over its 2 passes is 6 measurements to make,
    none of them in the file (not "4 already in the file ... each of 2"), and afterwards 10 planned, 10 held."""
    out = tmp_path / "r.json"
    res = cli("sweep", *FAST, "--isolate", "none", "--repeats", "2", "--shape", "64x64x64", "--shape", "96x96x96",
              "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "device time:" in res.output and "timing loops of 4 shapes" in res.output
    assert "the sweep's own overhead: median" in res.output
    recs = load_sweeps([out])[0].records
    assert all(r.extra["worker_s"] >= r.extra["measure_wall_s"] and r.extra["overhead_s"] >= 0 for r in recs)
    new = ["--shape", "32x32x32", "--shape", "48x48x48", "--shape", "80x80x80"]
    res = cli("sweep", "--resume", "--dry-run", "-o", str(out), *new)
    assert res.exit_code == 0, res.output
    assert "6 measurements, none in the file yet; the file's 4 other records stay as they are\n" in res.output
    assert "each of 6 measurements stops" in res.output
    assert "device time" in res.output and "medians of the file's 4 records" in res.output
    first = records(out)
    res = cli("sweep", "--resume", "-o", str(out), *new)
    assert res.exit_code == 0, res.output
    assert records(out)[:4] == first, "a finished record must not be re-measured"
    (sweep,) = load_sweeps([out])
    assert sweep.run["planned"] == len(sweep.records) == 10
    assert len(sweep.run["resumed_at"]) == len(sweep.run["resumed_argv"]) == 1
    assert validate_file(out) == [] and cli("validate", str(out)).output.strip().endswith(": ok")
    res = cli("sweep", "--resume", "--dry-run", "-o", str(out), "--shape", "32x32x32", "--shape", "64x64x64")
    assert "4 measurements, 4 already in the file; the file's 6 other records stay as they are" in res.output
    assert "estimated time: 0.0 s (nothing is left to measure" in res.output
