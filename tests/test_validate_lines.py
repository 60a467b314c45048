"""``mfu-sweep validate``: each INVALID line names its file once (``FILE: INVALID: problem``), whatever the problem.

The files are SYNTHETIC: the golden v1 sweep and a recorded step file with one thing broken, in tmp_path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main

HERE = Path(__file__).parent
GOLDEN = HERE / "golden" / "v1_sweep.json"
STEPS = HERE.parent / "sweeps" / "steps" / "amd-epyc-zen4-cpu-model-steps-infer.json"


def _sweep(edit: Callable[[dict], None]) -> str:
    doc = json.loads(GOLDEN.read_text())
    edit(doc)
    return json.dumps(doc)


def _steps(edit: Callable[[dict], None]) -> str:
    doc = json.loads(STEPS.read_text())
    edit(doc)
    return json.dumps(doc)


CASES = {  # file name: (its text, a fragment of the problem)
    "bad-json.json": ('{"schema_version": 1,', "not valid JSON"),
    "empty.json": ("", "file is empty"),
    "not-an-object.json": ("[]", "top level must be a JSON object"),
    "version-99.json": ('{"schema_version": 99, "sweeps": []}', "schema_version=99 is not supported"),
    "version-text.json": ('{"schema_version": "1", "sweeps": []}', "schema_version='1' is not supported"),
    "no-tool.json": (_sweep(lambda d: d.pop("tool")), '"tool" is a required property'),
    "wrong-type.json": (_sweep(lambda d: d["records"][0].update(flops="many")), "records/0/flops"),
    "twice.json": ('{"schema_version": 1, "a": 1, "a": 2}', "key 'a' appears twice"),
    "steps-no-status.json": (_steps(lambda d: d["runs"][0].pop("status")), '"status" is a required property'),
    "steps-version-99.json": (_steps(lambda d: d.update(schema_version=99)), "schema_version=99"),
}


def _validate(*args: str) -> list[str]:
    res = CliRunner().invoke(main, ["validate", *args])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    return [ln for ln in res.output.splitlines() if ": INVALID: " in ln]


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_invalid_line_names_its_file_once(tmp_path: Path, name: str) -> None:
    text, fragment = CASES[name]
    f = tmp_path / name
    f.write_text(text)
    [line] = _validate(str(f))
    assert line.startswith(f"{f}: INVALID: ") and fragment in line, line
    assert line.count(name) == 1, line


def test_unreadable_paths_are_named_once(tmp_path: Path) -> None:
    folder, missing = tmp_path / "folder.json", tmp_path / "missing.json"
    folder.mkdir()
    lines = _validate(str(folder), str(missing))
    assert lines == [f"{folder}: INVALID: it is a directory, not a file", f"{missing}: INVALID: no such file"]


def test_json_problems_leave_the_file_to_its_field(tmp_path: Path) -> None:
    f = tmp_path / "version-99.json"
    f.write_text('{"schema_version": 99, "sweeps": []}')
    res = CliRunner().invoke(main, ["validate", str(f), "--json"])
    [found] = json.loads(res.output[:res.output.rindex("}") + 1])["files"]
    assert found["file"] == str(f) and found["problems"] == ["schema_version=99 is not supported (this tool reads 1)"]
