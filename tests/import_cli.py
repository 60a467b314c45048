"""What the import tests share: running ``mfu-sweep import`` in-process and reading its one-line error."""

from __future__ import annotations

from click.testing import CliRunner, Result

from mfu_sweep.cli import main


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["import", *args])


def one_line_error(res: Result, *fragments: str) -> str:
    """The single `Error: ...` line of a failed command, checked for each fragment and no traceback."""
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert "Traceback" not in res.output and all(f in lines[0] for f in fragments), lines[0]
    return lines[0]
