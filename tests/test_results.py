from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.records.results import (
    SCHEMA_VERSION,
    Record,
    ResultError,
    finish_record,
    load_sweeps,
    parse_document,
    save_sweep,
    validate_file,
    write_json_atomic,
)
from mfu_sweep.specs import Peak

GOLDEN = Path(__file__).parent / "golden" / "v1_sweep.json"


def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_golden_v1_still_loads() -> None:
    (sweep,) = load_sweeps([GOLDEN])
    assert sweep.label == "amd-epyc-cpu"
    assert len(sweep.records) == 4
    rec = sweep.records[0]
    assert rec.shape == Shape(1, 64, 64, 64) and rec.dtype == "fp32" and rec.mode == "eager"
    assert rec.samples_s and rec.block_size >= 1 and rec.timer == "host"
    assert rec.tflops == pytest.approx(rec.flops / rec.median_s / 1e12)
    assert sweep.peak.estimated and "estimated_peak" in rec.flags
    assert {r.shape.batch for r in sweep.records} == {1, 2}


def test_required_fields_exist_with_meaning() -> None:
    data = golden()
    assert data["schema_version"] == SCHEMA_VERSION == 1
    for key in ("tool", "run", "environment", "device", "peak", "records"):
        assert key in data
    assert {"id", "started_at", "finished_at", "argv", "host", "git_sha"} <= set(data["run"])
    assert {"backend", "name", "chip", "index", "count", "label"} <= set(data["device"])
    assert {"chip", "tflops", "memory_bandwidth_tbs", "source", "estimated", "override"} <= set(data["peak"])
    for r in data["records"]:
        for key in ("shape", "family", "dtype", "mode", "flops", "bytes", "intensity", "status", "error",
                    "first_call_s", "samples_s", "block_size", "median_s", "iqr_s", "tflops", "mfu",
                    "rel_error", "timer", "flags"):
            assert key in r, key


def test_round_trip(tmp_path) -> None:
    (sweep,) = load_sweeps([GOLDEN])
    out = tmp_path / "copy.json"
    save_sweep(out, sweep)
    (again,) = load_sweeps([out])
    assert again.records == sweep.records
    assert again.peak == sweep.peak and again.run == sweep.run


@pytest.mark.parametrize("mutate,fragment", [
    (lambda d: d.update(schema_version=2), "schema_version=2 is not supported"),
    (lambda d: d.pop("schema_version"), "no schema_version"),
    (lambda d: d["records"][0].update(status="great"), "records/0/status"),
    (lambda d: d["records"][0].update(samples_s=[]), "records/0"),
    (lambda d: d["records"][0]["shape"].update(m=0), "records/0/shape/m"),
    (lambda d: d["device"].pop("label"), "label"),
    (lambda d: d.update(schema_version=True), "schema_version=True"),
])
def test_invalid_documents_named(mutate, fragment: str) -> None:
    data = golden()
    mutate(data)
    with pytest.raises(ResultError) as info:
        parse_document(data, "f.json")
    assert fragment in str(info.value) and "f.json" in str(info.value)


def test_file_level_errors(tmp_path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(ResultError, match="empty"):
        load_sweeps([empty])
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ResultError, match="not valid JSON"):
        load_sweeps([bad])
    with pytest.raises(ResultError, match="no such file"):
        load_sweeps([tmp_path / "missing.json"])
    assert validate_file(bad) and not validate_file(GOLDEN)


def test_merged_form_loads() -> None:
    again = golden()
    again["run"]["id"] = "another-run"
    doc = {"schema_version": 1, "kind": "merged", "sweeps": [golden(), again]}
    assert len(parse_document(doc)) == 2
    doc["sweeps"][1] = golden()  # one run twice would count every record twice; merge keeps one copy
    with pytest.raises(ResultError, match="sweeps/1/run/id: .* repeats sweeps/0"):
        parse_document(doc)


def test_atomic_write_keeps_old_file_on_failure(tmp_path) -> None:
    f = tmp_path / "r.json"
    write_json_atomic(f, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(f, {"a": object()})
    assert json.loads(f.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_non_finite_numbers_become_null(tmp_path) -> None:
    f = tmp_path / "r.json"
    write_json_atomic(f, {"x": float("nan"), "y": [float("inf")]})
    assert json.loads(f.read_text()) == {"x": None, "y": [None]}


def _record(samples, dtype="bf16", first=None) -> Record:
    s = Shape(1, 1024, 1024, 1024)
    return Record(shape=s, dtype=dtype, mode="eager", flops=s.flops, bytes=1.0, intensity=1.0, status="ok",
                  samples_s=tuple(samples), block_size=1, first_call_s=first)


def test_flags_above_peak_noisy_estimated() -> None:
    peak = Peak(chip="x", tflops={"bf16": 1.0}, memory_bandwidth_tbs=None, source="s", estimated=True)
    # 2.1e9 FLOP in 1 ms = 2.1 TFLOP/s > 1.0 peak
    rec = finish_record(_record([0.7e-3, 0.8e-3, 1e-3, 1.3e-3, 1.5e-3], first=0.05), peak)
    assert {"above_peak", "noisy", "estimated_peak"} <= set(rec.flags)
    assert rec.mfu == pytest.approx(2 * 1024**3 / 1e-3 / 1e12)
    assert rec.first_call_ratio == pytest.approx(50.0)
    plain = Peak(chip="x", tflops={"bf16": 1.0}, memory_bandwidth_tbs=None, source="s")
    quiet = finish_record(_record([1e-2] * 5), plain)
    assert quiet.flags == () and quiet.iqr_s == 0.0


def test_missing_peak_gives_no_mfu() -> None:
    empty = Peak(chip=None, tflops={}, memory_bandwidth_tbs=None, source="")
    rec = finish_record(_record([1e-3] * 3, dtype="fp8"), empty)
    assert rec.mfu is None and rec.tflops is not None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_loader_never_tracebacks_on_random_json(data) -> None:
    try:
        parse_document(data)
    except ResultError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["records", "device", "peak", "run", "tool"]), st.text(max_size=6), json_values)
def test_loader_never_tracebacks_on_mutated_golden(section: str, key: str, value) -> None:
    data = copy.deepcopy(golden())
    target = data[section][0] if section == "records" else data[section]
    target[key or "x"] = value
    try:
        parse_document(data)
    except ResultError:
        pass


ROOT = Path(__file__).parent.parent


def test_fast_parser_reads_every_stored_file_as_the_standard_parser_does() -> None:
    import orjson

    from mfu_sweep.records.results import read_json

    paths = sorted([*ROOT.glob("sweeps/**/*.json"), *ROOT.glob("tests/**/*.json")])
    assert len(paths) > 20
    for path in paths:
        try:
            expected = json.loads(path.read_text(), parse_constant=float)
        except ValueError:
            continue  # not JSON: the loader's own tests cover its message
        assert read_json(path) == expected, path
    # what the fast parser refuses, the standard one reads: NaN and Infinity tokens, integers past 64 bits
    text = '{"a": NaN, "b": -Infinity, "c": 123456789012345678901234567890}'
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)


def test_non_standard_numbers_still_load(tmp_path) -> None:
    from mfu_sweep.records.results import read_json

    path = tmp_path / "odd.json"
    path.write_text('{"a": NaN, "b": -Infinity, "c": 123456789012345678901234567890, "d": 1.5e-7}')
    data = read_json(path)
    assert data["a"] != data["a"] and data["b"] == float("-inf")
    assert data["c"] == 123456789012345678901234567890 and data["d"] == 1.5e-7
