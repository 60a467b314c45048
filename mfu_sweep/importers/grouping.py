"""Which source devices of one import become one output device, and the default label of each.

Sources of one GPU (the same usable uuid, see :mod:`mfu_sweep.importers.identity`)
that hold different dtypes become one device: a bf16 log and an fp8 log of one
GPU import into one file with two dtypes. Sources that give one uuid two names
(or architectures, compute capabilities, SM counts) are refused. GPUs of one
model get distinct default labels: the source's name, then the architecture
where the name says only the vendor, then a short uuid (else the PCI bus id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mfu_sweep.importers.common import SourceDevice, SourceError
from mfu_sweep.importers.identity import CONTRADICTING, SHORT_UUID, generic_name


def check_sources(devices: Iterable[SourceDevice]) -> None:
    """Refuse two sources that give one uuid different names, architectures, compute capabilities or SM counts."""
    seen: dict[str, SourceDevice] = {}
    for dev in devices:
        uuid = dev.identity.uuid
        if uuid is None:
            continue
        first = seen.setdefault(uuid, dev)
        for key in CONTRADICTING:
            a, b = _field(first, key), _field(dev, key)
            if a is not None and b is not None and a != b:
                raise SourceError(f"uuid {uuid} is {key} {a!r} in {first.source} and {b!r} in {dev.source}; "
                                  "one uuid is one GPU, so one of the sources is wrong")


def _field(dev: SourceDevice, key: str) -> Any:
    return dev.name if key == "name" else getattr(dev.identity, key)


def short_uuids(uuids: Iterable[str]) -> dict[str, str]:
    """Each uuid's label suffix: its first :data:`SHORT_UUID` hex digits, more where two would share them."""
    digits = {u: u.replace("-", "") for u in set(uuids)}
    out = {}
    for u, d in digits.items():
        n = SHORT_UUID
        while n < len(d) and any(o != d and o[:n] == d[:n] for o in digits.values()):
            n += 1
        out[u] = d[:n]
    return out


def label_suffix(dev: SourceDevice, short: Mapping[str, str]) -> str:
    """What follows the source's name in a default label: the architecture where the name says only the
    vendor (``AMD Radeon Graphics``), then the short uuid, else ``pci-<bus id>``."""
    ident = dev.identity
    parts = [ident.arch] if ident.arch and generic_name(dev.name) else []
    if ident.uuid is not None:
        parts.append(short[ident.uuid])
    elif ident.pci_bus_id is not None:
        parts.append("pci-" + ident.pci_bus_id.removeprefix("0000:").removesuffix(":00").replace(":", "-"))
    return "".join(f"-{p}" for p in parts)


def one_gpu(parts: Sequence[SourceDevice]) -> bool:
    """True when every source device in ``parts`` is the same GPU by a usable uuid."""
    uuids = {p.identity.uuid for p in parts}
    return len(parts) > 1 and len(uuids) == 1 and None not in uuids


def check_merge(parts: Sequence[SourceDevice], hint: str) -> None:
    """Two files of one GPU merge when they hold different dtypes; two runs of one dtype are refused."""
    seen: dict[str, SourceDevice] = {}
    for p in parts:
        for dtype in dict.fromkeys(r.dtype for r in p.rows):
            if dtype in seen and seen[dtype] is not p:
                raise SourceError(f"{seen[dtype].source} and {p.source} both hold {dtype} of one GPU (uuid "
                                  f"{p.identity.uuid}, {p.name!r}): files of one GPU merge into one device only "
                                  f"when their dtypes differ; import the runs separately or name them per file: "
                                  f"{hint}")
            seen[dtype] = p
