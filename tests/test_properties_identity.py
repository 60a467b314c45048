"""Properties of the importers' identity code a user relies on: which sources are one GPU, and their labels.

Every test writes SYNTHETIC mamf-finder logs (the real format, made-up uuids, bus ids and values) for
many seeded identities and imports them through :func:`mfu_sweep.importers.import_sources`, the path
``mfu-sweep import`` takes: sources of one GPU become one device whatever the spelling of its uuid;
GPUs that differ in uuid or PCI bus id never become one; a uuid that names no single GPU identifies
nothing; a log or a pair of logs that contradicts itself is refused with both values named.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mfu_sweep.importers import SourceError, import_sources
from mfu_sweep.importers.identity import IdentityError, cuda_properties, from_torch_properties, usable_uuid

H100 = "NVIDIA H100 80GB HBM3"
TORCH = {"bf16": "torch.bfloat16", "fp8": "torch.float8_e4m3fn"}


def _uuid(rng: np.random.Generator, prefix: str = "") -> str:
    """A random uuid that starts with the hex digits ``prefix``."""
    digits = (prefix + rng.bytes(16).hex())[:32]
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _props(name: str = H100, uuid: str | None = None, bus: int | None = None, major: int = 9, minor: int = 0,
           sms: int = 132, device: int = 0, domain: int = 0) -> str:
    fields = [f"name='{name}'", f"major={major}", f"minor={minor}", "total_memory=80994MB",
              f"multi_processor_count={sms}"]
    if uuid is not None:
        fields.append(f"uuid={uuid}")
    if bus is not None:
        fields += [f"pci_bus_id={bus}", f"pci_device_id={device}", f"pci_domain_id={domain}"]
    return f"_CudaDeviceProperties({', '.join(fields)}, L2_cache_size=50MB)"


def _log(path: Path, dtype: str = "bf16", props: tuple[str, ...] = (), tflops: float = 700.0) -> Path:
    """A SYNTHETIC mamf-finder log (benchmark version 2 layout) of two shapes."""
    lines = ["Benchmark started on 2025-01-05 06:20:47", "", f"** Dtype: {TORCH[dtype]}", "",
             "** Platform/Device info:", "Linux synthetic-host 5.15.0 x86_64", *props, "",
             "** Critical software versions:", "torch=2.5.1+cu121", "cuda=12.1", "",
             "** Additional notes:", "benchmark version: 2", "", "-" * 80, ""]
    for i, size in enumerate((1024, 2048), 1):
        v = tflops * size / 2048
        lines.append(f"{i:6d} | {v:6.1f}(mean) {v:6.1f}(median) {v:6.1f}(max) @ {size}x{size}x{size} | best: -")
    lines += ["", "Tried  2 shapes => the best outcomes were:", f"median: {tflops:.1f} TFLOPS @ 2048x2048x2048 (MxNxK)",
              ""]
    path.write_text("\n".join(lines))
    return path


def _dtypes(result) -> dict[str, set[str]]:  # noqa: ANN001 - ImportResult
    return {label: {r.dtype for r in sw.records} for label, sw in result.sweeps.items()}


def _spellings(uuid: str) -> list[str]:
    """Ways the uuid of one GPU is printed: torch's lower case, upper case, nvidia-smi's GPU- prefix."""
    return [uuid, uuid.upper(), f"GPU-{uuid}", f"GPU-{uuid.upper()}", f"gpu-{uuid}"]


@pytest.mark.parametrize("seed", range(4))
def test_one_gpu_is_one_device_whatever_the_spelling_of_its_uuid(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    uuid = _uuid(rng)
    names = _spellings(uuid)
    a, b = rng.choice(len(names), 2, replace=True)
    bf16 = _log(tmp_path / "bf16.txt", "bf16", (_props(uuid=names[a]),))
    fp8 = _log(tmp_path / "fp8.txt", "fp8", (_props(uuid=names[b]),))
    got = _dtypes(import_sources("mamf-finder", [bf16, fp8]))
    assert list(got.values()) == [{"bf16", "fp8"}], (names[a], names[b], got)
    assert usable_uuid(names[a]) == usable_uuid(names[b]) == uuid


@pytest.mark.parametrize("shared", [0, 4, 8, 11, 16, 24])
def test_gpus_that_differ_in_uuid_are_never_merged_and_get_distinct_labels(tmp_path: Path, shared: int) -> None:
    """Two GPUs of one model whose uuids share their first ``shared`` hex digits: always two devices,
    both dtypes of each kept apart, with no --label needed; the labels stay short where they can."""
    rng = np.random.default_rng(shared)
    first = _uuid(rng)
    second = _uuid(rng, first.replace("-", "")[:shared])
    assert first != second
    paths = [_log(tmp_path / f"gpu{i}_{d}.txt", d, (_props(uuid=u),))
             for i, u in enumerate((first, second)) for d in ("bf16", "fp8")]
    got = _dtypes(import_sources("mamf-finder", paths))
    assert sorted(map(sorted, got.values())) == [["bf16", "fp8"], ["bf16", "fp8"]]
    suffixes = sorted(label.rsplit("-", 1)[1] for label in got)
    a, b = first.replace("-", ""), second.replace("-", "")
    common = next(i for i in range(32) if a[i] != b[i])
    want = max(8, common + 1)  # the shortest prefix of 8 or more digits that tells the two apart
    assert sorted(len(s) for s in suffixes) == [want, want], got
    assert all(s in (first + second).replace("-", "") for s in suffixes)


GPU_XX, ZEROS = "58580000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize("placeholder", [GPU_XX, f"GPU-{GPU_XX}", ZEROS, f"GPU-{ZEROS}"])
def test_a_placeholder_uuid_never_makes_two_sources_one_gpu(tmp_path: Path, placeholder: str) -> None:
    """ROCm's GPU-XX and an all-zero uuid name no single GPU: two logs that print one are two devices
    (told apart by their PCI bus ids), or, with nothing that tells them apart, refused, never merged."""
    assert usable_uuid(placeholder) is None
    bf16 = _log(tmp_path / "a.txt", "bf16", (_props(uuid=placeholder, bus=0x43),))
    fp8 = _log(tmp_path / "b.txt", "fp8", (_props(uuid=placeholder, bus=0xc2),))
    got = _dtypes(import_sources("mamf-finder", [bf16, fp8]))
    assert sorted(map(sorted, got.values())) == [["bf16"], ["fp8"]]
    bare_a = _log(tmp_path / "c.txt", "bf16", (_props(uuid=placeholder),))
    bare_b = _log(tmp_path / "d.txt", "fp8", (_props(uuid=placeholder),))
    with pytest.raises(SourceError, match="get label"):
        import_sources("mamf-finder", [bare_a, bare_b])


def test_sources_without_a_uuid_are_never_merged(tmp_path: Path) -> None:
    """Without a uuid, two logs of one model name are not known to be one GPU, even when their dtypes differ."""
    bf16 = _log(tmp_path / "a.txt", "bf16", (_props(),))
    fp8 = _log(tmp_path / "b.txt", "fp8", (_props(),))
    with pytest.raises(SourceError, match="get label"):
        import_sources("mamf-finder", [bf16, fp8])


@pytest.mark.parametrize("seed", range(3))
def test_gpus_that_differ_in_pci_bus_id_are_two_devices(tmp_path: Path, seed: int) -> None:
    """Without a uuid the PCI bus id tells GPUs apart: its label and identity are the printed bus, in hex."""
    rng = np.random.default_rng(seed)
    buses = rng.choice(np.arange(16, 256), 2, replace=False)
    device, domain = int(rng.integers(0, 32)), int(rng.integers(0, 4))
    paths = [_log(tmp_path / f"gpu{i}.txt", "bf16", (_props(bus=int(b), device=device, domain=domain),))
             for i, b in enumerate(buses)]
    got = import_sources("mamf-finder", paths).sweeps
    assert len(got) == 2
    for b in buses:
        props = cuda_properties(_props(bus=int(b), device=device, domain=domain))[0][1]
        pci = from_torch_properties(props, "synthetic").pci_bus_id
        dom, bus, dev = (int(x, 16) for x in pci.split(":"))
        assert (dom, bus, dev) == (domain, b, device)
        assert any(label.endswith(f"{b:02x}") or f"-{b:02x}-" in label for label in got), (b, list(got))


def test_a_log_that_names_two_gpus_is_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    first, second = _uuid(rng), _uuid(rng)
    two = _log(tmp_path / "two.txt", "bf16", (_props(uuid=first), _props(uuid=second)))
    with pytest.raises(SourceError, match=f"(?s){first}.*{second}"):
        import_sources("mamf-finder", [two])
    again = _log(tmp_path / "again.txt", "bf16", (_props(uuid=first), _props(uuid=first)))
    assert len(import_sources("mamf-finder", [again]).sweeps) == 1


@pytest.mark.parametrize(("field", "other"), [("name", {"name": "NVIDIA H200"}), ("sm_count", {"sms": 114}),
                                              ("arch", {"minor": 9})])
def test_one_uuid_that_two_sources_describe_differently_is_refused(tmp_path: Path, field: str, other: dict) -> None:
    uuid = _uuid(np.random.default_rng(9))
    a = _log(tmp_path / "a.txt", "bf16", (_props(uuid=uuid),))
    b = _log(tmp_path / "b.txt", "fp8", (_props(uuid=uuid, **other),))
    with pytest.raises(SourceError, match=f"uuid {uuid} is {field}"):
        import_sources("mamf-finder", [a, b])


@pytest.mark.parametrize(("major", "minor"), [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)])
def test_an_nvidia_architecture_is_its_printed_compute_capability(major: int, minor: int) -> None:
    props = cuda_properties(_props(name="NVIDIA Synthetic GPU", major=major, minor=minor))[0][1]
    ident = from_torch_properties(props, "synthetic")
    assert (ident.arch, ident.compute_capability) == (f"sm_{major}{minor}", f"{major}.{minor}")


@pytest.mark.parametrize(("gcn", "major", "minor", "ok"), [
    ("gfx942:sramecc+:xnack-", 9, 4, True), ("gfx90a", 9, 0, True), ("gfx1151", 11, 5, True), ("gfx942", 9, 0, False),
    ("gfx950", 9, 4, False)])
def test_an_amd_architecture_must_match_its_printed_version(gcn: str, major: int, minor: int, ok: bool) -> None:
    line = _props(name="AMD Radeon Graphics", major=major, minor=minor).replace(
        ", total_memory", f", gcnArchName='{gcn}', total_memory")
    props = cuda_properties(line)[0][1]
    if ok:
        assert from_torch_properties(props, "synthetic").arch == gcn.split(":")[0]
    else:
        with pytest.raises(IdentityError, match=f"{gcn}.*major={major}, minor={minor}"):
            from_torch_properties(props, "synthetic")
