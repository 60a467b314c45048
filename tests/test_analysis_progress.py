"""Progress of the analysis commands (cli/progress.py over mfu_sweep/util/progress.py), with a fake clock:
plain lines in a log, never redrawn frames; a callback of done/total."""

from __future__ import annotations

import io

from mfu_sweep.cli.progress import step
from mfu_sweep.util.progress import PLAIN_EVERY_S


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def run(times: list[float], total: int) -> str:
    clock, out = Clock(), io.StringIO()
    with step("fitting", "series", stream=out, terminal=False, clock=clock) as bar:
        for i, t in enumerate(times):
            clock.t = 100.0 + t
            bar(i + 1, total)
    return out.getvalue()


def test_short_work_writes_nothing_to_a_log() -> None:
    assert run([0.5, 1.0, 2.0], 3) == ""


def test_a_log_gets_plain_lines_no_frames() -> None:
    text = run([float(i) for i in range(1, 61)], 60)  # a minute of work, a series a second
    lines = text.splitlines()
    assert "\r" not in text
    assert 2 <= len(lines) <= 1 + 60 / PLAIN_EVERY_S
    assert lines[0].startswith("fitting: ") and "/60 series" in lines[0]
    assert lines[-1].startswith("fitting: 60/60 series")


def test_a_terminal_gets_a_bar() -> None:
    out = io.StringIO()
    with step("fitting", "series", stream=out, terminal=True) as bar:
        for i in range(3):
            bar(i + 1, 3)
    assert "fitting" in out.getvalue() and "3/3" in out.getvalue()
