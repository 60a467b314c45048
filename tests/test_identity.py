"""One label, one device: two fingerprints under one label are refused everywhere analysis groups sweeps.

The sweeps are SYNTHETIC documents (tests/synthetic.py) given fingerprints built by the real
fingerprint code from synthetic /proc/cpuinfo texts (tests/cpuinfo_texts.py).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from cpuinfo_texts import ZEN4, ZEN5
from synthetic import make_sweep_doc, write_sweep

from mfu_sweep.analysis.ground.series import SeriesError, group_series
from mfu_sweep.analysis.sources.merge import Relabel, merge_files
from mfu_sweep.cli import main
from mfu_sweep.measure.sweep import default_label
from mfu_sweep.records.fingerprint import cpu_fingerprint
from mfu_sweep.records.results import parse_document
from mfu_sweep.specs.cpu import default_cpu_label, parse_cpuinfo

FP4 = cpu_fingerprint(parse_cpuinfo(ZEN4), threads=2, cpus=[0, 1], memory_gib=8)
FP5 = cpu_fingerprint(parse_cpuinfo(ZEN5), threads=2, cpus=[0, 1], memory_gib=8)


def _doc(fp=None, seed: int = 0, **kw) -> dict:
    doc = make_sweep_doc("amd-epyc-cpu", P_tflops=0.1, W_tbs=0.05, t0_s=1e-5, flops=[1e7, 1e8, 1e9], seed=seed,
                         device_name="AMD EPYC", backend="cpu", host="vm", **kw)
    if fp is not None:
        doc["device"].update(fp.device_fields())
    return doc


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two sweeps that differ only in their fingerprint (and their samples)."""
    return write_sweep(tmp_path, _doc(FP4, seed=1), "a.json"), write_sweep(tmp_path, _doc(FP5, seed=2), "b.json")


def test_merge_refuses_two_fingerprints_under_one_label(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    with pytest.raises(SeriesError) as info:
        merge_files([a, b])
    msg = str(info.value)
    assert FP4.id in msg and FP5.id in msg and "--relabel FILE:amd-epyc-cpu=NEW" in msg and "\n" not in msg
    assert "zen4" in msg and "zen5" in msg and str(a) in msg and str(b) in msg


def test_relabel_resolves_it(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    result = merge_files([a, b], [Relabel.parse(f"{b}:amd-epyc-cpu=amd-epyc-zen5-cpu")])
    assert result.labels == ["amd-epyc-cpu", "amd-epyc-zen5-cpu"]


def test_group_series_refuses_it() -> None:
    sweeps = parse_document(_doc(FP4, seed=1), "a") + parse_document(_doc(FP5, seed=2), "b")
    with pytest.raises(SeriesError, match=re.escape(FP5.id)):
        group_series(sweeps)


def test_same_fingerprint_and_files_without_one_are_as_before(tmp_path: Path) -> None:
    a = write_sweep(tmp_path, _doc(FP4, seed=1), "a.json")
    same = write_sweep(tmp_path, _doc(FP4, seed=2), "same.json")
    old = write_sweep(tmp_path, _doc(None, seed=3), "old.json")  # written before fingerprints
    assert len(merge_files([a, same, old]).sweeps) == 3
    b = write_sweep(tmp_path, _doc(FP5, seed=4), "b.json")
    with pytest.raises(SeriesError):  # an unfingerprinted sweep does not bridge two fingerprints
        merge_files([a, old, b])


def test_pieces_of_one_sharded_run_stay_one_device(tmp_path: Path) -> None:
    pieces = []
    for i, fp in enumerate((FP4, FP5)):
        doc = _doc(fp, seed=10 + i)
        doc["settings"] = {"shard": f"{i}/2", "seed": 0}  # pieces of one run share their settings
        doc["run"] = {**doc["run"], "id": f"piece{i}"}
        pieces.append(write_sweep(tmp_path, doc, f"p{i}.json"))
    assert len(merge_files(pieces).sweeps) == 2


@pytest.mark.parametrize("command", [["fit"], ["compare", "--a", "amd-epyc-cpu/bf16/eager",
                                                "--b", "x/bf16/eager"], ["plot", "-o", "figs"],
                                     ["report", "-o", "rep"], ["merge", "-o", "m.json"]])
def test_cli_commands_give_one_line_error(tmp_path: Path, command: list[str]) -> None:
    a, b = _pair(tmp_path)
    res = CliRunner().invoke(main, [command[0], str(a), str(b), *command[1:]])
    assert res.exit_code != 0
    assert res.exception is None or isinstance(res.exception, SystemExit)
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and res.output.rstrip().endswith(errors[0]), res.output  # one line, no traceback
    assert FP4.id in errors[0] and FP5.id in errors[0] and "--relabel" in errors[0]
    assert not (tmp_path / "m.json").exists()
    assert not Path("figs").exists() and not Path("rep").exists()  # nothing written, no folder made


def test_schema_rejects_nothing_new_for_old_merged_files(tmp_path: Path) -> None:
    doc = {"schema_version": 1, "kind": "merged", "sweeps": [_doc(None, seed=1)]}
    assert len(parse_document(copy.deepcopy(doc), "m")) == 1


def test_default_cpu_label_names_the_microarchitecture() -> None:
    assert default_cpu_label(parse_cpuinfo(ZEN4)) == "amd-epyc-9r14-zen4-cpu"
    assert default_cpu_label(parse_cpuinfo(ZEN5)) == "amd-epyc-zen5-cpu"
    unknown = parse_cpuinfo("vendor_id\t: X\ncpu family\t: 7\nmodel\t\t: 3\nmodel name\t: Mystery\n")
    assert default_cpu_label(unknown) == "mystery-f7m3-cpu"
    # the sweep header's default label (from the backend's device block) is the same string
    assert default_label({"name": "AMD EPYC", "chip": "cpu", "backend": "cpu", "uarch": "zen5"}) == \
        default_cpu_label(parse_cpuinfo(ZEN5))
    assert default_label({"name": "NVIDIA H100", "chip": "h100-sxm", "backend": "cuda"}) == "h100-sxm-cuda"


def test_make_sweep_writes_only_under_out(tmp_path: Path) -> None:
    """`make -n sweep` (commands printed, none run): every output of the target is under out/."""
    root = Path(__file__).resolve().parents[1]
    stamp = tmp_path / "stamp"
    stamp.write_text("")
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(["make", "-s", "-n", "-C", str(root), "sweep", f"BIN={Path(sys.executable).parent}",
                           f"STAMP={stamp}"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    outputs = re.findall(r"-o (\S+)", text)
    assert len(outputs) == 3, text
    assert all(o.startswith("out/") for o in outputs), outputs
    assert f"out/sweeps/{default_cpu_label()}.json" in outputs
    assert not re.search(r"(^|\s)(sweeps|plots)/", text), text


def test_resume_refuses_another_kind_of_machine(tmp_path: Path) -> None:
    from mfu_sweep.measure.sweep import SweepError, SweepPlan, _resume_from

    path = write_sweep(tmp_path, _doc(FP4, seed=1), "r.json")
    (fresh,) = parse_document(_doc(FP5, seed=1), "fresh")
    plan = SweepPlan(device="cpu", tasks=[], output=path, resume=True)
    with pytest.raises(SweepError, match=f"device.fingerprint='{FP4.id}' differs from this device's '{FP5.id}'"):
        _resume_from(plan, fresh)
    (old_style,) = parse_document(_doc(None, seed=1), "old")
    assert _resume_from(plan, old_style).device["fingerprint"] == FP4.id  # one side without: as before


def test_specs_detect_prints_rate_citation_and_fingerprint() -> None:
    res = CliRunner().invoke(main, ["specs", "--detect", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "FLOP/cycle per physical core: fp32 " in res.output
    assert "cpu_uarch.toml" in res.output  # the row used, or the fallback rule for an unknown part
    assert "fingerprint: cpu-" in res.output and f"default label {default_cpu_label()}" in res.output
