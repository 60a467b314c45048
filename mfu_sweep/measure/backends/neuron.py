"""AWS Trainium through TorchNeuron, the native PyTorch device ``neuron`` (torch-neuronx >= 2.13).

Written against the TorchNeuron documentation and the torch-neuronx sources
(no Neuron hardware was available while writing it):

- ``torch.neuron`` has ``synchronize()``, ``device_count()`` (logical cores)
  and ``get_device_properties(i)``, whose ``name`` is the runtime's instance
  family (``trn2``, ``trn2n``, ``trn3`` ...); ``get_device_name(i)`` returns
  only ``"neuron:i"``, so it cannot identify the chip.
- ``torch.neuron.Event`` stamps ``record()`` with the *host* clock, so an
  event pair measures submission, not execution. Timing therefore reads the
  host clock after ``synchronize()`` (timer ``host-sync``), over blocks of
  back-to-back calls, which is exact once the block is long.
- Eager mode compiles one NEFF per op shape on first use with
  ``--auto-cast=none`` plus ``NEURON_CC_FLAGS`` (read at every compile), so
  the first call carries the compile. The compile cache's counters
  (``_get_compilation_cache_stats``) only count while torch-neuronx metrics
  are enabled, which this backend turns on.
- ``torch.compile(backend="neuron")`` supports mode ``default`` only.

One ``neuron`` device is one *logical* NeuronCore, so the peak is per
logical core: the chip figure divided by the logical cores per chip (8
physical cores, paired when ``NEURON_LOGICAL_NC_CONFIG=2``, the Trn2 and
Trn3 default). The scope is recorded in the result's peak block.

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

from mfu_sweep.gemm.dtypes import DType
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.base import DeviceInfo, GemmFn, Inputs, Telemetry, TorchBackend, Unsupported
from mfu_sweep.records.fingerprint import fingerprint_from_fields, neuron_fields
from mfu_sweep.specs import ChipSpec, Peak, get_chip, load_chips
from mfu_sweep.util.errors import BackendError

LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
CC_FLAGS_ENV = "NEURON_CC_FLAGS"
PHYSICAL_CORES = {"trn1": 2, "inf2": 2, "trn2": 8, "trn3": 8}
DEFAULT_LNC = {"trn1": 1, "inf2": 1, "trn2": 2, "trn3": 2}
PRODUCT_FILE = "/sys/devices/virtual/dmi/id/product_name"
NEURON_SCALED = ("row- and block-scaled formats need a torch scaled matmul, which TorchNeuron does not document; "
                 "Trainium3 (NeuronCore-v4) runs MXFP8/MXFP4 only through NKI kernels (nki.isa.nc_matmul_mx), "
                 "and Trainium2 has no MX formats")


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


def enable_metrics() -> bool:
    """Turn on torch-neuronx's metrics (off by default), without which the cache counters stay at 0."""
    try:
        import torch_neuronx
    except (ImportError, OSError, RuntimeError):
        return False
    for owner, fn in ((getattr(torch_neuronx, "metrics", None), "set_enabled"),
                      (getattr(torch_neuronx, "_C", None), "_neuron_set_metrics_enabled")):
        setter = getattr(owner, fn, None)
        if setter is not None:
            try:
                setter(True)
                return True
            except (RuntimeError, TypeError):
                continue
    return False


# Cumulative counters of the NEFF cache (a shape's share is their increase), and all the keys we read.
COUNTERS = ("persistent_hits", "persistent_misses", "in_memory_hits", "in_memory_misses", "total_compilations",
            "total_compilation_time_ms")
CACHE_STAT_KEYS = (*COUNTERS, "total_entries")


def stats_dict(stats: Any) -> dict[str, float]:
    """The cache statistics as a dict of numbers, whether torch_neuronx returns a mapping or an object."""
    if isinstance(stats, Mapping):
        return {k: v for k, v in stats.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {k: getattr(stats, k) for k in CACHE_STAT_KEYS if isinstance(getattr(stats, k, None), (int, float))}


def cache_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, Any]:
    """What one shape did to the NEFF cache: counter increases, plus the entry count after it.

    ``compile_s`` is the compile time the cache recorded for NEFFs built
    during the shape (``total_compilation_time_ms``), None when not reported.
    """
    out: dict[str, Any] = {k: after[k] - before.get(k, 0) for k in COUNTERS if k in after}
    ms = out.pop("total_compilation_time_ms", None)
    out["compile_s"] = ms / 1e3 if ms is not None else None
    out["total_entries"] = after.get("total_entries")
    return out


def platform_target() -> str | None:
    """torch-neuronx's compiler target (``trn1``/``trn2``/``trn3``), when it exposes it."""
    try:
        from torch_neuronx import utils
    except (ImportError, OSError, RuntimeError):
        return None
    fn = getattr(utils, "get_platform_target", None)
    try:
        return str(fn()) if fn else None
    except (RuntimeError, ValueError, OSError):
        return None


class NeuronBackend(TorchBackend):
    """One logical NeuronCore through TorchNeuron."""

    name = "neuron"
    compile_backend = "neuron"
    # torch.neuron.Event stamps record() on the host: an event pair would time submission, not the device.
    # block_timer and flush_timer are therefore the base class's host clock after synchronize().
    timer_name = "host-sync"

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
        self._stats_before: Mapping[str, float] | None = None
        self._cc_flags: str | None = None
        self._metrics_on = False

    # ----- description -------------------------------------------------
    @cached_property
    def properties(self) -> Any | None:
        get = getattr(self.mod, "get_device_properties", None)
        try:
            return get(self.index) if get else None
        except (RuntimeError, TypeError, ValueError):
            return None

    @cached_property
    def family(self) -> str | None:
        """trn2/trn3/... from the runtime's instance family, the compiler target, or the instance type."""
        return chip_family(getattr(self.properties, "name", None), platform_target(), instance_type())

    @cached_property
    def lnc(self) -> tuple[int, str]:
        return logical_core_config(self.family, os.environ)

    def describe(self) -> DeviceInfo:
        lnc, lnc_source = self.lnc
        peak = neuron_peak(self.family, lnc, load_chips())
        name = f"AWS {self.family or 'Neuron'} logical NeuronCore (LNC={lnc})"
        fp = fingerprint_from_fields("neuron", neuron_fields(
            instance_type(), self.family, self.count, lnc, runtime=package_version("torch-neuronx")))
        return DeviceInfo(
            backend="neuron", name=name, index=self.index, count=self.count, chip=peak.chip if peak else None,
            details={"instance_type": instance_type(), "family": self.family, "lnc": lnc, "lnc_source": lnc_source,
                     "peak_scope": "core (one logical NeuronCore)", "device_files": len(device_nodes()),
                     "torch_neuronx": package_version("torch-neuronx"), "neuronx_cc": package_version("neuronx-cc"),
                     "runtime_family": getattr(self.properties, "name", None), "platform_target": platform_target(),
                     "memory_bytes": self.memory_bytes(), "timer": "host-sync", **fp.device_fields()},
        )

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        names = (LNC_ENV, CC_FLAGS_ENV, "NEURON_LAUNCH_BLOCKING", "NEURON_COMPILER_OPT_LEVEL",
                 "TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_NEFF_DISABLE_CACHE",
                 "TORCH_NEURONX_DISABLE_NEFF_CACHE", "TORCH_NEURONX_METRICS_ENABLED")
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

    def memory_bytes(self) -> int | None:
        total = getattr(self.properties, "total_memory", None)
        return int(total) if total else None

    def check_supported(self, dtype: DType, mode: str) -> None:
        """Every plain dtype is attempted: tf32 is a compiler auto-cast (see :func:`neuron_cc_flags`); fp8 is
        undocumented for TorchNeuron, so a failure becomes the record's ``unsupported``/``error`` status.
        The row- and block-scaled formats are refused: Trainium3 runs MXFP8/MXFP4 through NKI kernels
        (``nki.isa.nc_matmul_mx``, the NKI Library's ``matmul_mxfp8``), not through a torch scaled matmul."""
        if dtype.quantized:
            raise Unsupported(NEURON_SCALED)

    def set_math_mode(self, dtype: DType) -> None:
        # Eager NEFFs compile with "--auto-cast=none" followed by NEURON_CC_FLAGS (torch-neuronx sources);
        # for tf32 ours come later on the command line: that the last --auto-cast wins is unverified.
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
        if stats is not None and not self._metrics_on:
            self._metrics_on = enable_metrics()
        self._stats_before = stats_dict(stats()) if stats else None

    def telemetry_stop(self) -> Telemetry:
        extra: dict[str, Any] = {"neuron_cc_flags": self._cc_flags}
        stats = _cache_stats()
        if stats is None or self._stats_before is None:
            return Telemetry(extra=extra)
        delta = cache_delta(self._stats_before, stats_dict(stats()))
        compile_s = delta.pop("compile_s")
        extra["neff_cache"] = {**delta, "metrics_enabled": self._metrics_on}
        return Telemetry(extra=extra, compile_s=compile_s or None)
