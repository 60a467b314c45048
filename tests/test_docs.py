"""Every command has help with an example and is documented in the README (the sqlite-utils habit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main

README = (Path(__file__).parent.parent / "README.md").read_text()
COMMANDS = sorted(main.commands)


def test_readme_first_screen_has_the_two_commands() -> None:
    first_screen = "\n".join(README.splitlines()[:25])
    assert "make sweep" in first_screen and "make test" in first_screen


@pytest.mark.parametrize("name", COMMANDS)
def test_command_has_help_with_example(name: str) -> None:
    res = CliRunner().invoke(main, [name, "--help"])
    assert res.exit_code == 0, res.output
    assert "Example" in res.output, f"{name} --help lacks an Example block"


@pytest.mark.parametrize("name", COMMANDS)
def test_command_in_readme(name: str) -> None:
    assert f"mfu-sweep {name}" in README, f"README does not document `mfu-sweep {name}`"


def test_ci_runs_make_test_only() -> None:
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    commands = [ln for ln in ci.splitlines() if ln.strip() and not ln.startswith("#")]
    assert commands[-1].strip() == "make test"
