"""PyTorch/XLA lazy tensors: TPU, the XLA-based torch-neuronx (Trainium/Inferentia), or CPU.

Operations on an XLA device only record a graph; ``torch_xla.sync()``
compiles (or finds in the cache) and launches it, ``xm.wait_device_ops()``
waits for it. So one timed *graph* holds ``L`` consecutive calls over the
rotating operand sets (``L`` = the number of sets, at most
:data:`MAX_GRAPH_CALLS`), each product written to its own live output
tensor: every GEMM is a graph output with distinct operands, so the compiler
can neither drop nor merge any of them. Operands are graph parameters, so
every graph has the same structure and compiles once per shape. A block of
``n`` calls runs ``ceil(n / L)`` such graphs and is timed on the host clock
between two waits (timer name ``xla``); the record's ``first_call_s`` is
the first graph (compile plus ``L`` GEMMs).

Compile time and counts come from ``torch_xla.debug.metrics``
(``CompileTime``, ``UncachedCompile``, ``CachedCompile``) for the timed
region only and land in ``compile_s`` and the record's ``xla`` field. On
Neuron, ``NEURON_CC_FLAGS`` gets ``--auto-cast=none`` for fp32 (the compiler
used to cast fp32 matmuls to bf16 silently) and the compiler version is
recorded; elsewhere fp32 runs at matmul precision ``highest``.
"""

from __future__ import annotations

import glob
import importlib.util
import math
import os
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

import torch

from mfu_sweep.gemm.dtypes import DType
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.base import DeviceInfo, GemmFn, Inputs, Telemetry, TorchBackend, Unsupported
from mfu_sweep.measure.backends.neuron import (
    CC_FLAGS_ENV,
    device_nodes,
    instance_type,
    neuron_cc_flags,
    package_version,
)
from mfu_sweep.measure.timing import BlockTimer
from mfu_sweep.records.fingerprint import fingerprint_from_fields, host_cpu_fingerprint, xla_fields
from mfu_sweep.specs import ChipSpec, Peak, find_chip
from mfu_sweep.util.errors import BackendError

ACCEL_ROTATION_BYTES = 2**30
# GEMMs per graph: enough to amortise a graph launch, few enough to compile quickly
# (a 64-GEMM bf16 graph takes ~20 s to compile on XLA's CPU backend).
MAX_GRAPH_CALLS = 16
# XLA device kinds of NeuronCores (xm.xla_device_kind) and the spec entries they map to.
NEURON_KINDS = {"NC_v2": "trn1-nc", "NC_v3": "trn2-lnc1", "NC_v3d": "trn2-lnc2"}


# ----- pure decisions --------------------------------------------------------
def pjrt_target(env: Mapping[str, str], neuron_nodes: bool, tpu_nodes: bool) -> str | None:
    """The PJRT device torch_xla will use: ``PJRT_DEVICE`` if set, else what the machine has."""
    if env.get("PJRT_DEVICE"):
        return env["PJRT_DEVICE"].upper()
    if neuron_nodes:
        return "NEURON"
    if tpu_nodes:
        return "TPU"
    return None


def is_neuron_kind(kind: str) -> bool:
    return kind.upper().startswith("NC_")


def spec_id_for_kind(kind: str, chips: Mapping[str, ChipSpec] | None = None) -> str | None:
    """Spec entry for an XLA device kind (``NC_v3d`` -> ``trn2-lnc2``, ``TPU v4`` -> ``tpu-v4``)."""
    if kind in NEURON_KINDS:
        return NEURON_KINDS[kind]
    if kind.lower() == "cpu":
        return "cpu"
    chip = find_chip(kind, chips)
    return chip.id if chip else None


def xla_block_timer(call: Callable[[], object], calls_per_graph: int, step: Callable[[], object],
                    wait: Callable[[], object], clock_ns: Callable[[], int] = time.perf_counter_ns) -> BlockTimer:
    """Host-clock timer over whole graphs of ``calls_per_graph`` lazy calls each.

    The first invocation returns the unscaled time of one graph (it holds the
    compile); later ones run ``ceil(n / L)`` graphs and scale to ``n`` calls.
    """
    state = {"first": True}

    def time_block(n: int) -> float:
        graphs = 1 if state["first"] else math.ceil(n / calls_per_graph)
        wait()
        start = clock_ns()
        for _ in range(graphs):
            for _ in range(calls_per_graph):
                call()
            step()
        wait()
        elapsed = (clock_ns() - start) / 1e9
        if state["first"]:
            state["first"] = False
            return elapsed
        return elapsed * n / (graphs * calls_per_graph)

    return time_block


def _tpu_nodes() -> bool:
    return bool(glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"))


def _metric(met: Any, name: str) -> tuple[int, float]:
    data = met.metric_data(name)
    return (int(data[0]), float(data[1])) if data else (0, 0.0)


def _counter(met: Any, name: str) -> int:
    return int(met.counter_value(name) or 0)


class XlaBackend(TorchBackend):
    """One XLA device (one logical NeuronCore on Neuron, one TPU chip/core, or the host CPU)."""

    name = "xla"
    timer_name = "xla"
    compile_backend = "openxla"

    @staticmethod
    def available() -> bool:
        if importlib.util.find_spec("torch_xla") is None:
            return False
        return pjrt_target(os.environ, bool(device_nodes()), _tpu_nodes()) is not None

    @staticmethod
    def auto_available() -> bool:
        """``--device auto`` never picks XLA on the host CPU; ask for ``--device xla`` explicitly."""
        return XlaBackend.available() and pjrt_target(os.environ, bool(device_nodes()), _tpu_nodes()) != "CPU"

    def __init__(self, index: int = 0) -> None:
        if importlib.util.find_spec("torch_xla") is None:
            raise BackendError("torch_xla is not installed (pip install torch-xla, or torch-neuronx for Trainium)")
        if pjrt_target(os.environ, bool(device_nodes()), _tpu_nodes()) is None:
            raise BackendError("no XLA device found: set PJRT_DEVICE (CPU, TPU, NEURON, CUDA)")
        try:
            import torch_xla
            import torch_xla.core.xla_model as xm
            import torch_xla.debug.metrics as met
            import torch_xla.runtime as xr
        except (ImportError, OSError) as exc:
            raise BackendError(f"torch_xla cannot be imported: {str(exc).splitlines()[0]}") from None
        count = xr.addressable_device_count()
        if index >= count:
            raise BackendError(f"xla:{index} requested but only {count} XLA device(s) are addressable")
        self.index = index
        self.txla, self.xm, self.met = torch_xla, xm, met
        self.device = torch_xla.device(index)
        self.kind = str(xm.xla_device_kind(self.device))
        self.calls_per_graph = 1
        self._before: dict[str, Any] = {}
        self._math: dict[str, Any] = {}

    @property
    def on_neuron(self) -> bool:
        return is_neuron_kind(self.kind)

    @property
    def on_cpu(self) -> bool:
        return self.kind.lower() == "cpu"

    # ----- description -------------------------------------------------
    @cached_property
    def _info(self) -> DeviceInfo:
        from mfu_sweep.specs.cpu import read_cpuinfo

        if self.on_cpu:
            name = f"XLA CPU: {read_cpuinfo()[0]}"
        elif self.on_neuron:
            name = f"AWS NeuronCore {self.kind} (XLA)"
        else:
            name = f"{self.kind} (XLA)"
        spec = spec_id_for_kind(self.kind)
        details = {"device_kind": self.kind, "spec_for_kind": spec, "pjrt_device": os.environ.get("PJRT_DEVICE"),
                   "torch_xla": package_version("torch-xla") or package_version("torch_xla"),
                   "peak_scope": "core (one XLA device = one logical NeuronCore)" if self.on_neuron else None}
        if self.on_neuron:
            details.update({"neuronx_cc": package_version("neuronx-cc"),
                            "torch_neuronx": package_version("torch-neuronx")})
        count = int(self._runtime().addressable_device_count())
        fields = xla_fields(self.kind, os.environ.get("PJRT_DEVICE"), count, runtime=details["torch_xla"])
        if self.on_cpu:  # XLA's CPU client: the host CPU is the device
            fields["cpu"] = host_cpu_fingerprint().id
        elif self.on_neuron:
            fields["instance_type"] = instance_type()
        details.update(fingerprint_from_fields("xla", fields).device_fields())
        return DeviceInfo(backend="xla", name=name, index=self.index, count=count, chip=spec, details=details)

    def _runtime(self) -> Any:
        import torch_xla.runtime as xr

        return xr

    def describe(self) -> DeviceInfo:
        return self._info

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        env.update({"torch_xla": self._info.details["torch_xla"], "PJRT_DEVICE": os.environ.get("PJRT_DEVICE"),
                    "XLA_FLAGS": os.environ.get("XLA_FLAGS"), CC_FLAGS_ENV: os.environ.get(CC_FLAGS_ENV),
                    "neuronx_cc": package_version("neuronx-cc"), "torch_neuronx": package_version("torch-neuronx"),
                    "libtpu": package_version("libtpu")})
        return env

    def chip_spec(self, chips: Mapping[str, ChipSpec], forced: str | None = None) -> ChipSpec | None:
        if forced:
            return super().chip_spec(chips, forced)
        spec = spec_id_for_kind(self.kind, chips)
        return chips.get(spec) if spec else None

    def peak(self, chips: Mapping[str, ChipSpec], forced: str | None = None) -> Peak:
        if self.on_cpu and not forced:
            from mfu_sweep.specs.cpu import estimate_cpu_peak

            # XLA's CPU client runs its own thread pool over every usable core
            return estimate_cpu_peak(threads=len(os.sched_getaffinity(0)))
        return super().peak(chips, forced)

    # ----- execution ---------------------------------------------------
    def sync(self) -> None:
        self.txla.sync()
        self.xm.wait_device_ops()

    def rotation_bytes(self) -> int:
        if self.on_cpu:
            from mfu_sweep.measure.backends.cpu import last_level_cache_bytes

            return 2 * (last_level_cache_bytes() or 32 * 2**20)
        # a long graph per pass amortises the launch; see the module docstring
        return ACCEL_ROTATION_BYTES

    def soak_shape(self) -> tuple[Shape, DType]:
        if self.on_cpu:
            from mfu_sweep.gemm.dtypes import get_dtype

            return Shape(1, 512, 512, 512), get_dtype("fp32")
        return super().soak_shape()

    def check_supported(self, dtype: DType, mode: str) -> None:
        if mode == "compile":
            raise Unsupported("xla measures lazy-tensor graphs, already compiled by XLA; --mode compile is not swept")
        if dtype.scaling != "none":
            raise Unsupported(f"{dtype.name} GEMMs through torch-xla are not a documented path")
        if dtype.name == "tf32" and not self.on_neuron:
            raise Unsupported(f"tf32 is not an XLA matmul precision on {self.kind}")

    def set_math_mode(self, dtype: DType) -> None:
        if self.on_neuron:
            flags = neuron_cc_flags(os.environ.get(CC_FLAGS_ENV, ""), dtype.name)
            os.environ[CC_FLAGS_ENV] = flags
            self._math = {"neuron_cc_flags": flags, "neuronx_cc": package_version("neuronx-cc")}
            return
        precision = "highest" if dtype.name == "fp32" else "default"
        try:
            import torch_xla.backends as xb

            if xb.get_mat_mul_precision() != precision:
                # torch_xla warns on every change; only change it when the dtype needs another one
                xb.set_mat_mul_precision(precision)
            self._math = {"mat_mul_precision": precision}
        except (ImportError, AttributeError):
            self._math = {"mat_mul_precision": "unset (torch_xla.backends.set_mat_mul_precision missing)"}

    def make_inputs(self, shape: Shape, dtype: DType, sets: int, seed: int) -> Inputs:
        """Operands and outputs, materialised on the device so no timed graph carries their creation."""
        inputs = super().make_inputs(shape, dtype, sets, seed)
        self.sync()
        return inputs

    def gemm_fn(self, shape: Shape, dtype: DType, mode: str, inputs: Inputs,
                compile_mode: str | None = None) -> GemmFn:
        """One lazy GEMM per call into ``inputs.out[i]``; a graph holds up to one pass over the sets."""
        if shape.grouped:
            raise Unsupported("grouped GEMMs (torch._grouped_mm) through torch-xla are not a documented path")
        a, b, out = inputs.a, inputs.b, inputs.out
        self.calls_per_graph = min(len(a), MAX_GRAPH_CALLS)

        def fn(i: int) -> torch.Tensor:
            if shape.batch == 1:
                out[i] = torch.mm(a[i][0], b[i][0]).unsqueeze(0)
            else:
                out[i] = torch.bmm(a[i], b[i])
            return out[i]

        return fn

    def block_timer(self, call: Callable[[], object], shape: Shape | None = None, dtype: DType | None = None,
                    mode: str = "eager") -> tuple[BlockTimer, str]:
        calls = self.calls_per_graph if shape is not None else 1
        return xla_block_timer(call, calls, self.txla.sync, self.xm.wait_device_ops), "xla"

    def flush_timer(self, call: Callable[[], object]) -> tuple[BlockTimer, str]:
        raise Unsupported("--cache flush needs each call timed alone; XLA times whole lazy graphs, use --cache rotate")

    def is_oom(self, exc: BaseException) -> bool:
        return super().is_oom(exc) or "resource_exhausted" in str(exc).lower()

    # ----- per-shape observations ------------------------------------------
    def telemetry_start(self) -> None:
        self._before = {"compile": _metric(self.met, "CompileTime"), "execute": _metric(self.met, "ExecuteTime"),
                        "uncached": _counter(self.met, "UncachedCompile"),
                        "cached": _counter(self.met, "CachedCompile")}

    def telemetry_stop(self) -> Telemetry:
        b = self._before
        compiles, compile_ns = (x - y for x, y in zip(_metric(self.met, "CompileTime"), b["compile"], strict=True))
        executes, execute_ns = (x - y for x, y in zip(_metric(self.met, "ExecuteTime"), b["execute"], strict=True))
        xla = {"device_kind": self.kind, "graph_calls": self.calls_per_graph,
               "uncached_compiles": _counter(self.met, "UncachedCompile") - b["uncached"],
               "cached_compiles": _counter(self.met, "CachedCompile") - b["cached"],
               "compiles": compiles, "compile_s": compile_ns / 1e9, "executions": executes,
               "execute_s": execute_ns / 1e9}
        return Telemetry(extra={"xla": xla, **self._math}, compile_s=compile_ns / 1e9)
