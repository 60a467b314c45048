"""The modules that moved out of the package root (issue 50) still import under their old names, for one
release, with a DeprecationWarning that names the new path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mfu_sweep

ROOT = Path(__file__).resolve().parents[1]


def run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-c", code], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


def test_an_old_path_gives_the_moved_module_with_a_warning() -> None:
    done = run("from mfu_sweep.results import load_sweeps\n"
               "from mfu_sweep import shapes\n"
               "import mfu_sweep.records.results as r, mfu_sweep.gemm.shapes as s\n"
               "assert load_sweeps is r.load_sweeps and shapes is s\n")
    assert done.returncode == 0, done.stderr
    assert "mfu_sweep.results moved to mfu_sweep.records.results" in done.stderr
    assert "mfu_sweep.shapes moved to mfu_sweep.gemm.shapes" in done.stderr


@pytest.mark.parametrize("old, new", sorted(mfu_sweep.MOVED.items()))
def test_every_alias_points_at_a_module_and_shadows_no_file(old: str, new: str) -> None:
    package = Path(mfu_sweep.__file__).parent
    assert (package / (new.replace(".", "/") + ".py")).is_file()
    assert not (package / (old.replace(".", "/") + ".py")).exists()


def test_an_unknown_name_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("mfu_sweep.no_such_module")


def test_a_top_level_module_of_an_old_name_is_never_answered() -> None:
    """``import filelock`` (torch's inductor imports it) must find the filelock package, never ours."""
    finder = next(f for f in sys.meta_path if getattr(f, "__name__", "") == "MovedModules")
    assert finder.find_spec("filelock") is None and finder.find_spec("results") is None
    assert finder.find_spec("mfu_sweep.results") is not None
