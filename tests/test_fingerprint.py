"""Device fingerprints: stable, short, built from the fields that decide a GEMM's reach."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cpuinfo_texts import ZEN3, ZEN4, ZEN5

from mfu_sweep.records.fingerprint import (
    FingerprintError,
    cpu_fields,
    cpu_fingerprint,
    describe,
    fingerprint_from_fields,
    gpu_fields,
    meminfo_gib,
    neuron_fields,
    xla_fields,
)
from mfu_sweep.records.results import ResultError, parse_document
from mfu_sweep.specs.cpu import parse_cpuinfo

# the id format the docs promise: kind, words, then 12 hex digits of the hash
FINGERPRINT_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*-[0-9a-f]{12}$")


def test_cpu_fingerprint_is_stable_and_short() -> None:
    a = cpu_fingerprint(parse_cpuinfo(ZEN4), threads=2, cpus=[0, 1], memory_gib=8)
    b = cpu_fingerprint(parse_cpuinfo(ZEN4), threads=2, cpus=[0, 1], memory_gib=8)
    assert a == b and FINGERPRINT_RE.match(a.id) and a.id.startswith("cpu-") and len(a.id) == 16
    f = a.fields
    assert (f["vendor"], f["family"], f["model"], f["uarch"]) == ("AuthenticAMD", 25, 17, "zen4")
    assert "avx512_bf16" in f["isa"] and "ht" not in f["isa"]
    assert (f["physical_cores"], f["threads"], f["cores_used"], f["memory_gib"]) == (2, 2, 2, 8)


@pytest.mark.parametrize("change", [
    {"text": ZEN3}, {"text": ZEN5}, {"threads": 1}, {"memory_gib": 16},
])
def test_cpu_fingerprint_changes_with_the_machine(change: dict) -> None:
    base = {"text": ZEN4, "threads": 2, "memory_gib": 8}
    args = {**base, **change}
    fp = cpu_fingerprint(parse_cpuinfo(args["text"]), threads=args["threads"], cpus=[0, 1],
                         memory_gib=args["memory_gib"])
    ref = cpu_fingerprint(parse_cpuinfo(ZEN4), threads=2, cpus=[0, 1], memory_gib=8)
    assert fp.id != ref.id


def test_gpu_uuid_and_driver_are_recorded_not_hashed() -> None:
    kw = {"sm_count": 132, "memory_bytes": 80 * 2**30, "max_sm_clock_mhz": 1980, "compute_capability": "9.0"}
    a = fingerprint_from_fields("cuda", gpu_fields("NVIDIA H100 80GB HBM3", uuid="GPU-1", driver="550.1", **kw))
    b = fingerprint_from_fields("cuda", gpu_fields("NVIDIA H100 80GB HBM3", uuid="GPU-2", driver="560.3", **kw))
    c = fingerprint_from_fields("cuda", gpu_fields("NVIDIA H100 80GB HBM3", **{**kw, "sm_count": 114}))
    assert a.id == b.id != c.id
    assert a.fields["uuid"] == "GPU-1" and a.fields["memory_gib"] == 80


def test_neuron_and_xla_fields() -> None:
    lnc1 = fingerprint_from_fields("neuron", neuron_fields("trn2.48xlarge", "trn2", 128, 1))
    lnc2 = fingerprint_from_fields("neuron", neuron_fields("trn2.48xlarge", "trn2", 64, 2))
    assert lnc1.id != lnc2.id
    x = fingerprint_from_fields("xla", xla_fields("TPU v5 lite", "tpu", 8))
    assert x.id.startswith("xla-") and x.fields["device_kind"] == "TPU v5 lite"


def test_imported_fingerprint_for_importers() -> None:
    fp = fingerprint_from_fields("imported", {"name": "NVIDIA H100 SXM5", "source": "https://example.org/t"})
    dev = fp.device_fields()
    assert dev["fingerprint"].startswith("imported-")
    assert dev["fingerprint_fields"] == {"kind": "imported", "name": "NVIDIA H100 SXM5",
                                         "source": "https://example.org/t"}
    assert "NVIDIA H100 SXM5" in describe(dev)


@pytest.mark.parametrize("cores,words", [(1, "1 core)"), (2, "2 cores)")])
def test_describe_counts_cores_in_words(cores: int, words: str) -> None:
    fp = fingerprint_from_fields("cpu", {"model_name": "AMD EPYC", "cores_used": cores})
    assert describe(fp.device_fields()).endswith(words)


@pytest.mark.parametrize("kind,fields,fragment", [
    ("CPU!", {}, "kind='CPU!'"),
    ("cpu", {"clock": float("nan")}, "clock=nan"),
    ("cpu", {"obj": object()}, "obj="),
])
def test_bad_fields_name_the_field(kind: str, fields: dict, fragment: str) -> None:
    with pytest.raises(FingerprintError, match=re.escape(fragment)):
        fingerprint_from_fields(kind, fields)


def test_meminfo_rounds_to_gib() -> None:
    assert meminfo_gib("MemTotal:        8131212 kB\nMemFree: 1 kB\n") == 8
    assert meminfo_gib("nothing here") is None


def test_cpu_fields_unknown_part_has_no_uarch() -> None:
    info = parse_cpuinfo("vendor_id\t: Other\nmodel name\t: X\nflags\t\t: avx2 fma\n")
    assert cpu_fields(info, threads=1, cpus=[0])["uarch"] is None


GOLDEN = Path(__file__).parent / "golden" / "v1_sweep.json"


def test_schema_accepts_fingerprint_and_old_files(tmp_path) -> None:
    data = json.loads(GOLDEN.read_text())
    assert "fingerprint" not in data["device"]
    parse_document(data, "golden")  # written before fingerprints: loads as before
    fp = cpu_fingerprint(parse_cpuinfo(ZEN4), threads=2, cpus=[0, 1], memory_gib=8)
    data["device"].update(fp.device_fields())
    (sweep,) = parse_document(data, "with fingerprint")
    assert sweep.device["fingerprint"] == fp.id and sweep.device["fingerprint_fields"]["uarch"] == "zen4"
    assert data["schema_version"] == 1


@pytest.mark.parametrize("bad", ["cpu", "CPU-0123456789ab", "cpu-123", 7])
def test_schema_refuses_malformed_fingerprint(bad) -> None:
    data = json.loads(GOLDEN.read_text())
    data["device"]["fingerprint"] = bad
    with pytest.raises(ResultError, match="device/fingerprint"):
        parse_document(data, "bad")


def test_recorded_fields_reproduce_the_id() -> None:
    fp = cpu_fingerprint(parse_cpuinfo(ZEN5), threads=1, cpus=[0, 1], memory_gib=24)
    recorded = json.loads(json.dumps(fp.device_fields()))  # as read back from a result file
    again = fingerprint_from_fields(recorded["fingerprint_fields"]["kind"], recorded["fingerprint_fields"])
    assert again.id == recorded["fingerprint"] == fp.id
