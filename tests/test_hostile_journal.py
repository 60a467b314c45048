"""Issue 47, items 6 and 7: a damaged journal never locks its file, a foreign one is never silently ignored.

One bad line inside a journal made every reader stop at "line 3 is not JSON", with no remedy and the
intact records out of reach. Now the refusal names the line and both remedies; ``--allow-invalid`` reads
the intact records with a note naming the lines skipped; ``mfu-sweep repair FILE`` folds them into the
file for good and says what it dropped; ``sweep --resume`` says to repair first. A journal of another
run, or with a ``base_records`` that does not match, is named in a note. Journals are built by hand from
the golden file's records (``tests/test_journal.py``'s ``journalled``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_journal import journalled

from mfu_sweep.cli import main
from mfu_sweep.records.journal import journal_path, parse_journal
from mfu_sweep.records.results import load_sweeps, read_json


def run(*args: str | Path) -> Result:
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def damage(path: Path, line: int, text: bytes = b"{not json") -> None:
    """Replace line ``line`` (1-based) of ``path``'s journal with ``text``."""
    jp = journal_path(path)
    lines = jp.read_bytes().split(b"\n")
    lines[line - 1] = text
    jp.write_bytes(b"\n".join(lines))


@pytest.fixture()
def damaged(tmp_path: Path) -> tuple[Path, dict, list[dict]]:
    """A file of 2 records and a journal of 4 more whose line 3 (the second record) is not JSON."""
    path, doc, extra = journalled(tmp_path, base=2, lines=4)
    damage(path, 3)
    return path, doc, extra


def test_every_reader_names_the_line_and_both_remedies(damaged: tuple[Path, dict, list[dict]]) -> None:
    path = damaged[0]
    for args in (["validate", path], ["fit", path], ["export", path], ["merge", path, "-o", "m.json"]):
        res = run(*args)
        assert res.exit_code == 1, res.output
        assert "line 3 is not JSON" in res.output and f"mfu-sweep repair {path}" in res.output
        assert "--allow-invalid" in res.output


def test_allow_invalid_reads_the_intact_records_and_names_the_lines(damaged: tuple[Path, dict, list[dict]]) -> None:
    path, doc, extra = damaged
    res = run("export", path, "--allow-invalid")
    assert res.exit_code == 0, res.output
    (note,) = [ln for ln in res.stderr.splitlines() if "skipped line 3 (not JSON)" in ln]
    assert str(journal_path(path)) in note and "mfu-sweep repair" in note
    assert res.stdout.count("\n") == 1 + 2 + 3  # the header, the file's 2 records, 3 of the journal's 4
    res = run("merge", path, "--allow-invalid", "-o", "m.json")
    assert res.exit_code == 0 and len(load_sweeps(["m.json"])[0].records) == 5, res.output


def test_repair_folds_the_intact_records_and_says_what_it_dropped(damaged: tuple[Path, dict, list[dict]]) -> None:
    path, doc, extra = damaged
    damage(path, 5, b'{"something": "else"}')  # JSON, but no record line
    res = run("repair", path)
    assert res.exit_code == 0, res.output
    assert "folded 2 records of its journal into it" in res.output
    assert "line 3 (not JSON); line 5 (JSON but no record)" in res.output and res.output.rstrip().endswith("ok")
    assert not journal_path(path).exists()
    records = json.loads(path.read_text())["records"]
    assert records == doc["records"] + [extra[0], extra[2]]  # lines 2 and 4 of the journal: its 1st and 3rd record
    assert run("validate", path).exit_code == 0


def test_repair_of_a_cut_short_last_line_keeps_every_whole_record(tmp_path: Path) -> None:
    path, doc, extra = journalled(tmp_path, base=2, lines=2)
    with journal_path(path).open("ab") as fh:
        fh.write(b'{"record": {"shape": ')
    res = run("repair", path)
    assert res.exit_code == 0, res.output
    assert "folded 2 records" in res.output and "line 4 (cut short: the shape in flight" in res.output
    assert len(read_json(path)["records"]) == 4


def test_repair_without_a_journal_says_so(tmp_path: Path) -> None:
    path, _, _ = journalled(tmp_path, lines=0)
    journal_path(path).unlink()
    res = run("repair", path)
    assert res.exit_code == 0 and "nothing to repair" in res.output


def test_sweep_resume_on_a_damaged_journal_says_to_repair(damaged: tuple[Path, dict, list[dict]]) -> None:
    path = damaged[0]
    res = run("sweep", "--resume", "-o", path)
    assert res.exit_code == 1, res.output
    assert "line 3 is not JSON" in res.output and f"run `mfu-sweep repair {path}` first, then resume" in res.output
    assert journal_path(path).exists()  # nothing replaced


def test_parse_journal_skips_only_when_asked(tmp_path: Path) -> None:
    raw = b'{"journal":"mfu-sweep","format":1,"run_id":"r","base_records":0}\n{"record":{"a":1}}\nxx\n[1]\n'
    with pytest.raises(ValueError, match="line 3 is not JSON"):
        parse_journal(tmp_path / ".s.json.journal", raw)
    got = parse_journal(tmp_path / ".s.json.journal", raw, skip_invalid=True)
    assert got.records == [{"a": 1}] and got.dropped == ((3, "not JSON"), (4, "not a record line"))


# -- a journal that does not extend its file ------------------------------------------------------------------

def test_a_foreign_run_journal_is_named_in_a_note_not_ignored(tmp_path: Path) -> None:
    path, doc, extra = journalled(tmp_path, base=2, lines=4)
    damage(path, 1, json.dumps({"journal": "mfu-sweep", "format": 1, "run_id": "someone-else",
                                "base_records": 2}).encode())
    res = run("export", path)
    assert res.exit_code == 0, res.output
    (note,) = [ln for ln in res.stderr.splitlines() if ln.startswith("note:") and "journal" in ln]
    assert "4 records the file lacks" in note and "'someone-else'" in note and doc["run"]["id"] in note
    assert res.stdout.count("\n") == 1 + 2  # left out, but said
    res = run("repair", path)
    assert res.exit_code == 1 and "another sweep's journal, never folded" in res.output
    assert journal_path(path).exists()
    res = run("sweep", "--resume", "-o", path)
    assert res.exit_code == 1 and "a resume would replace that journal" in res.output


def test_a_journal_with_a_wrong_base_is_named_and_repair_folds_what_is_new(tmp_path: Path) -> None:
    path, doc, extra = journalled(tmp_path, base=2, lines=4)
    damage(path, 1, json.dumps({"journal": "mfu-sweep", "format": 1, "run_id": doc["run"]["id"],
                                "base_records": -5}).encode())
    res = run("validate", path)
    assert "base_records=-5" in res.output and "4 records the file lacks" in res.output
    res = run("repair", path)
    assert res.exit_code == 0 and "folded 4 records" in res.output, res.output
    assert len(read_json(path)["records"]) == 6 and not journal_path(path).exists()


def test_a_stale_journal_whose_records_are_in_the_file_stays_quiet(tmp_path: Path) -> None:
    """A fold killed after writing the file, before removing the journal: nothing is missing, nothing said."""
    path, doc, extra = journalled(tmp_path, base=2, lines=2)
    folded = read_json(path)
    path.write_text(json.dumps(folded))  # the file now holds the journal's records too
    res = run("export", path)
    assert res.exit_code == 0 and "note:" not in res.stderr and res.stdout.count("\n") == 5
