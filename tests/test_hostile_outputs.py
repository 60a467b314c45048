"""Hostile input against every writer: paths, symlinks, markup, formulas, names, encodings, signals, pipes.

Each command that writes gets a label or a file system laid out to make it write somewhere else
(``../`` and ``/`` in labels, a 5,000-character label, a symlink where its output goes, a symlink at its
lock file), text that would run as markup or a spreadsheet formula, a file name that is not UTF-8, a
closed pipe and Ctrl-C. The measured goal: no traceback, no file written outside the output the user
named, no markup that survives rendering. The sweep files are SYNTHETIC (``tests/synthetic.py``); the
sweep and ceilings cases measure real tiny GEMMs on the CPU.
"""

from __future__ import annotations

import csv
import glob
import html
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from synthetic import example_pair, make_sweep_doc, write_sweep

from mfu_sweep.cli import main
from mfu_sweep.present.export.tables import csv_cell
from mfu_sweep.present.report.render import md_text
from mfu_sweep.util.names import MAX_NAME, safe_name

ROOT = Path(__file__).resolve().parents[1]
MAMF = ROOT / "tests" / "data" / "import" / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"
MAMF_DEVICE = "NVIDIA H100 80GB HBM3"
PRECIOUS = "precious: must not be overwritten"
LONG = "x" * 5000
SCRIPT = "<script>alert(1)</script>"
LINK = "[x](javascript:alert(3))"
FORMULA = '=HYPERLINK("http://evil.example","click")'
GRID = ["64x64x64", "64x128x64", "128x64x64", "128x128x64"]  # an m x n grid at one k: a heatmap named by label
SAFE = re.compile(r"[A-Za-z0-9_.+-]+")


def run(*args: str | Path) -> Result:
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def victim(tmp_path: Path, name: str = "victim.txt") -> Path:
    """A file outside every output, which a symlink in an output points at."""
    path = tmp_path / "outside" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PRECIOUS)
    return path


def link(at: Path, target: Path) -> Path:
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(target)
    return at


def files_under(*roots: Path) -> set[Path]:
    return {p for root in roots for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def replaced(path: Path, target: Path) -> bool:
    """The symlink at ``path`` was replaced by a file of the command's, and its target kept."""
    return path.is_file() and not path.is_symlink() and target.read_text() == PRECIOUS


def hostile_sweep(tmp_path: Path, label: str, name: str, shapes: list[str] | None = None, **kw) -> Path:
    doc = make_sweep_doc(label, P_tflops=50.0, W_tbs=1.0, t0_s=1e-5, shapes=shapes or GRID, n_samples=5,
                         seed=len(label) % 97, **kw)
    return write_sweep(tmp_path / "in", doc, name=name)


# -- names: one rule for every file named after a label ---------------------------------------------------

@pytest.mark.parametrize("label", ["../../../../tmp/y", "/tmp/x", "node1/gpu0", "a\nb", ".", "..", "...", "",
                                   LONG, "-rf", ".hidden", "日本語", SCRIPT, "a\x00b", "C:\\x\\y"])
def test_a_label_becomes_one_safe_file_name(label: str) -> None:
    name = safe_name(label)
    assert SAFE.fullmatch(name) and name not in (".", "..") and not name.startswith((".", "-"))
    assert len(name) <= MAX_NAME


def test_shortened_and_emptied_names_stay_apart() -> None:
    assert safe_name("x" * 200 + "a") != safe_name("x" * 200 + "b")
    assert safe_name("..") != safe_name("...") and safe_name("日本") != safe_name("中国")
    assert safe_name("amd-epyc-zen5-cpu") == "amd-epyc-zen5-cpu"  # a safe label keeps its name


@pytest.mark.parametrize("label", ["../../../../tmp/y", "/tmp/x", "node1/gpu0", "..", LONG[:400]])
def test_sweep_names_its_default_output_inside_sweeps(label: str) -> None:
    res = run("sweep", "--device", "cpu", "--shape", "64x64x64", "--label", label, "--dry-run")
    assert res.exit_code == 0, res.output
    (out,) = re.findall(r"^output: (.*)$", res.output, re.M)
    stem = Path(out).stem
    assert Path(out).parent == Path("sweeps") and SAFE.fullmatch(stem) and not stem.startswith((".", "-"))
    assert len(Path(out).name) < 255
    assert not Path("sweeps").exists()  # a dry run writes nothing


@pytest.mark.parametrize("label", ["a\nb", "tab\there", "   "])
def test_sweep_refuses_a_label_that_is_not_one_printable_line(label: str) -> None:
    res = run("sweep", "--device", "cpu", "--shape", "64x64x64", "--label", label, "--dry-run")
    (error,) = [ln for ln in res.output.splitlines() if ln.startswith("Error")]
    assert res.exit_code == 2 and "--label" in error


# -- every writer: inside its output, replacing symlinks -----------------------------------------------------

def test_sweep_keeps_the_label_in_the_json_and_replaces_symlinks(tmp_path: Path) -> None:
    label = "../../outside/<b>gpu0</b>"
    target, lock_target = victim(tmp_path), victim(tmp_path, "lock-victim.txt")
    out = Path("sweeps") / f"{safe_name(label)}.json"
    link(out, target)
    link(out.with_name(f".{out.name}.lock"), lock_target)
    before = files_under(tmp_path)
    res = run("sweep", "--device", "cpu", "--budget-s", "0.02", "--max-samples", "5", "--quiet", "--repeats", "1",
              "--isolate", "none", "--shape", "64x64x64", "--label", label, "--force")
    assert res.exit_code == 0, res.output
    assert replaced(out, target) and lock_target.read_text() == PRECIOUS
    assert json.loads(out.read_text())["device"]["label"] == label
    assert files_under(tmp_path) == before and {p.parent for p in files_under(Path("."))} == {Path("sweeps")}


def test_merge_and_export_replace_symlinks(tmp_path: Path) -> None:
    src = hostile_sweep(tmp_path, SCRIPT, "a.json")
    for args, out in ((["merge", src, "--force", "-o"], tmp_path / "o" / "m.json"),
                      (["export", src, "--force", "-o"], tmp_path / "o" / "t.csv")):
        target = victim(tmp_path, f"victim-{out.suffix[1:]}.txt")
        link(out, target)
        res = run(*args, out)
        assert res.exit_code == 0, res.output
        assert replaced(out, target)


def test_merge_never_writes_through_a_symlinked_lock_file(tmp_path: Path) -> None:
    src, target, out = hostile_sweep(tmp_path, "a", "a.json"), victim(tmp_path), tmp_path / "o" / "m.json"
    link(out.with_name(".m.json.lock"), target)
    assert run("merge", src, "-o", out).exit_code == 0
    assert target.read_text() == PRECIOUS and out.is_file()


def test_import_names_files_safely_inside_its_directory(tmp_path: Path) -> None:
    out, target = tmp_path / "imp", victim(tmp_path)
    label = "../../outside/<script>x"
    link(out / f"{safe_name(label)}.json", target)
    before = files_under(tmp_path) - files_under(out)
    res = run("import", "mamf-finder", MAMF, "--label", f"{MAMF_DEVICE}={label}", "-o", out, "--force")
    assert res.exit_code == 0, res.output
    assert replaced(out / "outside-script-x.json", target) and files_under(tmp_path) - files_under(out) == before


def test_import_shortens_a_400_character_label(tmp_path: Path) -> None:
    res = run("import", "mamf-finder", MAMF, "--label", f"{MAMF_DEVICE}={'y' * 400}", "-o", tmp_path / "imp")
    assert res.exit_code == 0, res.output
    (path,) = (tmp_path / "imp").glob("*.json")
    assert len(path.name) <= MAX_NAME + 5 and path.name.startswith("yyyy")


def test_ceilings_replace_symlinks_at_o_and_into(tmp_path: Path) -> None:
    out, target = tmp_path / "o" / "c.json", victim(tmp_path)
    link(out, target)
    sweep_file = hostile_sweep(tmp_path, "cpu", "s.json")
    into = link(tmp_path / "o" / "into.json", sweep_file)
    kept = sweep_file.read_text()
    res = run("ceilings", "--device", "cpu", "--size", "64", "--budget-s", "0.05", "-o", out, "--into", into,
              "--force")
    assert res.exit_code == 0, res.output
    assert replaced(out, target)
    assert sweep_file.read_text() == kept and not into.is_symlink() and "ceilings" in json.loads(into.read_text())


def test_refine_replaces_a_symlinked_shape_file(tmp_path: Path) -> None:
    a, b = (write_sweep(tmp_path / "in", d) for d in example_pair())
    out, target = tmp_path / "o" / "next.csv", victim(tmp_path)
    link(out, target)
    res = run("refine", a, b, "-o", out, "--force")
    assert res.exit_code in (0, 3), res.output
    assert target.read_text() == PRECIOUS
    assert out.is_symlink() == (res.exit_code == 3)  # written (and the link replaced) only when it proposes shapes


def test_refine_quotes_the_commands_it_prints_for_a_shell(tmp_path: Path) -> None:
    a, b = example_pair()
    hostile = write_sweep(tmp_path / "in", a, name="a b;touch pwned.json")
    res = run("refine", hostile, write_sweep(tmp_path / "in", b), "-o", tmp_path / "next.csv")
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.output.splitlines() if "--resume -o" in ln and "pwned" in ln]
    argv = shlex.split(line)
    assert argv[-2:] == ["-o", str(hostile)] and argv.count("sweep") == 1


def test_plot_names_figures_safely_and_replaces_symlinks(tmp_path: Path) -> None:
    src = hostile_sweep(tmp_path, LONG, "long.json")
    out, target = tmp_path / "plots", victim(tmp_path)
    heatmap = link(out / f"heatmap-{safe_name(LONG)}-bf16-eager-k64.png", target)  # the name, a symlink there
    before = files_under(tmp_path) - files_under(out)
    res = run("plot", src, "-o", out, "--force", "--n-boot", "5", "--figure", "heatmap")
    assert res.exit_code == 0, res.output
    assert replaced(heatmap, target) and [p.name for p in out.iterdir()] == [heatmap.name]
    assert len(heatmap.name.encode()) < 255 and SAFE.fullmatch(heatmap.name)
    assert files_under(tmp_path) - files_under(out) == before


# -- the report: one run against every hostile thing at once --------------------------------------------------

REPORT_LINKS = ("index.html", "index.md", "analysis.json")


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result, dict[str, Path], set[Path]]:
    """``report --force`` over labels with markup, a link, a formula and 5,000 characters, one read from a file whose
    name is not UTF-8, into a directory whose index files and figures/ are symlinks to files outside it."""
    tmp = tmp_path_factory.mktemp("hostile-report")
    sources = [hostile_sweep(tmp, SCRIPT, "script.json", device_name="<img src=x onerror=alert(2)>"),
               hostile_sweep(tmp, f"{LINK} {FORMULA} {LONG}", os.fsdecode(b"not-utf8-\xff.json"))]
    out = tmp / "report"
    targets = {name: victim(tmp, f"victim-{name}") for name in REPORT_LINKS}
    for name, target in targets.items():
        link(out / name, target)
    figures = tmp / "outside" / "figures"
    figures.mkdir()
    (figures / "mfu-vs-flops.png").write_text(PRECIOUS)
    link(out / "figures", figures)
    targets["figures/mfu-vs-flops.png"] = figures / "mfu-vs-flops.png"
    before = files_under(tmp) - files_under(out)
    res = run("report", *sources, "-o", out, "--force", "--n-boot", "5")
    return out, res, targets, files_under(tmp) - files_under(out) - before


def test_hostile_report_completes(hostile_report) -> None:
    out, res, _, _ = hostile_report
    assert res.exit_code == 0, res.output
    assert {"index.md", "index.html", "analysis.json", "figures"} <= {p.name for p in out.iterdir()}
    assert not list(out.glob(".mfu-sweep-stage-*"))  # the stage it was built in is gone


@pytest.mark.parametrize("name", [*REPORT_LINKS, "figures/mfu-vs-flops.png"])
def test_hostile_report_replaces_symlinks(hostile_report, name: str) -> None:
    out, res, targets, _ = hostile_report
    assert res.exit_code == 0, res.output
    assert targets[name].read_text() == PRECIOUS and not (out / name).is_symlink()
    assert not (out / "figures").is_symlink()


def test_hostile_report_writes_nothing_outside(hostile_report) -> None:
    out, res, _, outside = hostile_report
    assert res.exit_code == 0 and outside == set()
    assert all(len(p.name.encode()) < 255 and SAFE.fullmatch(p.name) for p in files_under(out))


@pytest.mark.parametrize("pattern", [r"<script", r"<img[^>]*onerror", r"href=\"?javascript:", r"<a\s"])
def test_hostile_report_markdown_renders_no_markup(hostile_report, pattern: str) -> None:
    markdown = pytest.importorskip("markdown")  # Python-Markdown, what MkDocs renders with
    out, res, _, _ = hostile_report
    page = markdown.markdown((out / "index.md").read_text(encoding="utf-8"), extensions=["tables"])
    assert not re.search(pattern, page, re.I)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the label is shown, as text


@pytest.mark.parametrize("pattern", [r"<script", r"<img[^>]*onerror", r"href=\"?javascript:"])
def test_hostile_report_html_has_no_markup(hostile_report, pattern: str) -> None:
    out, _, _, _ = hostile_report
    assert not re.search(pattern, (out / "index.html").read_text(encoding="utf-8"), re.I)


def test_hostile_report_names_a_non_utf8_file_readably(hostile_report) -> None:
    out, _, _, _ = hostile_report
    assert "not-utf8-\ufffd.json" in (out / "index.md").read_text(encoding="utf-8")


# -- escaping by context ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [SCRIPT, LINK, "![i](http://evil.example/x.png)", "<http://evil.example>",
                                  "[a]: javascript:alert(1)", "x\n# injected heading", "<!-- c -->", "`code`",
                                  "**bold** _em_", "1. item", "> quote", "a | b"])
def test_markdown_text_renders_as_itself(text: str) -> None:
    markdown = pytest.importorskip("markdown")
    page = markdown.markdown(md_text(text))
    inner = re.fullmatch(r"<p>(.*)</p>", page, re.S)
    assert inner and "<" not in inner.group(1).replace("&lt;", "")  # one paragraph, no tag inside
    shown = inner.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert shown == " ".join(text.splitlines())


LIST_STRIKE_INDENT = ["1) item", "12) item", "~~struck~~", "~single~", "~~~ fence", "    code", "\tcode", "  1) x"]


def _shown(page: str) -> str | None:
    """The text of a page that is one paragraph with no tag inside, as a reader sees it; None otherwise."""
    inner = re.fullmatch(r"<p>(.*)</p>\n?", page, re.S)
    if inner is None or "<" in inner.group(1).replace("&lt;", ""):
        return None
    return html.unescape(inner.group(1))


@pytest.mark.parametrize("text", LIST_STRIKE_INDENT)
def test_markdown_text_escapes_paren_lists_strikethrough_and_indents(text: str) -> None:
    """`1) x` is an ordered list in CommonMark (GitHub), `~~x~~` and `~x~` strike through on GitHub, `~~~` opens a
    fence and four leading spaces a code block: each renders as its own text, in CommonMark with GitHub's
    strikethrough (markdown-it-py) and in Python-Markdown (MkDocs), also as a bullet's text."""
    markdown = pytest.importorskip("markdown")
    markdown_it = pytest.importorskip("markdown_it")
    want = " ".join(text.splitlines()).lstrip()
    gfm = markdown_it.MarkdownIt("commonmark").enable(["strikethrough", "table"])
    for render in (gfm.render, markdown.markdown):
        assert _shown(render(md_text(text))) == want, (render, md_text(text))
    item = gfm.render(f"- {md_text(text)}")
    assert re.fullmatch(r"<ul>\n<li>(.*)</li>\n</ul>\n", item, re.S), item
    assert html.unescape(re.sub(r"</?(ul|li)>|\n", "", item)) == want, item


@pytest.mark.parametrize("value", [FORMULA, "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(A1:A9)",
                                   "\t=1+1", "\r=1+1"])
def test_csv_neutralises_formulas(value: str) -> None:
    assert csv_cell(value) == "'" + value


@pytest.mark.parametrize("value", [-0.05, -3, "-0.05", "+1e-3", "label-1", None])
def test_csv_keeps_numbers_and_plain_text(value: object) -> None:
    assert csv_cell(value) == ("" if value is None else value)


def test_export_csv_neutralises_a_formula_label_and_keeps_numbers(tmp_path: Path) -> None:
    src = hostile_sweep(tmp_path, FORMULA, "f.json")
    res = run("export", src, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert res.exit_code == 0 and rows and all(r["label"] == "'" + FORMULA for r in rows)
    assert all(float(r["median_s"]) > 0 for r in rows)


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
def test_export_tables_escape_a_hostile_label(tmp_path: Path, fmt: str) -> None:
    src = hostile_sweep(tmp_path, f"{SCRIPT} {LINK} #x 100%", "s.json")  # (a line break: refused on read)
    res = run("export", src, "--format", fmt)
    assert res.exit_code == 0, res.output
    if fmt == "latex":
        assert r"\#x 100\%" in res.stdout and "\n\n" not in res.stdout  # escaped; no blank line ends the row
    else:
        markdown = pytest.importorskip("markdown")
        page = markdown.markdown(res.stdout, extensions=["tables"])
        assert "<script" not in page and "<a " not in page and "&lt;script&gt;" in page


# -- encodings ---------------------------------------------------------------------------------------------

def test_a_shape_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    shapes = tmp_path / "excel.csv"
    shapes.write_bytes(b"\xef\xbb\xbfm,n,k\r\n64,64,64\r\n")
    res = run("sweep", "--device", "cpu", "--shape-file", shapes, "--dry-run")
    assert res.exit_code == 0 and "64x64x64" in res.output, res.output


def test_a_file_name_that_is_not_utf8_is_printed_not_a_traceback(tmp_path: Path) -> None:
    src = hostile_sweep(tmp_path, "a", os.fsdecode(b"a-\xff.json"))
    res = run("validate", src)
    assert res.exit_code == 0 and "a-\\udcff.json: ok" in res.output


# -- signals and pipes (subprocesses: a real pipe, a real Ctrl-C) ---------------------------------------------

def _closed_pipe_run(args: list[str], both: bool) -> subprocess.CompletedProcess:
    """Run ``mfu-sweep ARGS`` with stdout (and stderr if ``both``) a pipe whose reader is already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "mfu_sweep", *args], stdout=write,
                              stderr=write if both else subprocess.PIPE, timeout=120, cwd=ROOT)
    finally:
        os.close(write)


@pytest.mark.parametrize("args,both", [(["validate", "sweeps/amd-epyc-zen5-cpu.json"], False), (["--help"], True)],
                         ids=["a-command-stdout", "help-stdout-and-stderr"])
def test_a_closed_pipe_ends_quietly_with_141(args: list[str], both: bool) -> None:
    res = _closed_pipe_run(args, both)
    assert res.returncode == 141
    assert both or res.stderr == b""  # no "Error: Broken pipe", no traceback


def test_ctrl_c_during_report_exits_130_and_keeps_the_old_report(tmp_path: Path) -> None:
    sources = [hostile_sweep(tmp_path, label, f"{label}.json") for label in ("a", "b")]
    out = tmp_path / "report"
    old = {"index.html": "old page", "index.md": "old text", "analysis.json": "{}", "figures/roofline.png": "old"}
    for name, text in old.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    # A shell that starts the suite in the background ignores SIGINT for its children: give the report the default.
    proc = subprocess.Popen([sys.executable, "-m", "mfu_sweep", "report", *map(str, sources), "-o", str(out),
                             "--force", "--n-boot", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline and not glob.glob(f"{out}/.mfu-sweep-stage-*/figures/*"):
        time.sleep(0.01)  # until the report is half drawn: its first figure is in the stage
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the process group, forked workers too
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the report finished before the signal arrived")
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    assert {name: (out / name).read_text() for name in old} == old
    assert sorted(p.name for p in out.iterdir()) == ["analysis.json", "figures", "index.html", "index.md"]


# -- terminal escapes and labels that share a file name --------------------------------------------------------

# a screen clear, a window title (OSC), an 8-bit CSI, a line break, and a right-to-left override that shows
# "gpu1" + RLO + "0" as if it were another label (Trojan Source), and a first-strong isolate
ESCAPES = ("\x1b[2J\x1b[H", "gpu\x1b]0;pwned\x07", "a\x9bb", "line\nbreak", "gpu1\u202e0", "gpu\u20680\u2069")
RAW = "\x1b\x07\x9b\u202e\u2068\u2069"


@pytest.mark.parametrize("label", ESCAPES)
def test_a_label_with_control_characters_is_refused_and_never_printed_raw(tmp_path: Path, label: str) -> None:
    """A hand-edited or hostile file's label with a terminal escape: every reader refuses it in one line, and the
    escape never reaches the terminal (it would clear the screen or retitle the window)."""
    src = hostile_sweep(tmp_path, "plain", "s.json")
    doc = json.loads(src.read_text())
    doc["device"]["label"] = label
    src.write_text(json.dumps(doc))
    for args in (("validate", src), ("compare", src, src), ("report", src, "-o", tmp_path / "r"),
                 ("export", src, "--format", "csv")):
        res = run(*args)
        assert res.exit_code == 1, res.output
        assert not any(c in res.output for c in RAW), repr(res.output)
        assert "label" in res.output and not (tmp_path / "r").exists()


@pytest.mark.parametrize("label", ESCAPES[:2] + ESCAPES[4:])
def test_merge_refuses_to_relabel_into_control_characters(tmp_path: Path, label: str) -> None:
    src = hostile_sweep(tmp_path, "plain", "s.json")
    res = run("merge", src, "--relabel", f"plain={label}", "-o", tmp_path / "m.json")
    assert res.exit_code == 1 and not any(c in res.output for c in RAW), res.output
    assert "control characters" in res.output, res.output
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("label", ESCAPES[4:])
def test_a_sweep_label_with_a_bidirectional_override_is_refused_at_the_option(label: str) -> None:
    res = run("sweep", "--label", label, "--dry-run")
    assert res.exit_code == 2 and "bidirectional overrides" in res.output, res.output
    assert not any(c in res.output for c in RAW), repr(res.output)


def test_an_imported_device_name_loses_its_control_characters(tmp_path: Path) -> None:
    from mfu_sweep.util.names import has_control, without_control

    assert without_control("H100\x1b[31m 80GB\n") == "H100 [31m 80GB " and not has_control(without_control("\x9b\x00"))
    assert without_control("H100\u202e08\u200f") == "H100 08 " and has_control("\u2066") and not has_control("H100 é")


def test_the_schema_and_the_code_refuse_the_same_characters_in_a_label() -> None:
    # two spellings of one rule (the JSON schema's patterns and names._CONTROL): they must not drift apart
    from mfu_sweep.util.names import escape_control, has_control

    schema = json.loads((Path(__file__).parents[1] / "mfu_sweep" / "schema" / "v1.json").read_text())
    device = schema["$defs"]["sweep"]["properties"]["device"]["properties"]
    label, name = re.compile(device["label"]["pattern"]), re.compile(device["name"]["pattern"])
    for c in map(chr, range(0x3000)):
        assert (label.match(f"a{c}b") is None) == (name.match(f"a{c}b") is None) == has_control(c), hex(ord(c))
    assert escape_control("\x1b\u202e") == "\\x1b\\u202e"


def test_two_labels_that_share_a_file_name_are_refused_before_any_figure_is_written(tmp_path: Path) -> None:
    """``a b`` and ``a/b`` both become ``a-b``: the second heatmap would silently overwrite the first."""
    a, b = hostile_sweep(tmp_path, "node 1", "a.json"), hostile_sweep(tmp_path, "node/1", "b.json")
    out = tmp_path / "plots"
    res = run("plot", a, b, "-o", out, "--n-boot", "5", "--figure", "heatmap")
    assert res.exit_code == 1 and "'node 1' and 'node/1' both name the figure 'node-1'" in res.output, res.output
    assert "--relabel" in res.output and not (out.exists() and any(out.iterdir()))
    res = run("plot", a, b, "-o", out, "--n-boot", "5", "--figure", "vs-flops")  # no figure named by a label
    assert res.exit_code == 0, res.output
