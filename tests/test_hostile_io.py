"""Issue 47, the I/O half: nothing destroyed, nothing hidden.

Every writer is given a device node, a FIFO, a socket and a symlink to a device as its output, with
``--force``: each refuses in one line, and the node is still the node it was afterwards. ``report
--force`` removes only files a report wrote (its manifest) and names every other file it leaves. Reads
never block and never run away: a FIFO, a device or a socket as a result file, a journal or a shape
file is refused before it is opened. ``-`` is standard input and standard output. A 300-character
file name is one line, never a traceback. The sweep files are the golden file and SYNTHETIC sweeps
(``tests/synthetic.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from synthetic import example_pair, write_sweep

from mfu_sweep.cli import main
from mfu_sweep.records.journal import journal_path
from mfu_sweep.util.manifest import MANIFEST

HERE = Path(__file__).parent
GOLDEN = HERE / "golden" / "v1_sweep.json"
MAMF = HERE / "data" / "import" / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"
MAMF_FILE = "NVIDIA-H100-80GB-HBM3-57a10f45.json"  # the file import names after MAMF's device
PRECIOUS = "the user's own figure"


def run(*args: str | Path, stdin: str | bytes | None = None) -> Result:
    res = CliRunner().invoke(main, [str(a) for a in args], input=stdin)
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def refused(res: Result, *fragments: str) -> str:
    """The one ``Error:`` line of a refused command (exit 1 or 2), holding each fragment."""
    assert res.exit_code in (1, 2), res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("Error")]
    assert all(f in line for f in fragments), line
    return line


# -- special files: made here, checked afterwards --------------------------------------------------------------

def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def unix_socket(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    here = os.getcwd()
    os.chdir(path.parent)  # bound by its bare name: a pytest-xdist temp path passes AF_UNIX's 108-byte limit
    try:
        sock.bind(path.name)
    finally:
        os.chdir(here)
    sock.close()  # the socket file stays in the file system
    return path


def device(path: Path) -> Path:
    """A character device like /dev/null (major 1, minor 3): needs root, else the test is skipped."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root (CAP_MKNOD)")
    return path


def link_to_device(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/null")
    return path


SPECIALS: dict[str, Callable[[Path], Path]] = {"fifo": fifo, "socket": unix_socket, "device": device,
                                               "link-to-device": link_to_device}
WORDS = {"fifo": "is a FIFO (named pipe)", "socket": "is a socket", "device": "is a character device",
         "link-to-device": "is a symlink to a character device"}


def identity(path: Path) -> tuple[int, int, int, str | None]:
    """What a special file is: its type, device number and inode, and a symlink's target."""
    info = os.lstat(path)
    return stat.S_IFMT(info.st_mode), info.st_rdev, info.st_ino, os.readlink(path) if path.is_symlink() else None


def sweeps(tmp_path: Path) -> tuple[Path, Path]:
    a, b = example_pair()
    return write_sweep(tmp_path / "in", a), write_sweep(tmp_path / "in", b)


# Every writer, as (arguments, the output the special file takes the place of), with --force.
WRITERS: dict[str, Callable[[Path], tuple[list[str | Path], Path]]] = {
    "sweep": lambda t: (["sweep", "--device", "cpu", "--shape", "64x64x64", "-o", t / "o" / "s.json"],
                        t / "o" / "s.json"),
    "sweep-resume": lambda t: (["sweep", "--resume", "-o", t / "o" / "s.json"], t / "o" / "s.json"),
    "export": lambda t: (["export", GOLDEN, "-o", t / "o" / "t.csv"], t / "o" / "t.csv"),
    "export-steps": lambda t: (["export", GOLDEN, "--what", "steps", "-o", t / "o" / "t.md"], t / "o" / "t.md"),
    "export-nvbench": lambda t: (["export", GOLDEN, "--format", "nvbench", "-o", t / "o" / "n.json"],
                                 t / "o" / "n.json"),
    "merge": lambda t: (["merge", GOLDEN, "-o", t / "o" / "m.json"], t / "o" / "m.json"),
    "report": lambda t: (["report", GOLDEN, "-o", t / "o"], t / "o" / "index.html"),
    "plot": lambda t: (["plot", GOLDEN, "--figure", "vs-flops", "-o", t / "o"], t / "o" / "mfu-vs-flops.png"),
    "import": lambda t: (["import", "mamf-finder", MAMF, "-o", t / "o"], t / "o" / MAMF_FILE),
    "refine": lambda t: (["refine", *sweeps(t), "-o", t / "o" / "next.csv"], t / "o" / "next.csv"),
    "repair": lambda t: (["repair", t / "o" / "s.json"], t / "o" / "s.json"),
    "ceilings": lambda t: (["ceilings", "--device", "cpu", "--size", "64", "-o", t / "o" / "c.json"],
                           t / "o" / "c.json"),
    "ceilings-into": lambda t: (["ceilings", "--device", "cpu", "--size", "64", "--into", t / "o" / "c.json"],
                                t / "o" / "c.json"),
}


def test_plot_writes_the_figure_the_table_names(tmp_path: Path) -> None:
    """The plot case of WRITERS puts its special file where plot really writes its figure."""
    res = run("plot", GOLDEN, "--figure", "vs-flops", "-o", tmp_path)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "mfu-vs-flops.png").is_file()


def test_import_writes_the_file_the_table_names(tmp_path: Path) -> None:
    res = run("import", "mamf-finder", MAMF, "-o", tmp_path)
    assert res.exit_code == 0, res.output
    assert (tmp_path / MAMF_FILE).is_file()


@pytest.mark.parametrize("kind", list(SPECIALS))
@pytest.mark.parametrize("writer", list(WRITERS))
def test_no_writer_replaces_a_special_file_even_with_force(tmp_path: Path, writer: str, kind: str) -> None:
    args, target = WRITERS[writer](tmp_path)
    SPECIALS[kind](target)
    before = identity(target)
    force = [] if writer in ("repair", "sweep-resume", "ceilings-into") else ["--force"]
    started = time.monotonic()
    line = refused(run(*args, *force))
    assert WORDS[kind] in line and str(target.name) in line
    assert identity(target) == before  # still the node (or the link) it was: same type, device, inode, target
    assert time.monotonic() - started < 60  # refused up front: nothing measured, fitted or drawn


def test_report_refuses_a_fifo_among_its_figures_before_drawing(tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert run("report", GOLDEN, "-o", out).exit_code == 0
    (figure,) = sorted((out / "figures").glob("*.png"))[:1]
    figure.unlink()
    fifo(figure)
    res = run("report", GOLDEN, "-o", out, "--force")
    line = refused(res, "is a FIFO (named pipe)")
    assert figure.name in line and stat.S_ISFIFO(os.lstat(figure).st_mode)


def test_dev_stdout_is_refused_as_a_descriptor_and_dash_is_offered(tmp_path: Path) -> None:
    link = tmp_path / "stdout-link.csv"
    link.symlink_to("/proc/self/fd/1")
    line = refused(run("export", GOLDEN, "-o", link, "--force"), "an open file descriptor", "-o - writes to")
    assert "/proc/self/fd/1" in line and os.readlink(link) == "/proc/self/fd/1"


def test_a_symlink_to_a_regular_file_is_still_replaced_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "victim.csv"
    target.write_text(PRECIOUS)
    link = tmp_path / "t.csv"
    link.symlink_to(target)
    assert run("export", GOLDEN, "-o", link, "--force").exit_code == 0
    assert not link.is_symlink() and target.read_text() == PRECIOUS


# -- report --force: only the report's own files ----------------------------------------------------------------

@pytest.fixture()
def report_dir(tmp_path: Path) -> Iterator[Path]:
    out = tmp_path / "paper"
    res = run("report", GOLDEN, "-o", out)
    assert res.exit_code == 0, res.output
    yield out


def test_report_lists_what_it_wrote_in_a_manifest(report_dir: Path) -> None:
    listed = {ln for ln in (report_dir / MANIFEST).read_text().splitlines() if not ln.startswith("#")}
    written = {p.relative_to(report_dir).as_posix() for p in report_dir.rglob("*") if p.is_file()} - {MANIFEST}
    assert listed == written and {"index.md", "index.html", "analysis.json"} < listed
    assert any(rel.startswith("figures/") for rel in listed)


def test_report_force_keeps_the_users_own_files_and_names_them(report_dir: Path) -> None:
    own = report_dir / "figures" / "fig1.pdf"
    own.write_text(PRECIOUS)
    stale = report_dir / "figures" / "old_device.png"  # a figure an earlier report drew and this one does not
    stale.write_bytes(b"png")
    with (report_dir / MANIFEST).open("a") as fh:
        fh.write("figures/old_device.png\n")
    line = refused(run("report", GOLDEN, "-o", report_dir), "already holds", "figures/fig1.pdf",
                   "no report of this tool wrote")
    assert "old_device" not in line
    res = run("report", GOLDEN, "-o", report_dir, "--force")
    assert res.exit_code == 0, res.output
    assert own.read_text() == PRECIOUS and not stale.exists()  # the user's file stays, the tool's stale one goes
    (note,) = [ln for ln in res.output.splitlines() if ln.startswith("note:") and "fig1.pdf" in ln]
    assert "left as it is" in note
    assert "figures/fig1.pdf" not in (report_dir / MANIFEST).read_text()


def test_a_hostile_manifest_removes_nothing_outside_the_report(report_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(PRECIOUS)
    (report_dir / "notes.txt").write_text(PRECIOUS)
    with (report_dir / MANIFEST).open("a") as fh:
        fh.write("../outside.txt\n/etc/hostname\nfigures/../../outside.txt\nnotes.txt\n")
    assert run("report", GOLDEN, "-o", report_dir, "--force").exit_code == 0
    assert outside.read_text() == PRECIOUS and (report_dir / "notes.txt").read_text() == PRECIOUS


def test_a_report_without_a_manifest_keeps_every_figure_it_does_not_draw(report_dir: Path) -> None:
    (report_dir / MANIFEST).unlink()  # a report folder written before manifests
    own = report_dir / "figures" / "fig1.pdf"
    own.write_text(PRECIOUS)
    res = run("report", GOLDEN, "-o", report_dir, "--force")
    assert res.exit_code == 0 and own.read_text() == PRECIOUS
    assert (report_dir / MANIFEST).is_file()


# -- reads: bounded, never blocking ----------------------------------------------------------------------------

def unblock(path: Path) -> threading.Timer:
    """Open the FIFO ``path`` for writing after 20 s, so that a reader stuck on it is released (the test then
    fails on its time, instead of hanging the suite)."""
    def release() -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
    timer = threading.Timer(20, release)
    timer.start()
    return timer


@pytest.mark.parametrize("args", [["validate"], ["fit"], ["merge", "-o", "m.json"], ["export"]])
def test_a_fifo_as_result_file_is_refused_not_waited_on(tmp_path: Path, args: list[str]) -> None:
    path = fifo(tmp_path / "r.json")
    timer = unblock(path)
    started = time.monotonic()
    res = run(*args[:1], path, *args[1:])
    timer.cancel()
    assert time.monotonic() - started < 10
    assert res.exit_code == 1 and "is a FIFO (named pipe), not a regular file" in res.output
    assert "give - as the file" in res.output


def test_a_fifo_as_journal_is_refused_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    shutil.copy(GOLDEN, path)
    timer = unblock(fifo(journal_path(path)))
    started = time.monotonic()
    res = run("validate", path)
    timer.cancel()
    assert time.monotonic() - started < 10
    assert res.exit_code == 1 and "journal of" in res.output and "is a FIFO" in res.output


def test_a_journal_that_is_a_link_to_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    shutil.copy(GOLDEN, path)
    journal_path(path).symlink_to("/dev/zero")
    res = run("validate", path)
    assert res.exit_code == 1 and "is a character device, not a regular file" in res.output


def test_a_socket_and_a_fifo_as_shape_file_or_spec_file_are_refused(tmp_path: Path) -> None:
    shapes = unix_socket(tmp_path / "shapes.csv")
    refused(run("sweep", "--device", "cpu", "--shape-file", shapes, "--dry-run"), "is a socket")
    spec = fifo(tmp_path / "spec.toml")
    timer = unblock(spec)
    refused(run("specs", "--spec-file", spec), "is a FIFO")
    timer.cancel()


def test_an_oversized_journal_is_refused_by_the_input_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.json"
    shutil.copy(GOLDEN, path)
    journal_path(path).write_bytes(b" " * (2 * 2**20))
    monkeypatch.setenv("MFU_SWEEP_MAX_INPUT_MB", "1")
    res = run("validate", path)
    assert res.exit_code == 1 and "beyond the input limit of 1 MiB" in res.output


# -- "-": standard input and output --------------------------------------------------------------------------

def test_validate_fit_and_compare_read_standard_input(tmp_path: Path) -> None:
    a, b = sweeps(tmp_path)
    res = run("validate", "-", stdin=GOLDEN.read_text())
    assert res.exit_code == 0 and res.output.startswith("-: ok"), res.output
    res = run("fit", "-", stdin=a.read_text())
    assert res.exit_code == 0 and "chip-a" in res.output, res.output
    res = run("compare", "-", b, stdin=a.read_text())
    assert res.exit_code == 0 and "chip-a" in res.output and "chip-b" in res.output, res.output


def test_export_and_merge_write_standard_output(tmp_path: Path) -> None:
    res = run("export", GOLDEN, "-o", "-")
    assert res.exit_code == 0 and res.stdout.startswith("label,device,") and not Path("-").exists()
    res = run("merge", GOLDEN, "-o", "-")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["kind"] == "merged" and not Path("-").exists()
    assert "into standard output" in res.stderr


def test_a_pipe_of_merge_into_validate(tmp_path: Path) -> None:
    """The round trip through real pipes: merge -o - | validate -."""
    cmd = [sys.executable, "-m", "mfu_sweep"]
    merged = subprocess.run([*cmd, "merge", str(GOLDEN), "-o", "-"], capture_output=True, check=True, cwd=tmp_path)
    res = subprocess.run([*cmd, "validate", "-"], input=merged.stdout, capture_output=True, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.decode().startswith("-: ok"), res.stderr
    assert not (tmp_path / "-").exists()


def test_refine_writes_its_shape_file_to_standard_output_and_sweep_reads_it(tmp_path: Path) -> None:
    a, b = sweeps(tmp_path)
    res = run("refine", a, b, "-o", "-")
    assert res.exit_code == 0, res.output
    assert "batch,m,n,k,family,passes" in res.stdout and "wrote standard output" in res.stderr
    dry = run("sweep", "--device", "cpu", "--shape-file", "-", "--dry-run", stdin=res.stdout)
    assert dry.exit_code == 0 and "dry run" in dry.output, dry.output


@pytest.mark.parametrize("args,fragment", [
    (["sweep", "--device", "cpu", "-o", "-"], "a sweep checkpoints every record into its file"),
    (["report", str(GOLDEN), "-o", "-"], "writes a folder of files"),
    (["plot", str(GOLDEN), "-o", "-"], "writes a folder of files"),
    (["import", "mamf-finder", str(MAMF), "-o", "-"], "writes a folder of files"),
    (["import", "mamf-finder", "-", "-o", "out"], "import reads each SOURCE by name"),
    (["export", str(GOLDEN), "--format", "nvbench", "-o", "-"], "a folder of sample times"),
    (["repair", "-"], "repair rewrites FILE in place"),
])
def test_dash_where_it_cannot_mean_a_stream_is_one_line(args: list[str], fragment: str) -> None:
    refused(run(*args), fragment)
    assert not Path("-").exists()


def test_standard_input_from_a_terminal_is_refused_not_waited_on() -> None:
    from mfu_sweep.util.inputs import InputError, read_stdin

    class Tty:
        buffer = type("B", (), {"isatty": lambda self: True, "read": lambda self, n: b""})()

    saved = sys.stdin
    sys.stdin = Tty()  # type: ignore[assignment]
    try:
        with pytest.raises(InputError, match="which is a terminal here"):
            read_stdin()
    finally:
        sys.stdin = saved


def test_standard_input_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFU_SWEEP_MAX_INPUT_MB", "0.001")
    res = run("validate", "-", stdin=GOLDEN.read_text())
    assert res.exit_code == 1 and "'-' (standard input) runs past the input limit" in res.output


# -- a name too long: one line, never a traceback -------------------------------------------------------------

LONG = "n" * 300


@pytest.mark.parametrize("args", [
    ["sweep", "--device", "cpu", "--shape", "64x64x64", "-o", f"{LONG}.json"],
    ["sweep", "--resume", "-o", f"{LONG}.json"],
    ["export", str(GOLDEN), "-o", f"{LONG}.csv"],
    ["report", str(GOLDEN), "-o", LONG],
    ["merge", str(GOLDEN), "-o", f"{LONG}.json"],
    ["plot", str(GOLDEN), "-o", LONG],
    ["import", "mamf-finder", str(MAMF), "-o", LONG],
    ["repair", f"{LONG}.json"],
    ["validate", f"{LONG}.json"],
    ["fit", f"{LONG}.json"],
])
def test_a_300_character_file_name_is_one_line(args: list[str]) -> None:
    res = run(*args)
    assert res.exit_code == 1, res.output
    line = next(ln for ln in res.output.splitlines() if "Error" in ln or "INVALID" in ln)
    assert ("bytes long, beyond" in line and "pick a shorter" in line) or "File name too long" in line, line
    assert not list(Path(".").iterdir())  # nothing written


def test_a_name_that_leaves_no_room_for_the_journal_is_refused_before_the_sweep() -> None:
    name = "j" * 250 + ".json"  # 255 bytes: the file fits, its journal .NAME.journal would not
    line = refused(run("sweep", "--device", "cpu", "--shape", "64x64x64", "-o", name))
    assert "less 9 for the files kept beside it" in line
