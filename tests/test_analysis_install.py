"""The analysis-only install: every analysis command runs where torch cannot be imported, the measuring
commands say in one line how to add it, and the documented ``--no-deps`` recipe names every dependency.

torch is made unimportable in a child process by a ``sys.meta_path`` finder that refuses it, so the
commands run on this machine's real code and the committed files, as they would in a venv without torch.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Runs in a child: torch refused, then each command in-process; prints one line per command, then whether
# torch got imported after all.
CHILD = textwrap.dedent('''
    import sys

    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError(f"No module named {name!r} (refused by the test)")

    sys.meta_path.insert(0, NoTorch())
    from click.testing import CliRunner
    from mfu_sweep.cli import main

    for args in COMMANDS:
        res = CliRunner().invoke(main, args)
        last = res.output.strip().splitlines()[-1:] or [""]
        print(res.exit_code, args[0], repr(last[0][:300]), type(res.exception).__name__)
    print("torch imported:", any(m == "torch" or m.startswith("torch.") for m in sys.modules))
''')


def _run(commands: list[list[str]], cwd: Path) -> list[str]:
    code = f"COMMANDS = {commands!r}\n{CHILD}"
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()


def test_analysis_commands_run_without_torch_and_measuring_ones_say_how_to_add_it(tmp_path: Path) -> None:
    ref, zen5 = str(REPO / "sweeps" / "amd-epyc-cpu.json"), str(REPO / "sweeps" / "amd-epyc-zen5-cpu.json")
    p100 = str(REPO / "sweeps" / "published" / "NV_P100.json")
    data = REPO / "tests" / "data" / "import"
    analysis = [
        ["import", "mamf-finder", str(data / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"), "-o", "imp"],
        ["import", "tritonbench", str(data / "tritonbench_gemm_bf16_synthetic.csv"), "--dtype", "bf16", "-o", "imp"],
        ["validate", ref, p100],
        ["compare", ref, zen5],
        ["fit", ref, "--n-boot", "20"],
        ["merge", ref, p100, "-o", "merged.json"],
        ["export", ref, p100, "-o", "records.csv"],
        ["export", ref, "--format", "nvbench", "-o", "ref.nvbench.json"],
        ["report", ref, "--dtype", "fp32", "--n-boot", "20", "-o", "report"],
        ["predict", zen5, "--model", "qwen3-32b", "--tokens", "256", "--dtype", "fp32", "--allow-partial"],
    ]
    measuring = [["sweep", "--device", "cpu", "--dry-run"], ["selftest", "--device", "cpu"],
                 ["ceilings", "--device", "cpu"], ["specs", "--detect", "--device", "cpu"]]
    lines = _run(analysis + measuring, tmp_path)
    assert lines[-1] == "torch imported: False"
    for args, line in zip(analysis, lines, strict=False):
        assert line.startswith("0 ") and line.endswith(" NoneType"), (args, line)
    for args, line in zip(measuring, lines[len(analysis):], strict=False):
        assert line.startswith("1 ") and "needs torch to open a device" in line, (args, line)
        assert "python -m pip install '.[measure]'" in line and "SystemExit" in line, line  # as the README says
        assert "'.[measure]'" in (REPO / "README.md").read_text()
    assert (tmp_path / "report" / "index.html").is_file() and (tmp_path / "ref.nvbench.json-bin").is_dir()


def _deps(spec: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() for d in spec}


def test_the_no_deps_recipe_names_every_dependency_and_torch_is_an_extra() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = _deps(project["dependencies"])
    assert "torch" not in core and "torch" in _deps(project["optional-dependencies"]["measure"])
    for doc in ("docs/install.md", "README.md"):
        text = (REPO / doc).read_text()
        recipe = re.search(r"pip install --no-deps [^\n]*\n[^\n]*pip install ([a-z0-9 _.-]+)", text)
        assert recipe, f"{doc}: no --no-deps recipe"
        assert set(recipe.group(1).split()) == core, doc
