"""Progress of the analysis commands (cli/progress.py) with a fake clock: quiet when short, a line
redrawn on a terminal, a few plain lines in a log."""

from __future__ import annotations

import io

from mfu_sweep.cli.progress import LOG_EVERY_S, QUIET_S, StepProgress


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def run(terminal: bool, times: list[float], total: int = 10) -> str:
    clock, out = Clock(), io.StringIO()
    bar = StepProgress("fitting", "series", stream=out, terminal=terminal, clock=clock)
    for i, t in enumerate(times):
        clock.t = 100.0 + t
        bar(i + 1, total)
    bar.close()
    return out.getvalue()


def test_short_work_shows_nothing() -> None:
    assert run(True, [0.5, 1.0, QUIET_S - 0.1]) == ""
    assert run(False, [0.5, 1.0, QUIET_S - 0.1]) == ""


def test_terminal_redraws_one_line() -> None:
    text = run(True, [1.0, QUIET_S + 1, QUIET_S + 2, QUIET_S + 3], total=4)
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    assert "\rfitting: 4/4 series, 8 s" in text


def test_a_log_gets_plain_lines_no_frames() -> None:
    times = [QUIET_S + i for i in range(40)]  # 40 s of work, a unit a second
    text = run(False, times, total=40)
    lines = text.splitlines()
    assert "\r" not in text
    assert lines[0] == "fitting: 1/40 series, 5 s"
    assert 3 <= len(lines) <= 2 + 40 / LOG_EVERY_S  # the first, one per 15 s, the closing one
    assert lines[-1].startswith("fitting: 40/40 series, done in")
