"""Which GPU an imported source measured: uuid, architecture, PCI bus id, read from what the source prints.

Readers fill an :class:`Identity` from what their format records: mamf-finder logs
print ``torch.cuda.get_device_properties`` (``_CudaDeviceProperties(name=...,
major=9, minor=0, [gcnArchName='gfx942:sramecc+:xnack-',] multi_processor_count=132,
uuid=..., [pci_bus_id=194, pci_device_id=0, pci_domain_id=0,] ...)``), nvbench
prints each device's SM version and SM count (no uuid, no PCI bus id). This module
parses those fields, refuses a properties line that contradicts itself (a
``gcnArchName`` that is not the printed ``major.minor``) and a log that names two
devices, and holds :data:`ARCH_CHIPS`, the architectures a cited peak covers.
:mod:`mfu_sweep.importers.grouping` decides from identities which sources are
one GPU and what each device's default label is.

A uuid that names no single GPU is not an identity: ROCm reports ``GPU-XX``
(``58580000-0000-...``, the bytes of "XX") for a device without a unique id, and
an all-zero uuid means the same. Without a usable uuid two sources are never
taken for one GPU. No torch here; ground code (nothing of this package imported).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

# Architecture -> chip entries that architecture can be, first the default; only where the peak is the
# same kind of device (gfx90a is left out: the MI250X entry is a two-die module, a torch device one die).
ARCH_CHIPS: dict[str, tuple[str, ...]] = {
    "sm_90": ("h100-sxm", "h200-sxm", "h100-pcie"),
    "sm_100": ("b200", "gb200"),
    "gfx942": ("mi300x", "mi325x"),
    "gfx950": ("mi355x", "mi350x"),
}
# Names that say only the vendor: ROCm without its amdgpu.ids table names every GPU "AMD Radeon Graphics",
# and some stacks print "Device 74a1". Only for these does the architecture choose the chip.
GENERIC_NAME = re.compile(r"^(amd )?radeon(\(tm\))? graphics$|^device [0-9a-f]{4}$|^unknown$|^$")
PLACEHOLDER_UUIDS = frozenset({"0" * 32, "5858" + "0" * 28})
SHORT_UUID = 8  # hex digits of the uuid in a default label
_PROPS = re.compile(r"_CudaDeviceProperties\(")
_PAIR = re.compile(r"\s*(\w+)=('(?:[^'\\]|\\.)*'|[^,)]*)\s*([,)])")
_GFX = re.compile(r"^gfx(\d+)([0-9a-f])([0-9a-f])$")


@dataclass(frozen=True)
class Identity:
    """What a source says about which GPU it measured; None where it does not say.

    ``uuid`` is only a usable one (never a placeholder); ``arch`` is ``sm_90`` or
    ``gfx942`` (target features such as ``:xnack-`` dropped); ``pci_bus_id`` is
    ``domain:bus:device`` in hex; ``host`` the machine's name as the log prints it.
    """

    uuid: str | None = None
    arch: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    pci_bus_id: str | None = None
    host: str | None = None

    def fields(self) -> dict[str, Any]:
        """The fields the source gives, for a fingerprint."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


CONTRADICTING = ("name", "arch", "compute_capability", "sm_count")  # one GPU cannot differ in these


class IdentityError(ValueError):
    """A source's identity fields contradict each other; the message names both values."""


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def cuda_properties(text: str) -> list[tuple[int, dict[str, str]]]:
    """Every ``_CudaDeviceProperties(k=v, ...)`` in ``text``: (line number, fields as printed, unquoted)."""
    out = []
    for hit in _PROPS.finditer(text):
        pos, got = hit.end(), {}
        while (m := _PAIR.match(text, pos)) is not None:
            got[m.group(1)] = _unquote(m.group(2))
            pos = m.end()
            if m.group(3) == ")":
                break
        out.append((text.count("\n", 0, hit.start()) + 1, got))
    return out


def usable_uuid(value: str | None) -> str | None:
    """The uuid in lower case, or None for a missing one or a placeholder that names no single GPU."""
    if not value:
        return None
    text = value.strip().lower().removeprefix("gpu-")
    digits = text.replace("-", "")
    if not re.fullmatch(r"[0-9a-f]{32}", digits) or digits in PLACEHOLDER_UUIDS:
        return None
    return text


def generic_name(name: str) -> bool:
    """True for a name that says only the vendor (``AMD Radeon Graphics``), not which GPU."""
    return GENERIC_NAME.match(name.strip().lower()) is not None


def gfx_version(arch: str) -> str | None:
    """``gfx942`` -> ``9.4``, ``gfx1151`` -> ``11.5``, ``gfx90a`` -> ``9.0``: the major.minor HIP prints for it."""
    m = _GFX.match(arch)
    return f"{int(m.group(1))}.{int(m.group(2), 16)}" if m else None


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def _pci(props: Mapping[str, str]) -> str | None:
    bus = _int(props.get("pci_bus_id"))
    if bus is None:
        return None
    return f"{_int(props.get('pci_domain_id')) or 0:04x}:{bus:02x}:{_int(props.get('pci_device_id')) or 0:02x}"


def from_torch_properties(props: Mapping[str, str], where: str, host: str | None = None) -> Identity:
    """The identity one ``_CudaDeviceProperties`` line gives; a ``gcnArchName`` that is not its major.minor is
    refused (``where`` names the file and line)."""
    major, minor = _int(props.get("major")), _int(props.get("minor"))
    cc = f"{major}.{minor}" if major is not None and minor is not None else None
    gcn = props.get("gcnArchName")
    if gcn:
        arch = gcn.split(":", 1)[0].strip().lower()
        want = gfx_version(arch)
        if cc is not None and want is not None and want != cc:
            raise IdentityError(f"{where}: gcnArchName {gcn!r} contradicts major={major}, minor={minor} "
                              f"({arch} is {want}); the properties line was edited or mixes two devices")
    elif cc is not None and not props.get("name", "").upper().startswith("AMD"):
        arch = f"sm_{major}{minor}"
    else:
        arch = None
    return Identity(uuid=usable_uuid(props.get("uuid")), arch=arch, compute_capability=cc,
                    sm_count=_int(props.get("multi_processor_count")), pci_bus_id=_pci(props), host=host)


def one_device(found: Sequence[tuple[int, dict[str, str]]], name: str) -> tuple[dict[str, str], int] | None:
    """The one device a log's properties lines describe (its fields and line); two different ones are refused."""
    if not found:
        return None
    line, first = found[0]
    for other_line, other in found[1:]:
        same_uuid = first.get("uuid") and first.get("uuid") == other.get("uuid")
        for key in ("name", "uuid"):
            if first.get(key) != other.get(key):
                why = f"uuid {first.get('uuid')} is" if same_uuid else "two devices:"
                raise IdentityError(f"{name!r}: {why} {key} {first.get(key)!r} (line {line}) and "
                                  f"{other.get(key)!r} (line {other_line}); a log of one GPU names one device")
    return first, line
