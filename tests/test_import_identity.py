"""Identity of imported devices: one GPU (one uuid) is one device, two GPUs of one model are two, an
architecture is kept or mapped to a chip, and contradicting identity fields are refused.

Real fixtures (tests/data/import/, cited in provenance.toml): the shisa-ai/mamf-finder 8xH100 logs
(gpu0 bf16, gpu0 fp8, gpu1 bf16: uuids 57a10f45-... and becb720b-...), the Strix Halo mamf-finder paste
(gcnArchName gfx1151, ROCm's placeholder uuid), the GH200 summary paste of ml-engineering PR #60 (no
uuid, sm_90) and the RTX 3060 nvbench markdown. Files named EDITED below are copies of a real log with one
field changed in the test, to make bad input; they say which field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from import_cli import one_line_error, run

from mfu_sweep.cli import main
from mfu_sweep.importers import import_sources
from mfu_sweep.importers.common import SourceDevice
from mfu_sweep.importers.grouping import label_suffix, short_uuids
from mfu_sweep.importers.identity import cuda_properties, from_torch_properties, gfx_version, usable_uuid
from mfu_sweep.records.fingerprint import fingerprint_from_fields
from mfu_sweep.records.results import load_sweeps, validate_file

DATA = Path(__file__).parent / "data" / "import"
GPU0 = DATA / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"
GPU1 = DATA / "mamf_finder_shisa_gpu1_bf16_excerpt.txt"
FP8 = DATA / "mamf_finder_shisa_gpu0_fp8_excerpt.txt"
STRIX = DATA / "mamf_finder_strix_halo_gfx1151_paste.txt"
PR60 = DATA / "mamf_finder_pr60_gh200_summary.txt"
NVB_MD = DATA / "nvbench_r100001_matmat_3060_excerpt.md"
H100 = "NVIDIA H100 80GB HBM3"
UUID0 = "57a10f45-cee3-7a37-0b89-5823c7db7942"
UUID1 = "becb720b-a538-82e0-fabc-159c4c2350a2"


def edited(tmp_path: Path, src: Path, old: str, new: str, name: str) -> Path:
    """EDITED copy of a real log: ``old`` replaced by ``new`` (must occur), nothing else changed."""
    text = src.read_text()
    assert old in text
    f = tmp_path / name
    f.write_text(text.replace(old, new))
    return f


# --- two GPUs of one model -------------------------------------------------------------------------------


def test_two_uuids_of_one_model_are_two_devices_with_distinct_labels(tmp_path) -> None:
    out = tmp_path / "o"
    res = run("mamf-finder", str(GPU0), str(GPU1), "-o", str(out))
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    docs = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert sorted(docs) == [f"NVIDIA-H100-80GB-HBM3-{UUID0[:8]}", f"NVIDIA-H100-80GB-HBM3-{UUID1[:8]}"]
    fps = {d["device"]["fingerprint"] for d in docs.values()}
    assert len(fps) == 2
    for d in docs.values():
        fields = d["device"]["fingerprint_fields"]
        assert fields["uuid"] in (UUID0, UUID1) and fields["arch"] == "sm_90" and fields["sm_count"] == 132
        # the id is reproducible from the recorded fields (the uuid is hashed for kind imported)
        assert fingerprint_from_fields("imported", {k: v for k, v in fields.items() if k != "kind"}).id == \
            d["device"]["fingerprint"]
        assert d["device"]["arch"] == "sm_90" and d["device"]["chip"] == "h100-sxm"
        assert d["import"]["device_properties"]["uuid"] == fields["uuid"]
    # both load together and compare with no --relabel
    cmp = CliRunner().invoke(main, ["compare", *map(str, sorted(out.glob("*.json"))), "--no-fit", "--json"])
    assert cmp.exit_code == 0, cmp.output


def test_the_same_gpu_imported_twice_keeps_its_label_and_fingerprint(tmp_path) -> None:
    a = import_sources("mamf-finder", [GPU0]).sweeps
    b = import_sources("mamf-finder", [GPU0, GPU1]).sweeps
    (label,) = a
    assert label in b and a[label].device["fingerprint"] == b[label].device["fingerprint"]


def test_short_uuid_grows_only_where_two_share_the_prefix() -> None:
    u1, u2, u3 = "abcdef01-0000-0000-0000-000000000001", "abcdef01-2000-0000-0000-000000000002", UUID0
    got = short_uuids([u1, u2, u3])
    assert got[u3] == UUID0[:8] and got[u1] == "abcdef010" and got[u2] == "abcdef012"


# --- one GPU, two dtypes -----------------------------------------------------------------------------------


def test_one_uuid_two_dtypes_is_one_device(tmp_path) -> None:
    out = tmp_path / "o"
    res = run("mamf-finder", str(GPU0), str(FP8), "-o", str(out))
    assert res.exit_code == 0, res.output
    (f,) = out.glob("*.json")
    assert f.name == f"NVIDIA-H100-80GB-HBM3-{UUID0[:8]}.json" and validate_file(f) == []
    (sw,) = load_sweeps([f])
    assert {r.dtype for r in sw.records} == {"bf16", "fp8"} and len(sw.records) == 16
    # bf16 line 1 "134.9(median) @ 1024x1024x1024", fp8 line 1 "164.3(median)"
    first = {r.dtype: r for r in sw.records if (r.shape.m, r.shape.n, r.shape.k) == (1024, 1024, 1024)}
    assert first["bf16"].tflops == pytest.approx(134.9) and first["fp8"].tflops == pytest.approx(164.3)
    imp = sw.extra["import"]
    assert [s["source_file"] for s in imp["sources"]] == [GPU0.name, FP8.name]
    assert imp["dtype_keys"] == {"bf16": "torch.bfloat16", "fp8": "torch.float8_e4m3fn"}
    assert "torch.mm" in imp["timing_method"] and "torch._scaled_mm" in imp["timing_method"]
    assert imp["notes"][0].startswith(f"2 files of one GPU (uuid {UUID0})")
    # the merged device is the same GPU as either file alone
    alone = next(iter(import_sources("mamf-finder", [FP8]).sweeps.values()))
    assert sw.device["fingerprint"] == alone.device["fingerprint"]
    # and with gpu1's bf16 in the same call: two devices, three dtype series
    res = run("mamf-finder", str(GPU0), str(FP8), str(GPU1), "-o", str(tmp_path / "three"))
    assert res.exit_code == 0 and len(list((tmp_path / "three").glob("*.json"))) == 2, res.output


def test_chip_options_of_one_gpu_must_agree(tmp_path) -> None:
    res = run("mamf-finder", str(GPU0), str(FP8), "-o", str(tmp_path / "o"), "--chip", f"{H100}=h100-pcie")
    assert res.exit_code == 0, res.output
    (f,) = (tmp_path / "o").glob("*.json")
    assert json.loads(f.read_text())["device"]["chip"] == "h100-pcie"
    one_line_error(run("mamf-finder", str(GPU0), str(FP8), "-o", str(tmp_path / "p"), "--chip",
                       f"{FP8.name}:{H100}=h100-pcie"), "map to chips h100-sxm, h100-pcie", f"--chip '{H100}=ID'")


def test_two_runs_of_one_dtype_on_one_gpu_are_refused_with_the_fix(tmp_path) -> None:
    twin = tmp_path / "twin"
    twin.mkdir()
    (twin / "rerun.txt").write_bytes(GPU0.read_bytes())  # the same log again: one GPU, bf16 twice
    line = one_line_error(run("mamf-finder", str(GPU0), str(twin / "rerun.txt"), "-o", str(tmp_path / "o")),
                          "both hold bf16 of one GPU", UUID0, f"--label 'rerun.txt:{H100}=NAME'")
    assert not (tmp_path / "o").exists() and line
    res = run("mamf-finder", str(GPU0), str(twin / "rerun.txt"), "-o", str(tmp_path / "o"),
              "--label", f"rerun.txt:{H100}=gpu0-rerun")
    assert res.exit_code == 0 and (tmp_path / "o" / "gpu0-rerun.json").exists(), res.output


# --- architectures -----------------------------------------------------------------------------------------


def test_gfx1151_log_keeps_its_architecture(tmp_path) -> None:
    res = import_sources("mamf-finder", [STRIX])
    (label, sw), = res.sweeps.items()
    # ROCm without amdgpu.ids names it only "AMD Radeon Graphics"; the label and device keep gfx1151
    assert label == "AMD-Radeon-Graphics-gfx1151"
    assert sw.device["name"] == "AMD Radeon Graphics" and sw.device["arch"] == "gfx1151"
    assert sw.device["chip"] is None and sw.peak.chip is None  # no peak is cited for gfx1151
    fields = sw.device["fingerprint_fields"]
    assert fields["arch"] == "gfx1151" and fields["compute_capability"] == "11.5" and fields["sm_count"] == 20
    assert "uuid" not in fields  # 58580000-0000-...: ROCm's "GPU-XX" placeholder, not an identity
    assert any("names no single GPU" in n for n in sw.extra["import"]["notes"])
    assert any("gfx1151 kept" in w for w in res.warnings)
    # the one per-shape line the terminal kept: "2916 |   25.6(mean)   25.6(median) ... @ 13312x15360x6144"
    (r,) = sw.records
    assert r.tflops == pytest.approx(25.6) and (r.shape.m, r.shape.n, r.shape.k) == (13312, 15360, 6144)


def test_generic_name_with_a_cited_architecture_maps_to_its_chip(tmp_path) -> None:
    # EDITED: the Strix Halo log with gcnArchName gfx942 and major/minor 9/4 (a generic-named MI300X)
    f = edited(tmp_path, STRIX, "major=11, minor=5, gcnArchName='gfx1151'",
               "major=9, minor=4, gcnArchName='gfx942:sramecc+:xnack-'", "gfx942_edited.txt")
    res = import_sources("mamf-finder", [f])
    (label, sw), = res.sweeps.items()
    assert label == "AMD-Radeon-Graphics-gfx942" and sw.device["arch"] == "gfx942"
    assert sw.device["chip"] == "mi300x" and sw.records[0].mfu is not None
    assert any("chosen by its architecture gfx942: mi300x (also mi325x)" in w for w in res.warnings)


def test_a_named_gpu_without_a_peak_keeps_its_arch_and_no_chip() -> None:
    # PR #60's GH200: sm_90 like an H100, but the name says which GPU and no entry covers it
    res = import_sources("mamf-finder", [PR60])
    (label, sw), = res.sweeps.items()
    assert label == "NVIDIA-GH200-480GB" and sw.device["arch"] == "sm_90" and sw.device["chip"] is None
    assert any("sm_90 kept" in w for w in res.warnings)


def test_nvbench_device_info_gives_arch_and_sm_count(tmp_path) -> None:
    f = tmp_path / "as_f32.md"  # SYNTHETIC: the real excerpt with its integer type U32 renamed F32
    f.write_text(NVB_MD.read_text().replace("U32", "F32"))
    axes = {"M": "Num Rows 1", "K": "Num Cols 1 / Rows 2", "N": "Num Cols 2"}
    (sw,) = import_sources("nvbench", [f], axes=axes).sweeps.values()
    # "* SM Version: 860 (PTX Version: 520)", "* Number of SMs: 28"
    assert sw.device["arch"] == "sm_86"
    assert sw.device["fingerprint_fields"]["sm_count"] == 28


def test_nvbench_two_devices_of_one_name_stay_two(tmp_path) -> None:
    # SYNTHETIC: the real nvbench JSON excerpt's device listed twice (ids 0 and 1), one GEMM state each
    root = json.loads((DATA / "nvbench_test_ref_excerpt.json").read_text())
    dev = root["devices"][0]
    root["devices"] = [dev, {**dev, "id": 1}]
    bench = root["benchmarks"][0]
    state = bench["states"][0]
    state["axis_values"] = [{"name": n, "type": "int64", "value": "256"} for n in ("M", "N", "K")] + [
        {"name": "T", "type": "type", "value": "F32"}]
    state["summaries"] = [{"tag": "nv/cold/time/gpu/mean", "data": [{"name": "value", "type": "float64",
                                                                       "value": "2e-05"}]}]
    state.pop("is_skipped", None)
    bench["states"] = [{**state, "device": 0}, {**state, "device": 1}]
    f = tmp_path / "two.json"
    f.write_text(json.dumps(root))
    res = import_sources("nvbench", [f])
    assert sorted(res.sweeps) == ["Quadro-GV100-0", "Quadro-GV100-1"]
    assert {sw.device["source_key"] for sw in res.sweeps.values()} == {"Quadro GV100 [0]", "Quadro GV100 [1]"}
    assert all(sw.device["name"] == "Quadro GV100" and sw.device["arch"] == "sm_70" for sw in res.sweeps.values())


# --- contradicting identity fields ---------------------------------------------------------------------------


def test_one_uuid_with_two_names_is_refused(tmp_path) -> None:
    # EDITED: gpu1's log with gpu0's uuid and another name
    f = edited(tmp_path, GPU1, f"name='{H100}', major=9, minor=0, total_memory=80994MB, "
               f"multi_processor_count=132, uuid={UUID1}",
               f"name='NVIDIA H200', major=9, minor=0, total_memory=80994MB, multi_processor_count=132, "
               f"uuid={UUID0}", "gpu1_uuid_edited.txt")
    out = tmp_path / "o"
    one_line_error(run("mamf-finder", str(GPU0), str(f), "-o", str(out)),
                   f"uuid {UUID0}", f"'{H100}'", "'NVIDIA H200'", GPU0.name, f.name)
    assert not out.exists()


def test_one_log_naming_one_uuid_twice_with_two_names_is_refused(tmp_path) -> None:
    props = next(ln for ln in GPU0.read_text().splitlines() if ln.startswith("_CudaDeviceProperties"))
    # EDITED: gpu0's log with a second properties line, the same uuid under another name
    f = edited(tmp_path, GPU0, props, props + "\n" + props.replace(H100, "NVIDIA A100-SXM4-80GB"), "twice.txt")
    one_line_error(run("mamf-finder", str(f), "-o", str(tmp_path / "o")),
                   f"uuid {UUID0} is name '{H100}' (line 11)", "'NVIDIA A100-SXM4-80GB' (line 12)")


def test_arch_that_is_not_the_printed_version_is_refused(tmp_path) -> None:
    # EDITED: the Strix Halo log claiming gfx942 while it prints major=11, minor=5
    f = edited(tmp_path, STRIX, "gcnArchName='gfx1151'", "gcnArchName='gfx942'", "arch_edited.txt")
    one_line_error(run("mamf-finder", str(f), "-o", str(tmp_path / "o")),
                   "gcnArchName 'gfx942' contradicts major=11, minor=5", "gfx942 is 9.4", f.name)


# --- parsing -------------------------------------------------------------------------------------------------


def test_properties_parsing_and_uuid_rules() -> None:
    # SYNTHETIC line in the form torch 2.11 on ROCm prints (a name with parentheses, PCI fields)
    text = ("- _CudaDeviceProperties(name='AMD Radeon(TM) 8060S Graphics', major=11, minor=5, "
            "gcnArchName='gfx1151', total_memory=64038MB, multi_processor_count=20, "
            "uuid=58580000-0000-0000-0000-000000000000, pci_bus_id=194, pci_device_id=0, pci_domain_id=0, "
            "L2_cache_size=2MB)")
    ((line, props),) = cuda_properties(text)
    assert line == 1 and props["name"] == "AMD Radeon(TM) 8060S Graphics" and props["pci_bus_id"] == "194"
    ident = from_torch_properties(props, "x")
    assert ident.uuid is None and ident.pci_bus_id == "0000:c2:00" and ident.arch == "gfx1151"
    # without a usable uuid the PCI bus id tells two GPUs of one host apart in the default label
    dev = SourceDevice(key=props["name"], name=props["name"], rows=(), provenance={}, identity=ident)
    assert label_suffix(dev, {}) == "-pci-c2"
    assert usable_uuid("GPU-" + UUID0.upper()) == UUID0 and usable_uuid("0" * 8 + "-0000-0000-0000-" + "0" * 12) is None
    assert usable_uuid("not-a-uuid") is None
    assert [gfx_version(a) for a in ("gfx942", "gfx950", "gfx1151", "gfx90a", "sm_90")] == [
        "9.4", "9.5", "11.5", "9.0", None]
