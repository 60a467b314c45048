"""The wheel and the sdist are whole: built from this tree (the wheel from the unpacked sdist, as pip builds it),
LICENSE in both, the metadata a package index shows, the documentation installed with the wheel, and the wheel
working outside the tree; the sdist holds its tests' data, and some of its tests run from it.

A fresh venv with the dependencies from the registry is `make package-check` (benchmarks/package_check.sh): it
takes minutes, so it stays out of the suite; here the wheel is installed with ``pip --target`` and run by this
venv's Python (its dependencies), from a folder outside the tree.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

import mfu_sweep

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SDIST_MUST_HOLD = ("LICENSE", "PACKAGE.md", "README.md", "pyproject.toml", "setup.py", "tests/conftest.py",
                   "tests/import_cli.py", "tests/synthetic.py", "tests/data/import/README.md",
                   "tests/data/import/tritonbench_gemm_bf16_synthetic_console.txt", "sweeps/published/gfx950.json",
                   "sweeps/amd-epyc-cpu.json", "docs/api.md", "mkdocs.yml", "mfu_sweep/schema/v1.json")


def _pip(*args: str, cwd: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], cwd=cwd,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist of this tree, unpacked, and the wheel pip builds from the unpacked sdist (no network)."""
    tmp = tmp_path_factory.mktemp("packaging")
    code = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", code, str(tmp)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    sdist = tmp / out.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), ".", cwd=unpacked)
    (wheel,) = (tmp / "dist").glob("*.whl")
    return {"sdist": sdist, "unpacked": unpacked, "wheel": wheel, "tmp": tmp}


def test_license_is_the_apache_text_in_the_repo_the_wheel_and_the_sdist(built: dict[str, Path]) -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and PROJECT["license"] == "Apache-2.0"
    with zipfile.ZipFile(built["wheel"]) as whl:
        licenses = [n for n in whl.namelist() if n.endswith("/licenses/LICENSE")]
        assert len(licenses) == 1 and whl.read(licenses[0]).decode() == text
    assert (built["unpacked"] / "LICENSE").read_text() == text


def test_the_sdist_holds_what_its_tests_read(built: dict[str, Path]) -> None:
    missing = [p for p in SDIST_MUST_HOLD if not (built["unpacked"] / p).is_file()]
    assert not missing
    for folder in ("tests/data", "tests/golden", "sweeps/published", "data/published"):
        here = {p.relative_to(ROOT) for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in
                p.parts}
        there = {p.relative_to(built["unpacked"]) for p in (built["unpacked"] / folder).rglob("*") if p.is_file()}
        assert here and here <= there, (folder, sorted(here - there)[:5])


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as whl:
        return whl.read(next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))).decode()


def test_the_metadata_a_package_index_shows(built: dict[str, Path]) -> None:
    meta = _metadata(built["wheel"])
    assert f"Version: {mfu_sweep.__version__}\n" in meta  # one version source: __init__.py's
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    urls = dict(re.findall(r"^Project-URL: ([^,]+), (\S+)$", meta, re.M))
    assert set(urls) >= {"Homepage", "Documentation", "Source", "Issues"}
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text().split("\ntheme:")[0])["site_url"]
    assert urls["Documentation"] == site
    classifiers = re.findall(r"^Classifier: (.+)$", meta, re.M)
    assert "Operating System :: POSIX" in classifiers and not [c for c in classifiers if "Windows" in c or
                                                               "MacOS" in c or "OS Independent" in c]
    assert re.search(r"^Author-email: .+ <.+@.+>$", meta, re.M) and "License-Expression: Apache-2.0" in meta
    assert 'Requires-Dist: pandas>=1.5; extra == "api"' in meta


def test_the_package_description_has_no_link_that_breaks_off_the_repository() -> None:
    text = (ROOT / "PACKAGE.md").read_text()
    assert PROJECT["readme"]["file"] == "PACKAGE.md"
    links = re.findall(r"\]\(([^)]+)\)", text) + re.findall(r"(?:src|href)=\"([^\"]+)\"", text)
    assert all(link.startswith("https://") for link in links), links
    assert "![" not in text  # no image: the figures live in the repository, not in the wheel
    assert "mfu-sweep docs" in text and "from mfu_sweep import api" in text
    from mfu_sweep.cli import main

    shown = {m for m in re.findall(r"^mfu-sweep ([a-z]+)", text, re.M)}
    assert shown and shown <= set(main.commands), shown - set(main.commands)


CHILD = textwrap.dedent("""
    import json, sys
    import mfu_sweep
    from mfu_sweep import api
    frame = api.bands(["sm_100_B200.json", "gfx950.json"], metric="tflops")
    print(json.dumps({"file": mfu_sweep.__file__, "columns": list(frame.columns),
                      "ratio": frame["ratio"].tolist(), "verdict": frame["verdict"].tolist()}))
""")


def test_the_wheel_works_outside_the_tree(built: dict[str, Path]) -> None:
    target, away = built["tmp"] / "site", built["tmp"] / "elsewhere"
    away.mkdir()
    _pip("install", "--no-deps", "--target", str(target), str(built["wheel"]), cwd=away)
    for name in ("sm_100_B200.json", "gfx950.json"):
        (away / name).write_bytes((ROOT / "sweeps" / "published" / name).read_bytes())
    env = {**os.environ, "PYTHONPATH": str(target)}

    def run(*argv: str) -> str:
        out = subprocess.run(argv, cwd=away, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    script = [str(target / "bin" / "mfu-sweep")]
    assert "mfu-sweep docs" in run(*script, "--help")
    assert run(*script, "--version").strip().endswith(mfu_sweep.__version__)
    listing = run(*script, "docs")
    assert str(target / "mfu_sweep" / "_docs") in listing and re.search(r"^  api\s+Python API$", listing, re.M)
    assert run(*script, "docs", "api") == (ROOT / "docs" / "api.md").read_text()
    got = json.loads(run(sys.executable, "-c", CHILD))
    assert got["file"].startswith(str(target))  # the wheel's copy, not this checkout's
    cli = json.loads(run(*script, "compare", "sm_100_B200.json", "gfx950.json", "--metric", "tflops", "--json"))
    bands = [b for c in cli["comparisons"] for b in c["bands"]]
    assert got["columns"][:13] == ["a", "b", "dtype", "mode", "low_flops", "high_flops", "ratio", "ratio_low",
                                   "ratio_high", "verdict", "leader", "matched", "model_based"]
    assert got["ratio"] == [b["ratio"] for b in bands] and got["verdict"] == [b["verdict"] for b in bands]


def test_tests_run_from_the_unpacked_sdist(built: dict[str, Path]) -> None:
    """A few of the sdist's own tests, from the sdist: its data, golden files and sweeps are there."""
    unpacked = built["unpacked"]
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    selection = ["tests/test_api.py::test_bands_are_compares_json_band_for_band_the_measured_goal",
                 "tests/test_tritonbench_console.py", "tests/test_nvbench_round_trip.py::test_every_dtype_keeps_label_"
                 "chip_timer_and_cache", "tests/test_results.py"]
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *selection], cwd=unpacked,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert re.search(r"\d+ passed", out.stdout) and " failed" not in out.stdout
