"""Imported sources as other people write them: upper-case dtype keys, the older ``sm_100`` key, a log that does
not say when it was measured, and the command ``refine`` prints for a pair of published tables.

Fixtures are the real excerpts of tests/data/import/ (cited in its provenance.toml), copied and edited in a
temporary directory the way another tool or an older version writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from import_cli import run

from mfu_sweep.cli import main
from mfu_sweep.importers import import_sources
from mfu_sweep.importers.common import measured_at
from mfu_sweep.records.results import load_sweeps, validate_file
from mfu_sweep.records.summaries import incomplete_reason

DATA = Path(__file__).parent / "data" / "import"
XLA = DATA / "xla_main_excerpt.txtpb"
GPU0 = DATA / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"
PUBLISHED = Path(__file__).resolve().parents[1] / "sweeps" / "published"


def _records(result) -> dict[str, list[tuple[str, str, float]]]:
    return {label: sorted((str(r.shape), r.dtype, r.median_s) for r in sw.records)
            for label, sw in result.sweeps.items()}


def test_upper_case_dtype_keys_read_as_the_lower_case_ones(tmp_path: Path) -> None:
    """``BF16xBF16->BF16`` is the same key as ``bf16xbf16->bf16``: the same records, the source's spelling kept."""
    text = XLA.read_text()
    upper = tmp_path / XLA.name
    upper.write_text(text.replace("bf16xbf16->bf16", "BF16xBF16->BF16").replace("f32xf32->f32", "F32XF32->F32"))
    assert "BF16xBF16->BF16" in upper.read_text()
    want, got = import_sources("xla-perf-table", [XLA]), import_sources("xla-perf-table", [upper])
    assert _records(got) == _records(want) and any(_records(got).values())
    keys = {r.extra["source_dtype"] for sw in got.sweeps.values() for r in sw.records}
    assert "BF16xBF16->BF16" in keys
    tf32 = [r for sw in got.sweeps.values() for r in sw.records if r.dtype == "fp32"]
    assert tf32 and all("maybe_tf32" in r.flags for r in tf32)  # the f32 key's meaning survives its case


def test_the_older_sm_100_key_maps_to_b200(tmp_path: Path) -> None:
    """Older tables name Blackwell ``sm_100`` (no product suffix): B200 by default, GB200 named in a warning."""
    old = tmp_path / XLA.name
    old.write_text(XLA.read_text().replace('key: "sm_100_B200"', 'key: "sm_100"'))
    res = import_sources("xla-perf-table", [old])
    assert res.sweeps["sm_100"].peak.chip == "b200" and res.sweeps["sm_100"].peak.for_dtype("bf16")
    assert any("sm_100" in w and "gb200" in w for w in res.warnings)


def test_a_log_that_does_not_say_when_gets_no_made_up_start_time(tmp_path: Path) -> None:
    """``run.started_at`` is the log's own start time (ISO 8601), the source's date, or null; never "unknown"."""
    dated = tmp_path / "dated" / GPU0.name
    undated = tmp_path / "undated" / GPU0.name
    dated.parent.mkdir()
    undated.parent.mkdir()
    text = GPU0.read_text()
    assert "Benchmark started on 2025-01-05 06:20:47" in text
    dated.write_text(text)
    undated.write_text(text.replace("Benchmark started on 2025-01-05 06:20:47\n", ""))  # as version 1 wrote it
    for path, when in ((dated, "2025-01-05T06:20:47"), (undated, None)):
        out = tmp_path / f"out-{path.parent.name}"
        res = run("mamf-finder", str(path), "-o", str(out))
        assert res.exit_code == 0, res.output
        (written,) = out.glob("*.json")
        data = json.loads(written.read_text())
        assert data["run"]["started_at"] == when and validate_file(written) == []
        (sweep,) = load_sweeps([written])
        assert incomplete_reason(sweep) is None  # whole as read, dated or not
    assert measured_at({"date": "2025-01-05"}) == "2025-01-05"  # a provenance.toml date, when the log has none


def test_refine_on_published_tables_prints_a_sweep_command_for_the_compared_dtypes_and_mode(tmp_path: Path) -> None:
    """The command to measure the proposals on one's own device names the dtypes and the mode compared
    (the XLA tables are compile mode: a plain ``sweep`` would measure eager fp32 only)."""
    out = tmp_path / "next.csv"
    res = CliRunner().invoke(main, ["refine", str(PUBLISHED / "sm_100_B200.json"), str(PUBLISHED / "gfx950.json"),
                                    "--metric", "tflops", "-o", str(out)])
    assert res.exit_code == 0, res.output  # B200 and gfx950 cross in the data: there is something to measure
    want = "mfu-sweep sweep --device cuda --dtype bf16 --dtype fp32 --dtype fp8 --mode compile --shape-file"
    assert want in res.output and want in out.read_text()
