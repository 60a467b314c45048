"""AWS Trainium through TorchNeuron, the native PyTorch device ``neuron`` (torch-neuronx >= 2.13).

Written against the documented TorchNeuron API (no Neuron hardware was
available while writing it): the package registers ``torch.neuron`` with
``synchronize()`` and ``Event(enable_timing=True)``; eager mode compiles one
NEFF per op shape on first use (so the first call carries the compile and a
persistent-cache miss); ``torch.compile(backend="neuron")`` supports mode
``default`` only. One ``neuron`` device is one *logical* NeuronCore, so the
peak is per logical core: the chip figure divided by the logical cores per
chip (8 physical cores, paired when ``NEURON_LOGICAL_NC_CONFIG=2``, the Trn2
and Trn3 default). The scope is recorded in the result's peak block.

The XLA-based torch-neuronx (PyTorch <= 2.9) is served by ``backends.xla``.
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from mfu_sweep.backends.base import DeviceInfo, GemmFn, Inputs, Telemetry, TorchBackend, Unsupported
from mfu_sweep.backends.generic import event_block_timer, events_work
from mfu_sweep.dtypes import DType
from mfu_sweep.errors import BackendError
from mfu_sweep.shapes import Shape
from mfu_sweep.specs import ChipSpec, Peak, get_chip, load_chips
from mfu_sweep.timing import BlockTimer, host_block_timer

LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
CC_FLAGS_ENV = "NEURON_CC_FLAGS"
PHYSICAL_CORES = {"trn1": 2, "inf2": 2, "trn2": 8, "trn3": 8}
DEFAULT_LNC = {"trn1": 1, "inf2": 1, "trn2": 2, "trn3": 2}
PRODUCT_FILE = "/sys/devices/virtual/dmi/id/product_name"


# ----- pure decisions (unit-tested without hardware) -------------------------
def neuron_cc_flags(existing: str, dtype: str) -> str:
    """``NEURON_CC_FLAGS`` with the auto-cast options for ``dtype``, replacing any given ones.

    neuronx-cc cast fp32 matmuls to bf16 by default until compiler
    2.22.12471.0, so fp32 always gets ``--auto-cast=none``; tf32 is
    ``--auto-cast=matmult --auto-cast-type=tf32``.
    """
    tokens = shlex.split(existing)
    kept: list[str] = []
    skip = False
    for tok in tokens:
        if skip:
            skip = False
            continue
        if tok in ("--auto-cast", "--auto-cast-type"):
            skip = True
            continue
        if tok.startswith(("--auto-cast=", "--auto-cast-type=")):
            continue
        kept.append(tok)
    if dtype == "tf32":
        kept += ["--auto-cast=matmult", "--auto-cast-type=tf32"]
    else:
        kept.append("--auto-cast=none")
    return " ".join(kept)


def chip_family(*texts: str | None) -> str | None:
    """``trn1``/``inf2``/``trn2``/``trn3`` from an instance type or device name, else None."""
    for text in texts:
        low = (text or "").lower()
        for fam, keys in (("trn3", ("trn3", "trainium3")), ("trn2", ("trn2", "trainium2")),
                          ("trn1", ("trn1", "trainium1")), ("inf2", ("inf2", "inferentia2"))):
            if any(k in low for k in keys):
                return fam
    return None


def logical_core_config(family: str | None, env: Mapping[str, str]) -> tuple[int, str]:
    """Physical cores per logical core and where that came from (``env`` or ``default``)."""
    raw = env.get(LNC_ENV)
    if raw is not None:
        if raw.strip() not in ("1", "2"):
            raise BackendError(f"{LNC_ENV}={raw!r} must be 1 or 2")
        return int(raw), "env"
    return DEFAULT_LNC.get(family or "", 1), "default"


def core_peak(chip: ChipSpec, logical_cores: int, lnc: int) -> Peak:
    """A chip-scope spec divided among its logical cores (derived, scope ``core``)."""
    tflops = {k: v / logical_cores for k, v in chip.peak_tflops.items()}
    bw = chip.memory_bandwidth_tbs / logical_cores if chip.memory_bandwidth_tbs else None
    return Peak(chip=f"{chip.id}-lnc{lnc}", tflops=tflops, memory_bandwidth_tbs=bw,
                source=f"{chip.source_title} <{chip.source_url}>: "
                       f"chip figures / {logical_cores} logical cores (derived)",
                scope="core", notes=f"Derived at run time from chip entry {chip.id!r}. {chip.notes}".strip())


def neuron_peak(family: str | None, lnc: int, chips: Mapping[str, ChipSpec]) -> Peak | None:
    """Per-device (logical core) peak for a Neuron chip family, or None when unknown."""
    if family is None:
        return None
    direct = {("trn2", 2): "trn2-lnc2", ("trn2", 1): "trn2-lnc1", ("trn1", 1): "trn1-nc", ("inf2", 1): "trn1-nc"}
    if (family, lnc) in direct and direct[(family, lnc)] in chips:
        return Peak.from_chip(chips[direct[(family, lnc)]])
    if family not in chips:
        return None
    return core_peak(chips[family], PHYSICAL_CORES[family] // lnc, lnc)


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# ----- runtime probes ---------------------------------------------------------
def native_module() -> Any | None:
    """``torch.neuron`` as registered by TorchNeuron, importing torch_neuronx if needed."""
    mod = getattr(torch, "neuron", None)
    if mod is not None:
        return mod
    if importlib.util.find_spec("torch_neuronx") is None:
        return None
    try:
        importlib.import_module("torch_neuronx")
    except (ImportError, OSError, RuntimeError):
        return None
    return getattr(torch, "neuron", None)


def device_nodes() -> list[str]:
    """Neuron device files; present only where the Neuron driver sees a chip."""
    return sorted(glob.glob("/dev/neuron[0-9]*"))


def instance_type() -> str | None:
    try:
        return Path(PRODUCT_FILE).read_text().strip() or None
    except OSError:
        return None


def _cache_stats() -> Callable[[], Mapping[str, int]] | None:
    try:
        import torch_neuronx
    except (ImportError, OSError, RuntimeError):
        return None
    return getattr(getattr(torch_neuronx, "_C", None), "_get_compilation_cache_stats", None)


CACHE_STAT_KEYS = ("persistent_hits", "persistent_misses", "total_entries")


def stats_dict(stats: Any) -> dict[str, int]:
    """The cache statistics as a dict, whether torch_neuronx returns a mapping or an object."""
    if isinstance(stats, Mapping):
        return {k: int(v) for k, v in stats.items() if isinstance(v, (int, float))}
    return {k: int(getattr(stats, k)) for k in CACHE_STAT_KEYS if hasattr(stats, k)}


class NeuronBackend(TorchBackend):
    """One logical NeuronCore through TorchNeuron."""

    name = "neuron"
    timer_name = "neuron-events"
    compile_backend = "neuron"

    @staticmethod
    def available() -> bool:
        return bool(device_nodes()) and native_module() is not None

    def __init__(self, index: int = 0) -> None:
        self.mod = native_module()
        if self.mod is None:
            raise BackendError("TorchNeuron is not installed: torch has no 'neuron' device module "
                               "(pip install torch-neuronx>=2.13; the XLA-based torch-neuronx is --device xla)")
        count_fn = getattr(self.mod, "device_count", None)
        count = count_fn() if count_fn else len(device_nodes())
        if index >= count:
            raise BackendError(f"neuron:{index} requested but only {count} Neuron device(s) are visible")
        super().__init__(index)
        self.count = count
        self._stats_before: Mapping[str, int] | None = None
        self._cc_flags: str | None = None

    # ----- description -------------------------------------------------
    @cached_property
    def family(self) -> str | None:
        get_name = getattr(self.mod, "get_device_name", None)
        name = None
        if get_name is not None:
            try:
                name = get_name(self.index)
            except (RuntimeError, TypeError):
                name = None
        return chip_family(name, instance_type())

    @cached_property
    def lnc(self) -> tuple[int, str]:
        return logical_core_config(self.family, os.environ)

    def describe(self) -> DeviceInfo:
        lnc, lnc_source = self.lnc
        peak = neuron_peak(self.family, lnc, load_chips())
        name = f"AWS {self.family or 'Neuron'} logical NeuronCore (LNC={lnc})"
        return DeviceInfo(
            backend="neuron", name=name, index=self.index, count=self.count, chip=peak.chip if peak else None,
            details={"instance_type": instance_type(), "family": self.family, "lnc": lnc, "lnc_source": lnc_source,
                     "peak_scope": "core (one logical NeuronCore)", "device_files": len(device_nodes()),
                     "torch_neuronx": package_version("torch-neuronx"), "neuronx_cc": package_version("neuronx-cc"),
                     "timer": self.timer_kind},
        )

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        names = (LNC_ENV, CC_FLAGS_ENV, "NEURON_LAUNCH_BLOCKING", "TORCH_NEURONX_NEFF_CACHE_DIR",
                 "TORCH_NEURONX_NEFF_DISABLE_CACHE")
        env.update({"torch_neuronx": package_version("torch-neuronx"), "neuronx_cc": package_version("neuronx-cc"),
                    **{k: os.environ.get(k) for k in names}})
        return env

    def peak(self, chips: Mapping[str, ChipSpec], forced: str | None = None) -> Peak:
        if forced:
            return Peak.from_chip(get_chip(forced, chips))
        lnc, _ = self.lnc
        found = neuron_peak(self.family, lnc, chips)
        if found is None:
            return Peak(chip=None, tflops={}, memory_bandwidth_tbs=None, scope="core",
                        source=f"Neuron chip family unknown (instance {instance_type()!r}); "
                               "use --chip or --peak-tflops")
        return replace(found, scope="core")

    # ----- execution ---------------------------------------------------
    def sync(self) -> None:
        sync = getattr(self.mod, "synchronize", None)
        if sync is not None:
            sync()
        else:
            torch.accelerator.synchronize(self.device)

    def _event(self) -> Any:
        event_cls = getattr(self.mod, "Event", None)
        if event_cls is not None:
            return event_cls(enable_timing=True)
        return torch.Event(device=self.device, enable_timing=True)

    @cached_property
    def timer_kind(self) -> str:
        return "neuron-events" if events_work(self.device, self._event, self.sync) else "host-sync"

    def block_timer(self, call: Callable[[], object], shape: Shape | None = None, dtype: DType | None = None,
                    mode: str = "eager") -> tuple[BlockTimer, str]:
        if self.timer_kind == "neuron-events":
            return event_block_timer(call, self._event, self.sync), "neuron-events"
        return host_block_timer(call, sync=self.sync), "host-sync"

    def set_math_mode(self, dtype: DType) -> None:
        # Whether TorchNeuron's per-op NEFFs honour NEURON_CC_FLAGS is undocumented; set it anyway and record it.
        self._cc_flags = neuron_cc_flags(os.environ.get(CC_FLAGS_ENV, ""), dtype.name)
        os.environ[CC_FLAGS_ENV] = self._cc_flags

    def gemm_fn(self, shape: Shape, dtype: DType, mode: str, inputs: Inputs,
                compile_mode: str | None = None) -> GemmFn:
        if mode == "compile" and compile_mode not in (None, "default"):
            raise Unsupported(f"torch.compile(backend='neuron') supports mode 'default' only, not {compile_mode!r}")
        return super().gemm_fn(shape, dtype, mode, inputs, compile_mode)

    # ----- per-shape observations ------------------------------------------
    def telemetry_start(self) -> None:
        stats = _cache_stats()
        self._stats_before = stats_dict(stats()) if stats else None

    def telemetry_stop(self) -> Telemetry:
        extra: dict[str, Any] = {"neuron_cc_flags": self._cc_flags}
        stats = _cache_stats()
        if stats is not None and self._stats_before is not None:
            after = stats_dict(stats())
            extra["neff_cache"] = {
                "hits": after.get("persistent_hits", 0) - self._stats_before.get("persistent_hits", 0),
                "misses": after.get("persistent_misses", 0) - self._stats_before.get("persistent_misses", 0),
                "total_entries": after.get("total_entries"),
            }
        return Telemetry(extra=extra)
