"""The docs: every command has help with an example and every option a description, the README is a
short front page, the MkDocs site builds with warnings as errors, and its marked code blocks still
print what they show (the sqlite-utils habit, extended to a docs site)."""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
COMMANDS = sorted(main.commands)
RUN_MARK = "<!-- docs-test: run -->"


def _help(name: str) -> str:
    res = CliRunner().invoke(main, [name, "--help"])
    assert res.exit_code == 0, res.output
    return res.output


def _doc_pages() -> dict[str, str]:
    """Every hand-written page of the site (docs/**/*.md), by path relative to docs/."""
    return {p.relative_to(DOCS).as_posix(): p.read_text() for p in sorted(DOCS.rglob("*.md"))}


# README: the front page


def test_readme_first_screen_has_the_two_commands() -> None:
    first_screen = "\n".join(README.splitlines()[:25])
    assert "make sweep" in first_screen and "make test" in first_screen


def test_readme_is_a_short_front_page() -> None:
    assert len(README.splitlines()) <= 250, "README.md is the front page; reference material belongs in docs/"
    for needed in ("pip install", "## Quick tour", "](plots/", "](docs/"):
        assert needed in README, f"README lacks {needed!r}"


def test_readme_links_point_at_files_that_exist() -> None:
    targets = re.findall(r"\]\(((?:docs|plots)/[^)#\s]+)", README) + ["CHANGELOG.md"]
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert len(targets) > 5 and not missing, f"README links to missing files: {missing}"


def test_readme_first_screen_keeps_two_set_up_commands_and_says_how_to_run_the_tool() -> None:
    first_screen = "\n".join(README.splitlines()[:25])
    (setup,) = re.findall(r"## Set-up: two commands\n+```\n(.*?)\n```", README, re.S)
    assert [ln.split()[:2] for ln in setup.splitlines()] == [["make", "sweep"], ["make", "test"]]
    assert ". .venv/bin/activate" in first_screen and ".venv/bin/mfu-sweep" in first_screen
    assert "7 GB" in first_screen and "XLA_TESTS=0" in first_screen  # said before make test downloads it


def test_make_test_announces_the_xla_download_before_the_suite_runs(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed here")
    # the plain `make test` a newcomer types: not the XLA_TESTS=0 (or any other variable) of a make running this
    # suite, which make hands to every make below it through MAKEFLAGS
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "XLA_TESTS")}
    res = subprocess.run(["make", "-n", "test", f"VENV={tmp_path / 'venv'}", f"XLA_VENV={tmp_path / 'xla'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    lines = res.stdout.splitlines()
    note = next(i for i, ln in enumerate(lines) if "7 GB" in ln and "XLA_TESTS=0" in ln)
    suite = next(i for i, ln in enumerate(lines) if "-m pytest" in ln)
    assert note < suite, res.stdout


# The README's console blocks, run as a newcomer runs them after `make sweep`
# Their output depends on the machine: only the exit status counts.
MEASURING = ("mfu-sweep sweep", "mfu-sweep ceilings", "mfu-sweep selftest", "mfu-sweep specs --detect")
SHELL_STATE = (". ", "source ", "cd ", "export ")  # lines that change the shell for the lines after them


def _console_steps(text: str) -> list[tuple[str, list[str]]]:
    """(command, output lines shown) for every ``$ `` line of the page's console blocks, in order."""
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)\n```", text, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:].strip(), []))
            elif steps and line.strip() and line.strip() != "...":
                steps[-1][1].append(line.strip())
    return steps


def _checkout_after_make_sweep(tmp_path: Path) -> Path:
    """A copy of what the README's commands read (``sweeps/``), with ``.venv`` the venv running this test."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "sweeps", checkout / "sweeps")
    (checkout / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return checkout


@pytest.mark.slow
def test_readme_console_blocks_run_in_order_after_make_sweep(tmp_path: Path) -> None:
    """Every ``$`` line of the README, in order, in a shell where ``mfu-sweep`` is not on the path until the
    README puts it there; the lines a read-only command shows must be in what it prints."""
    if not (Path(sys.prefix) / "bin" / "mfu-sweep").exists() or shutil.which("bash") is None:
        pytest.skip("this venv has no mfu-sweep script (the package is not installed into it)")
    steps = _console_steps(README)
    assert len(steps) >= 5 and steps[0][0].startswith(". .venv/bin/activate")
    checkout = _checkout_after_make_sweep(tmp_path)
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "mfu-sweep").exists())
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}  # the tree under test, whatever is installed
    env.pop("VIRTUAL_ENV", None)
    state: list[str] = []
    for command, shown in steps:
        script = "\n".join(["set -e", *state, command])
        res = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, f"README: `{command}` exited {res.returncode}: {res.stderr[-2000:]}"
        if command.startswith(SHELL_STATE):
            state.append(command)
        elif not command.startswith(MEASURING):
            printed = {ln.strip() for ln in (res.stdout + res.stderr).splitlines()}
            stale = [ln for ln in shown if ln not in printed]
            assert not stale, f"README: `{command}` no longer prints: {stale}"


# --help of every command


@pytest.mark.parametrize("name", COMMANDS)
def test_command_has_help_with_example(name: str) -> None:
    assert "Example" in _help(name), f"{name} --help lacks an Example block"


def _options() -> list[tuple[str, click.Option]]:
    return [(name, p) for name in COMMANDS for p in main.commands[name].params
            if isinstance(p, click.Option) and not p.hidden]


def test_every_option_of_every_command_has_a_description() -> None:
    options = _options()
    assert len(options) > 50  # the walk found the commands' options at all
    bare = [f"{name} {p.opts[-1]}" for name, p in options if not (p.help or "").strip()]
    assert not bare, f"options without a help text: {bare}"


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_help_text_has_no_known_defects(name: str) -> None:
    text = _help(name) if name else CliRunner().invoke(main, ["--help"]).output
    assert "%%" not in text, "a literal %% in help (Click does not %-format help texts)"
    assert not re.search(r"\bissues?\s*#?\d+", text, re.I), "an issue number in user-facing help"
    assert not re.search(r"\b1 (cores|threads|shapes|passes|devices)\b", text), "a plural after 1"
    assert "Sentinel" not in text
    assert not re.search(r"\de\+0\d", text), "a number printed as 1e+06 (write 1e6)"
    assert not re.search(r"\[CPU (\S+), else \1\]", text), "a default that names the same value twice"
    for path in re.findall(r"(?<![\w/])(data/\S+)", text):  # example inputs under the committed data/ exist
        assert glob.glob(str(ROOT / path.rstrip(".,;"))), f"{name} --help names {path}, which does not exist"


# The documentation site


@pytest.mark.parametrize("name", COMMANDS)
def test_command_documented_in_the_docs(name: str) -> None:
    pages = [page for page, text in _doc_pages().items() if f"mfu-sweep {name}" in text]
    assert pages, f"no page under docs/ shows `mfu-sweep {name}`"


def test_user_docs_carry_no_history_notes() -> None:
    patterns = [r"\bissue\s*#?\d+", r"\buntil issue\b", r"\bcommit `?[0-9a-f]{7,40}\b", r"\bmain at [0-9a-f]{7,40}\b"]
    pages = {**_doc_pages(), "README.md": README}
    found = [f"{page}: {m.group(0)}" for page, text in pages.items() for pat in patterns
             for m in re.finditer(pat, text, re.I)]
    assert not found, f"history belongs in CHANGELOG.md: {found}"


def _paragraphs(text: str) -> list[str]:
    """The prose of a page outside code blocks: each paragraph and each bullet, its lines joined."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    pieces = re.split(r"\n\s*\n|\n(?=\s*[-*] )", text)
    return [" ".join(p.split()) for p in pieces if len(p.split()) >= 12]  # short ones (a heading) may repeat


def test_no_page_repeats_a_paragraph_or_bullet() -> None:
    repeated = []
    for page, text in {**_doc_pages(), "README.md": README}.items():
        seen: set[str] = set()
        repeated += [f"{page}: {p[:80]}" for p in _paragraphs(text) if p in seen or seen.add(p)]
    assert not repeated, f"said twice, word for word: {repeated}"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built once, strictly (any warning fails): a broken link or anchor, a missing page in nav."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log
    assert "WARNING" not in log, log
    return out


def test_site_builds_with_every_page(site: Path) -> None:
    for page in _doc_pages():
        html = site / page.removesuffix(".md").removesuffix("index") / "index.html"
        assert html.exists(), f"{page} was not built"
    assert (site / "plots" / "mfu-vs-flops.png").exists(), "the figures from plots/ are not in the site"


def test_cli_reference_is_every_commands_help(site: Path) -> None:
    html = (site / "reference" / "cli" / "index.html").read_text()
    for name in COMMANDS:
        assert f"mfu-sweep {name} [OPTIONS]" in html, f"the CLI reference lacks {name}'s usage"
    missing = [f"{name} {p.opts[-1]}" for name, p in _options() if p.opts[-1] not in html]
    assert not missing, f"options missing from the CLI reference: {missing}"


def test_cli_reference_is_verbatim_help() -> None:
    """Each section of the CLI reference is what ``mfu-sweep [COMMAND] --help`` prints, ``-h, --help`` included."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks_generate", DOCS / "hooks" / "generate.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = hook.cli_markdown(main, width=80)  # CliRunner's width
    for name in ["", *COMMANDS]:
        shown = CliRunner().invoke(main, [*([name] if name else []), "--help"], prog_name="mfu-sweep").output
        assert "-h, --help" in shown and shown.rstrip("\n") in page, f"the reference differs from {name} --help"


def test_schema_reference_lists_every_field_of_the_schema(site: Path) -> None:
    schema = json.loads((ROOT / "mfu_sweep" / "schema" / "v1.json").read_text())
    html = (site / "reference" / "schema" / "index.html").read_text()
    fields = [f for d in schema["$defs"].values() if isinstance(d, dict) for f in d.get("properties", {})]
    assert len(fields) > 40
    missing = [f for f in fields if f"<code>{f}</code>" not in html and f".{f}</code>" not in html]
    assert not missing, f"fields of v1.json missing from the generated reference: {missing}"


def _runnable_blocks() -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """(page, [(command, output lines shown)]) for every fenced block right after the run mark."""
    blocks = []
    for page, text in _doc_pages().items():
        for m in re.finditer(re.escape(RUN_MARK) + r"\s*\n```[a-z]*\n(.*?)\n```", text, re.S):
            steps: list[tuple[str, list[str]]] = []
            for line in m.group(1).splitlines():
                if line.startswith("$ "):
                    steps.append((line[2:].split("  #")[0].strip(), []))
                elif steps and line.strip() and line.strip() != "...":  # "..." marks lines left out
                    steps[-1][1].append(line.strip())
            blocks.append((page, steps))
    return blocks


def test_runnable_blocks_print_what_they_show(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocks = _runnable_blocks()
    assert len(blocks) >= 4, "the marked blocks were not found (did the mark change?)"
    for name in ("sweeps", "tests", "data"):  # what the blocks read; what they write stays in tmp_path
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for page, steps in blocks:
        for command, shown in steps:
            argv = shlex.split(command)
            assert argv[0] == "mfu-sweep" and not set("|><;&") & set(command), f"{page}: run only mfu-sweep: {command}"
            args = [hit for a in argv[1:] for hit in (sorted(glob.glob(a)) if "*" in a else [a])]
            res = CliRunner().invoke(main, args)
            assert res.exit_code == 0, f"{page}: `{command}` exited {res.exit_code}: {res.output[-2000:]}"
            lines = {ln.strip() for ln in res.output.splitlines()}
            stale = [ln for ln in shown if ln not in lines]
            assert not stale, f"{page}: `{command}` no longer prints: {stale}"


PYTHON_MARK = "<!-- docs-test: python -->"


def _python_blocks() -> list[tuple[str, str]]:
    """(page, text) of every ``pycon`` block right after the python mark: doctest sessions."""
    return [(page, m.group(1)) for page, text in _doc_pages().items()
            for m in re.finditer(re.escape(PYTHON_MARK) + r"\s*\n```pycon\n(.*?)\n```", text, re.S)]


def test_python_blocks_print_what_they_show(monkeypatch: pytest.MonkeyPatch) -> None:
    """The marked ``pycon`` blocks (docs/api.md) run as doctests, in the checkout's root, each page's blocks in
    order in one namespace: every ``>>>`` line's output must be what the page shows."""
    import doctest

    blocks = _python_blocks()
    assert len(blocks) >= 6 and {page for page, _ in blocks} >= {"api.md"}, "the python blocks were not found"
    monkeypatch.chdir(ROOT)
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    namespaces: dict[str, dict] = {}
    for i, (page, text) in enumerate(blocks):
        test = parser.get_doctest(text, namespaces.setdefault(page, {}), f"{page} block {i}", page, 0)
        out: list[str] = []
        result = runner.run(test, out=out.append, clear_globs=False)
        assert result.failed == 0, "".join(out)[-3000:]
        namespaces[page] = test.globs  # a DocTest runs in a copy: the next block of the page goes on from here


def _command_lines(text: str) -> list[list[str]]:
    """Every ``mfu-sweep`` command of a page's fenced blocks (``$ `` prompts and bare lines), split, without
    its comment."""
    lines = [ln.removeprefix("$ ").split("  #")[0] for block in re.findall(r"```[a-z]*\n(.*?)\n```", text, re.S)
             for ln in block.splitlines()]
    return [shlex.split(ln) for ln in lines if ln.startswith("mfu-sweep ")]


def _written(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--output", "--output-dir")]


def test_the_tours_write_into_their_own_ignored_directories() -> None:
    """The README's tour and the docs' tour can be followed one after the other in one checkout: neither writes
    what the other does (the second would refuse to overwrite it), and both write under out/, which git ignores."""
    readme = {o for argv in _command_lines(README) for o in _written(argv)}
    tour = {o for argv in _command_lines((DOCS / "tour.md").read_text()) for o in _written(argv)}
    assert readme and tour and not readme & tour, readme & tour
    assert all(o.startswith("out/") for o in readme | tour), readme | tour
    assert "out/" in (ROOT / ".gitignore").read_text().split()


def test_the_whole_pipeline_reads_only_files_that_exist_or_an_earlier_line_writes() -> None:
    (pipeline,) = re.findall(r"## The whole pipeline\n.*?```\n(.*?)\n```", (DOCS / "tour.md").read_text(), re.S)
    written: set[str] = set()
    for argv in _command_lines(f"```\n{pipeline}\n```"):
        outputs = _written(argv)
        inputs = [a for a in argv[2:] if a.endswith((".json", ".csv")) and a not in outputs]
        missing = [a for a in inputs if a not in written and not glob.glob(str(ROOT / a))]
        assert not missing, f"`{shlex.join(argv)}` reads {missing}, which nothing before it writes"
        written.update(outputs)
    assert len(written) >= 5


def test_ci_runs_make_test_only() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [ln for ln in ci.splitlines() if ln.strip() and not ln.startswith("#")]
    assert commands[-1].strip() == "make test"


def test_layout_page_names_every_module() -> None:
    layout = (DOCS / "layout.md").read_text()
    modules = sorted({p.name for p in (ROOT / "mfu_sweep").rglob("*.py") if p.name != "__init__.py"})
    assert len(modules) > 40
    missing = [m for m in modules if m not in layout]
    assert not missing, f"docs/layout.md does not name {missing}: add a line for each to its tree"


def test_shell_completion_as_documented() -> None:
    install = (DOCS / "install.md").read_text()
    assert "_MFU_SWEEP_COMPLETE=bash_source mfu-sweep" in install
    runner = CliRunner()
    script = runner.invoke(main, [], prog_name="mfu-sweep", env={"_MFU_SWEEP_COMPLETE": "bash_source"})
    assert "_mfu_sweep_completion()" in script.output
    env = {"_MFU_SWEEP_COMPLETE": "bash_complete", "COMP_WORDS": "mfu-sweep sweep --dtype ", "COMP_CWORD": "3"}
    offered = runner.invoke(main, [], prog_name="mfu-sweep", env=env).output.split()
    assert "plain,bf16" in offered and "plain,fp8" in offered, offered
    listed = re.search(r"`sweep --dtype <TAB>` offers\s+`([^`]*)`", install)
    assert listed and listed.group(1).split() == [o.removeprefix("plain,") for o in offered]  # every dtype, in order
