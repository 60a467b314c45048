"""A newcomer's walk: bad inputs a new user types, each answered by one line that names the fix, never a traceback.

Every writer (sweep, merge, export, import, ceilings, plot, report) is pointed at
``/proc`` and ``/sys``, at a read-only mount, at a full disk (a 64 KiB tmpfs) and,
for permissions, at a mode-500 directory from a process without
``CAP_DAC_OVERRIDE`` (the capability that lets root ignore file permissions; a
non-root user's view). Mounts need root: without it those cases skip and say
why. The rest are the comparison, resume, dtype and device mistakes of the
newcomer-errors page. Most cases run in-process (CliRunner); a few are real
subprocesses. ``python tests/test_newcomer.py`` prints the walk as the
Markdown table of docs/newcomer-errors.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main

HERE = Path(__file__).resolve().parent
GOLDEN = str(HERE / "golden" / "v1_sweep.json")
XLA = str(HERE / "data" / "import" / "xla_main_excerpt.txtpb")
LABEL = json.loads(Path(GOLDEN).read_text())["device"]["label"]
FIX_WORDS = ("--", "use ", "pass ", "try ", "drop ", "write elsewhere", "start a new", "relabel", "continue")


def writer_args(name: str, where: str) -> list[str]:
    """The command line of writer ``name`` with its output inside the directory ``where``."""
    return {
        "sweep": ["sweep", "--device", "cpu", "--shape", "64x64x64", "--repeats", "1", "--quiet", "--isolate", "none",
                  "-o", f"{where}/s.json"],
        "merge": ["merge", GOLDEN, "-o", f"{where}/m.json"],
        "export": ["export", GOLDEN, "-o", f"{where}/x.csv"],
        "import": ["import", "xla-perf-table", XLA, "-o", f"{where}/imp"],
        "ceilings": ["ceilings", "--device", "cpu", "--size", "64", "--budget-s", "0.05", "-o", f"{where}/c.json"],
        "plot": ["plot", GOLDEN, "-o", f"{where}/p"],
        "report": ["report", GOLDEN, "-o", f"{where}/r"],
    }[name]


WRITERS = ("sweep", "merge", "export", "import", "ceilings", "plot", "report")


def invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res.exit_code, res.output


def one_line_error(code: int, output: str, *fragments: str) -> str:
    """The single ``Error:`` line of a failed command; it has every fragment and a fix."""
    assert code != 0, output
    assert "Traceback" not in output, output
    errors = [ln for ln in output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1, output
    line = errors[0]
    assert "BackendError" not in line and "PermissionError" not in line and "OSError" not in line, line
    for fragment in fragments:
        assert fragment in line, line
    assert any(w in line for w in FIX_WORDS), f"no fix in: {line}"
    return line


# -- every writer at /proc and /sys ------------------------------------------------


@pytest.mark.parametrize("where", ["/proc", "/sys"])
@pytest.mark.parametrize("writer", WRITERS)
def test_writer_into_proc_and_sys(writer: str, where: str) -> None:
    one_line_error(*invoke(*writer_args(writer, where)), "cannot write", where)


# -- read-only mount, full disk, no permission --------------------------------------


def _mount(*args: str) -> str | None:
    """Run mount; the reason it failed, or None."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return "mounting needs root and mount(8)"
    res = subprocess.run(["mount", *args], capture_output=True, text=True)
    return None if res.returncode == 0 else f"mount {' '.join(args)} failed: {res.stderr.strip()}"


@pytest.fixture(scope="module")
def read_only_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("ro")
    why = _mount("--bind", str(d), str(d))
    if why:
        pytest.skip(why)
    try:
        why = _mount("-o", "remount,ro,bind", str(d))
        if why:
            pytest.skip(why)
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=False)


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("full")
    why = _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d))
    if why:
        pytest.skip(why)
    try:
        fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # fill it: a write fails once the 64 KiB are used
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=False)


@pytest.mark.parametrize("writer", WRITERS)
def test_writer_into_read_only_mount(writer: str, read_only_dir: Path) -> None:
    one_line_error(*invoke(*writer_args(writer, str(read_only_dir))), "read-only file system")


@pytest.mark.parametrize("writer", WRITERS)
def test_writer_onto_full_disk(writer: str, full_disk: Path) -> None:
    one_line_error(*invoke(*writer_args(writer, str(full_disk))), "no space left", "free some space")


def test_disk_filling_during_a_sweep_keeps_the_file(tmp_path: Path) -> None:
    disk = tmp_path / "small"
    disk.mkdir()
    why = _mount("-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk))  # room for the header, not for many records
    if why:
        pytest.skip(why)
    try:
        out = disk / "s.json"
        shapes = [a for m in (64, 80, 96, 112, 128, 144, 160, 176) for a in ("--shape", f"{m}x{m}x{m}")]
        code, text = invoke("sweep", *FAST, "--repeats", "1", "--quiet", *shapes, "-o", str(out))
        one_line_error(code, text, "no space left", str(out))
        if out.exists():  # the header fitted: what was measured stays, and says it is incomplete
            assert "--resume" in text
            from mfu_sweep.records.results import load_sweeps
            from mfu_sweep.records.summaries import incomplete_reason

            (sweep,) = load_sweeps([out])
            assert incomplete_reason(sweep) is not None and len(sweep.records) < 8
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def _as_user_without_override(args: list[str]) -> subprocess.CompletedProcess:
    """Run the CLI in a real subprocess that cannot ignore file permissions (non-root, or root without the cap)."""
    cmd = [sys.executable, "-m", "mfu_sweep", *args]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root, and no setpriv(1) to drop CAP_DAC_OVERRIDE")
        caps = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", *cmd]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("writer", ["sweep", "merge", "plot"])
def test_writer_into_directory_without_permission(writer: str, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        res = _as_user_without_override(writer_args(writer, str(locked)))
    finally:
        locked.chmod(0o700)
    if "setpriv" in res.stderr and "Error:" not in res.stderr:
        pytest.skip(f"setpriv cannot drop the capability here: {res.stderr.strip()}")
    one_line_error(res.returncode, res.stdout + res.stderr, "not writable", "permission denied")


def test_real_process_sys_output_is_one_line() -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    res = subprocess.run([sys.executable, "-m", "mfu_sweep", *writer_args("merge", "/sys")], capture_output=True,
                         text=True, env=env, timeout=120)
    line = one_line_error(res.returncode, res.stdout + res.stderr, "/sys")
    assert res.stdout + res.stderr == line + "\n"


# -- the overwrite rule is the same for every writer --------------------------------


@pytest.mark.parametrize("writer", ["merge", "export", "plot", "report"])
def test_second_write_needs_force(writer: str, tmp_path: Path) -> None:
    args = writer_args(writer, str(tmp_path))
    code, out = invoke(*args)
    assert code == 0, out
    one_line_error(*invoke(*args), "--force")
    code, out = invoke(*args, "--force")
    assert code == 0, out


@pytest.mark.parametrize("writer", ["sweep", "merge", "ceilings"])
def test_json_writer_refuses_a_csv_name_and_writes_nothing(writer: str, tmp_path: Path) -> None:
    args = [a.replace(".json", ".csv") for a in writer_args(writer, str(tmp_path))]
    line = one_line_error(*invoke(*args), ".csv", "JSON", ".json")
    assert "-o" in line and list(tmp_path.iterdir()) == []


def test_sweep_library_refuses_a_csv_name_before_the_device_opens(tmp_path: Path) -> None:
    from mfu_sweep.measure.sweep import SweepError, SweepPlan, run_sweep

    with pytest.raises(SweepError, match=r"'.*out.csv' ends in .csv, but the file written is a JSON sweep result"):
        run_sweep(SweepPlan(device="cpu", tasks=[], output=tmp_path / "out.csv", isolate="none"))
    assert list(tmp_path.iterdir()) == []


# -- comparisons ------------------------------------------------------------------------


def _copy_run(tmp_path: Path, name: str, **settings: object) -> str:
    data = json.loads(Path(GOLDEN).read_text())
    data["run"]["id"] = f"run-{name}"
    data["settings"] = {**data.get("settings", {}), **settings}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_same_label_twice_is_refused_with_file_selector_hint(tmp_path: Path) -> None:
    a, b = _copy_run(tmp_path, "before"), _copy_run(tmp_path, "after")
    line = one_line_error(*invoke("compare", a, b, "--a", LABEL, "--b", LABEL, "--no-fit"))
    assert f"--a {a}:{LABEL} --b {b}:{LABEL}" in line


def test_two_runs_of_one_label_compare_with_file_selectors(tmp_path: Path) -> None:
    a, b = _copy_run(tmp_path, "before"), _copy_run(tmp_path, "after")
    code, out = invoke("compare", a, b, "--a", f"{a}:{LABEL}", "--b", f"{b}:{LABEL}", "--no-fit")
    assert code == 0, out
    assert f"{LABEL}@before vs {LABEL}@after" in out


def test_one_label_in_two_files_without_selectors_hints_at_them(tmp_path: Path) -> None:
    a, b = _copy_run(tmp_path, "before"), _copy_run(tmp_path, "after")
    line = one_line_error(*invoke("compare", a, b, "--no-fit"))
    assert f"--a {a}:{LABEL}" in line


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_pooling_runs_with_different_settings_is_refused(command: str, tmp_path: Path) -> None:
    a, c = _copy_run(tmp_path, "a", repeats=1), _copy_run(tmp_path, "c", repeats=1, cache="flush")
    line = one_line_error(*invoke(command, a, c), "settings.cache", "--a")
    assert a in line and c in line


def test_unknown_file_selector_label(tmp_path: Path) -> None:
    a, b = _copy_run(tmp_path, "before"), _copy_run(tmp_path, "after")
    one_line_error(*invoke("compare", a, b, "--a", f"{a}:nope", "--b", f"{b}:{LABEL}"), "no series labelled 'nope'")


@pytest.mark.parametrize("args,fix", [([], "--a LABEL/DTYPE/MODE --b LABEL/DTYPE/MODE"),
                                      (["--a", "x", "--b", "y"], "use one of those labels")])
def test_comparison_that_cannot_be_made_says_how(args: list[str], fix: str) -> None:
    one_line_error(*invoke("compare", GOLDEN, *args, "--no-fit"), fix)


# -- sweep: before and after a run ------------------------------------------------------

FAST = ["--device", "cpu", "--budget-s", "0.02", "--max-samples", "5", "--min-samples", "3", "--isolate", "none",
        "--no-check"]


def test_resume_with_force_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    out.write_text("{}")
    one_line_error(*invoke("sweep", *FAST, "--resume", "--force", "-o", str(out)), "--resume", "--force")


def test_cpu_index_is_refused() -> None:
    one_line_error(*invoke("sweep", "--device", "cpu:3", "--dry-run"), "cpu:3", "--device cpu")


def test_unknown_device_is_one_line() -> None:
    one_line_error(*invoke("sweep", "--device", "tpu", "--dry-run"), "unknown device 'tpu'")


def test_cuda_without_cuda_names_no_class_and_hints() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    one_line_error(*invoke("sweep", "--device", "cuda", "--shape", "64x64x64", "--isolate", "none", "-o", "x.json"),
                   "--device cpu")
    assert not Path("x.json").exists()


def test_unsupported_dtype_is_refused_before_the_sweep(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    line = one_line_error(*invoke("sweep", *FAST, "--shape", "64x64x64", "--dtype", "tf32", "-o", str(out)),
                          "--dtype tf32", "fp32")
    assert "drop --dtype tf32" in line and not out.exists()


def test_dry_run_prints_plan_and_estimate_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    code, text = invoke("sweep", "--device", "cpu", "--max-flop", "1e8", "--repeats", "3", "--dry-run", "-o", str(out))
    assert code == 0, text
    assert "passes: 3" in text and "shapes: " in text and "estimated time:" in text and "cost model" in text
    n_shapes = int(text.split("shapes: ")[1].split()[0])
    assert f"{3 * n_shapes} measurements" in text
    assert not out.exists() and not list(tmp_path.iterdir())


def test_dry_run_counts_in_words_that_agree_with_one() -> None:
    """One shape, one pass: "1 measurement", no shuffled order of one, no "5.24e+05 to 5.24e+05" range."""
    code, text = invoke("sweep", "--device", "cpu", "--shape", "64x64x64", "--repeats", "1", "--dry-run")
    assert code == 0, text
    assert "shapes: 1 (5.24e+05 FLOP): 64x64x64" in text
    assert "passes: 1 over the shape: 1 measurement\n" in text and "the one measurement stops" in text
    code, text = invoke("sweep", "--device", "cpu", "--shape", "64x64x64", "--shape", "96x96x96", "--repeats", "1",
                        "--dry-run")
    assert code == 0, text
    assert "passes: 1 over the shapes, in a shuffled order: 2 measurements\n" in text
    assert "each of 2 measurements stops" in text


def test_counted_words() -> None:
    from mfu_sweep.util.text import counted

    assert [counted(n, "measurement") for n in (0, 1, 2)] == ["0 measurements", "1 measurement", "2 measurements"]
    assert [counted(n, "pass", "passes") for n in (1, 3)] == ["1 pass", "3 passes"]


def test_resume_takes_settings_from_the_file_and_refuses_other_flags(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    code, text = invoke("sweep", *FAST, "--shape", "64x64x64", "--shape", "96x96x96", "--repeats", "2", "-o", str(out))
    assert code == 0, text
    assert "pass 1/2" in text and "pass 2/2" in text  # the bar counts each pass's shapes, not shape x pass
    data = json.loads(out.read_text())
    assert data["run"]["planned"] == 4 and len(data["records"]) == 4
    data["records"] = data["records"][:1]
    data["run"]["finished_at"] = None  # as a Ctrl-C leaves it
    out.write_text(json.dumps(data))
    code, text = invoke("validate", str(out))
    assert code == 0 and "incomplete" in text and "1 of 4" in text and "--resume" in text
    code, text = invoke("fit", str(out))
    assert "incomplete sweep" in text
    line = one_line_error(*invoke("sweep", "--resume", "--repeats", "3", "-o", str(out)),
                          "--repeats=3", "settings.repeats=2")
    assert "drop --repeats" in line
    code, text = invoke("sweep", "--resume", "--quiet", "-o", str(out))
    assert code == 0, text
    data = json.loads(out.read_text())
    assert len(data["records"]) == 4 and data["run"]["finished_at"]
    # what to measure may change on resume (a shape added); how to measure may not
    code, text = invoke("sweep", "--resume", "--quiet", "--shape", "64x64x64", "--shape", "96x96x96",
                        "--shape", "32x32x32", "-o", str(out))
    assert code == 0, text
    data = json.loads(out.read_text())
    assert len(data["records"]) == 6 and data["run"]["planned"] == 6
    assert data["settings"]["repeats"] == 2
    assert data["run"]["resumed_argv"][-1][:3] == ["mfu-sweep", "sweep", "--resume"]
    code, text = invoke("validate", str(out))
    assert code == 0 and text.strip().endswith(": ok")


def test_resume_of_a_file_from_before_repeats_keeps_its_settings(tmp_path: Path) -> None:
    data = json.loads(Path(GOLDEN).read_text())  # its command has no --repeats: it ran one pass
    assert "--repeats" not in data["run"]["argv"] and "repeats" not in data["settings"]
    data["records"] = data["records"][:2]
    data["run"]["finished_at"] = None
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    code, text = invoke("sweep", "--resume", "--dry-run", "-o", str(path))
    assert code == 0, text
    assert "passes: 1 over" in text and "2 already in the file" in text and "0.05 s budget" in text


def test_ceilings_prints_json_only_with_json(tmp_path: Path) -> None:
    args = ["ceilings", "--device", "cpu", "--size", "64", "--budget-s", "0.05", "--dtype", "fp32"]
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["device"]["backend"] == "cpu"  # the summary lines went to stderr
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0 and "copy bandwidth" in res.stdout and "{" not in res.stdout


def test_figures_say_a_sweep_is_incomplete(tmp_path: Path) -> None:
    from mfu_sweep.present.figures.marks import incomplete_note
    from mfu_sweep.records.results import load_sweeps

    data = json.loads(Path(GOLDEN).read_text())
    data["run"]["finished_at"] = None
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(data))
    (sweep,) = load_sweeps([path])
    assert incomplete_note([sweep]) == f"incomplete sweep: {LABEL} ({len(sweep.records)} measurements)"
    assert incomplete_note(load_sweeps([GOLDEN])) is None
    data["records"], data["run"]["planned"] = data["records"][:1], 1
    path.write_text(json.dumps(data))
    (one,) = load_sweeps([path])
    assert incomplete_note([one]) == f"incomplete sweep: {LABEL} (1 of 1 measurement)"  # never "1 measurements"
    from mfu_sweep.records.summaries import incomplete_reason

    assert "(1 of 1 planned measurement, no finish time)" in incomplete_reason(one)
    # vs-flops: a sweep whose one record is ok gives no status figure (asking for one is an error, test_plot)
    code, text = invoke("plot", str(path), "-o", str(tmp_path / "p"), "--figure", "vs-flops")
    assert code == 0 and "incomplete sweep" in text, text


# -- the walk as a table (docs/newcomer-errors.md) ----------------------------------------


def walk() -> list[tuple[str, str]]:
    """(command, first error line) for the table of the newcomer page (run from a scratch directory)."""
    cases: list[list[str]] = [writer_args(w, d) for d in ("/proc", "/sys") for w in WRITERS]
    cases += [["sweep", "--device", "cpu:3", "--dry-run"], ["sweep", "--device", "cuda", "--isolate", "none"],
              ["sweep", "--device", "cpu", "--dtype", "tf32", "--isolate", "none", "--shape", "64x64x64"]]
    rows = []
    for args in cases:
        _, out = invoke(*args)
        rows.append((" ".join(["mfu-sweep", *args]).replace(str(HERE) + "/", "tests/"),
                     next((ln for ln in out.splitlines() if ln.startswith("Error:")), "(no error)")))
    return rows


if __name__ == "__main__":  # pragma: no cover - prints the docs table
    fmt: Callable[[str], str] = lambda s: s.replace("|", "\\|")  # noqa: E731
    print("| command | answer |\n|---|---|")
    for cmd, line in walk():
        print(f"| `{fmt(cmd)}` | {fmt(line)} |")
