"""No dead code: every function, class, method, constant and attribute of the package is used by the package.

vulture (at 60% confidence, which includes unused functions and classes) reads ``mfu_sweep/`` alone, so
code that only the tests call counts as dead: a test that guards code no user path runs gives false
confidence. ``ALLOWED`` lists what vulture cannot see being used, each with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

vulture = pytest.importorskip("vulture", reason="vulture is in the test extras (pip install -e .[test])")

PACKAGE = Path(__file__).resolve().parents[1] / "mfu_sweep"
MIN_CONFIDENCE = 60
# (file relative to mfu_sweep/, name): why it is used although no code names it
ALLOWED: dict[tuple[str, str], str] = {
    ("analysis/fits/fit.py", "writeable"): "numpy flag set to freeze an array (arr.flags.writeable = False)",
    ("measure/backends/base.py", "allow_tf32"): "torch.backends flag that torch reads",
    ("measure/backends/cpu.py", "CpuBackend"): "looked up by device name in backends/__init__.py",
    ("measure/backends/cuda.py", "CudaBackend"): "looked up by device name in backends/__init__.py",
    ("measure/backends/generic.py", "AcceleratorBackend"): "looked up by device name in backends/__init__.py",
    ("measure/backends/neuron.py", "NeuronBackend"): "looked up by device name in backends/__init__.py",
    ("analysis/verdicts/comparison.py", "verdict_method"): "field written to --json through dataclasses.asdict",
    ("analysis/verdicts/comparison.py", "trend_ratio"): "field written to --json through dataclasses.asdict",
    ("specs/__init__.py", "vendor_url"): "field read from chips.toml; the specs table's citation",
    ("workflow/loop.py", "shape_files"): "field of the loop's result: the shape file of every round",
    ("__init__.py", "create_module"): "the import system calls it on the finder of the moved modules' old names",
    ("gemm/models.py", "source_read"): "field read from models.toml: the citation's date",
    ("gemm/models.py", "corroborated_by"): "field read from models.toml: the second source",
    ("gemm/llm_options.py", "kv_heads"): "size option read by name (getattr over models.SIZE_OPTIONS)",
    ("records/step_files.py", "warmup_steps"): "field of a step run, written to the file through dataclasses.fields",
}


def findings() -> list[tuple[str, str, int, str]]:
    v = vulture.Vulture(verbose=False)
    v.scavenge([str(PACKAGE)])
    out = []
    for item in v.get_unused_code(min_confidence=MIN_CONFIDENCE):
        rel = Path(item.filename).resolve().relative_to(PACKAGE).as_posix()
        out.append((rel, item.name, item.first_lineno, item.typ))
    return out


def test_the_package_has_no_dead_code() -> None:
    dead = [f"{rel}:{line}: unused {typ} {name!r}" for rel, name, line, typ in findings() if (rel, name) not in ALLOWED]
    assert dead == [], "\n".join(dead)


def test_every_allowed_name_is_still_there_and_still_flagged() -> None:
    """An allow-list entry whose name is gone, or is now used, is removed rather than kept 'just in case'."""
    flagged = {(rel, name) for rel, name, _, _ in findings()}
    assert sorted(set(ALLOWED) - flagged) == []


def test_the_check_finds_a_function_nobody_calls(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def used():\n    return 1\n\n\ndef orphan():\n    return 2\n\n\nused()\n")
    v = vulture.Vulture(verbose=False)
    v.scavenge([str(tmp_path)])
    assert [i.name for i in v.get_unused_code(min_confidence=MIN_CONFIDENCE)] == ["orphan"]
