"""The folder tree is the architecture: this test reads the import graph and enforces its map (docs/layout.md).

The ground, bottom to top: ``util/`` (plumbing) -> ``gemm/`` (what a GEMM is) -> ``specs/`` (peak specs) ->
``records/`` (the result and step files). The stages above it: ``measure/`` and ``importers/`` (both make
results) -> ``analysis/`` -> ``present/`` -> ``cli/``; ``workflow/`` (loops that alternate measuring and
analysing, e.g. the refinement loop) sits above ``analysis/``, takes the measuring as a callable, and only
``cli/`` imports it; ``api.py`` (the Python API) sits beside ``cli/``: it imports ``analysis/`` and
``present/`` but no device code, figures or Click. Every import statement counts, also the ones inside
functions (a lazy import is still a dependency). ``ALLOWED`` is the map: which package may import which.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mfu_sweep"
MAX_LINES = 500
GROUND = ("util", "gemm", "specs", "records")
STAGES = ("measure", "importers", "analysis", "present", "workflow", "cli")
# package -> the packages of mfu_sweep it may import (itself and the root's __version__ always)
ALLOWED: dict[str, frozenset[str]] = {
    "util": frozenset(),
    "gemm": frozenset({"util"}),
    "specs": frozenset({"util", "gemm"}),
    "records": frozenset({"util", "gemm", "specs"}),
    "measure": frozenset(GROUND),
    "importers": frozenset(GROUND),
    "analysis": frozenset(GROUND),
    "present": frozenset({*GROUND, "analysis"}),
    # the loops take the measuring as a callable: no device code, no figures, no Click
    "workflow": frozenset({*GROUND, "analysis"}),
    "cli": frozenset({*GROUND, *STAGES}),
    # the Python API (mfu_sweep/api.py): the analysis and its tables as DataFrames, no device, no Click
    "api": frozenset({*GROUND, "analysis", "present"}),
    "root": frozenset(),
}
# third-party imports each package may not make
NO_TORCH_NO_FIGURES = ("torch", "matplotlib", "seaborn", "click")
FORBIDDEN_LIBRARIES = {
    **{ground: NO_TORCH_NO_FIGURES for ground in GROUND},
    "root": NO_TORCH_NO_FIGURES,
    "measure": ("matplotlib", "seaborn", "click"),
    "importers": NO_TORCH_NO_FIGURES,
    "analysis": NO_TORCH_NO_FIGURES,
    "present": ("torch", "click"),
    "workflow": NO_TORCH_NO_FIGURES,
    "cli": ("torch",),
    "api": NO_TORCH_NO_FIGURES,
}
# The measured goal of issue 50: the root shows its packages, and no room holds more than it can name.
MAX_DIRECT = {"": 3, "present": 6, "measure": 12}  # .py files directly inside
MAX_ANALYSIS_ENTRIES = 8  # modules and packages directly inside analysis/


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of(module: str) -> str:
    """The package of ``module`` in the map: ``util``, ..., ``cli``, ``api`` or ``root`` (``mfu_sweep`` itself)."""
    parts = module.split(".")
    if module in ("mfu_sweep.cli", "mfu_sweep.__main__"):  # the group and `python -m mfu_sweep`
        return "cli"
    if module == "mfu_sweep.api":  # on top of analysis/ and present/, beside cli/
        return "api"
    if len(parts) == 1:
        return "root"
    return parts[1] if parts[1] in ALLOWED else "unknown"


def known_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(target: str, names: list[str], modules: dict[str, Path]) -> list[str]:
    """``from X import a, b`` names module X.a where X.a is a module, else X itself."""
    if not names:
        return [target]
    hits = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
    return hits + ([target] if len(hits) < len(names) else [])


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.update(resolve(node.module, [a.name for a in node.names], modules))
    return out


def graph() -> dict[str, set[str]]:
    modules = known_modules()
    return {name: imports_of(path, modules) for name, path in modules.items()}


def internal(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: {t for t in ts if t in edges and t != m} for m, ts in edges.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle in the module graph (as a list of modules), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(edges.items()):
        stage = stage_of(module)
        for target in sorted(targets):
            if target == "mfu_sweep" or target.startswith("mfu_sweep."):
                other = stage_of(target)
                if other not in (stage, "root") and other not in ALLOWED[stage]:
                    bad.append(f"{module} ({stage}) imports {target} ({other})")
            elif any(target == f or target.startswith(f + ".") for f in FORBIDDEN_LIBRARIES[stage]):
                bad.append(f"{module} ({stage}) imports {target}")
    return bad


def test_no_import_cycles() -> None:
    assert find_cycle(internal(graph())) is None


def test_no_forbidden_edges() -> None:
    assert violations(graph()) == []


def test_modules_stay_small() -> None:
    long = {name: n for name, p in known_modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_only_cli_imports_click_and_nothing_imports_cli() -> None:
    for module, targets in graph().items():
        if stage_of(module) != "cli":
            assert not any(t == "click" or t.startswith("mfu_sweep.cli") for t in targets), module


@pytest.mark.parametrize("edges, cycle", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, False),
])
def test_cycle_finder_finds_cycles(edges: dict[str, set[str]], cycle: bool) -> None:
    assert (find_cycle(edges) is not None) is cycle


def test_rules_catch_a_forbidden_edge() -> None:
    edges = {"mfu_sweep.analysis.fits.fit": {"torch", "mfu_sweep.records.results"},
             "mfu_sweep.measure.sweep": {"matplotlib"},
             "mfu_sweep.records.results": {"mfu_sweep.analysis.fits.fit"}}
    assert violations(edges) == [
        "mfu_sweep.analysis.fits.fit (analysis) imports torch",
        "mfu_sweep.measure.sweep (measure) imports matplotlib",
        "mfu_sweep.records.results (records) imports mfu_sweep.analysis.fits.fit (analysis)",
    ]


def test_rules_keep_the_workflow_stage_above_analysis_and_apart_from_measure() -> None:
    edges = {"mfu_sweep.workflow.loop": {"mfu_sweep.measure.sweep", "mfu_sweep.analysis.refine.plan", "click"},
             "mfu_sweep.measure.sweep": {"mfu_sweep.workflow.loop"}}
    assert violations(edges) == [
        "mfu_sweep.measure.sweep (measure) imports mfu_sweep.workflow.loop (workflow)",
        "mfu_sweep.workflow.loop (workflow) imports click",
        "mfu_sweep.workflow.loop (workflow) imports mfu_sweep.measure.sweep (measure)",
    ]


def test_rules_keep_the_ground_in_its_order() -> None:
    """util/ imports nothing of the package, gemm/ only util/, records/ sits on top of the ground."""
    edges = {"mfu_sweep.util.outputs": {"mfu_sweep.records.manifest"},
             "mfu_sweep.gemm.shapes": {"mfu_sweep.specs", "mfu_sweep.util.text", "mfu_sweep"},
             "mfu_sweep.records.results": {"mfu_sweep.gemm.shapes", "mfu_sweep.specs", "mfu_sweep.measure.task"}}
    assert violations(edges) == [
        "mfu_sweep.gemm.shapes (gemm) imports mfu_sweep.specs (specs)",
        "mfu_sweep.records.results (records) imports mfu_sweep.measure.task (measure)",
        "mfu_sweep.util.outputs (util) imports mfu_sweep.records.manifest (records)",
    ]


def test_every_folder_of_the_package_is_in_the_map() -> None:
    """A new top-level package is placed in ALLOWED (and docs/layout.md) before anything imports it."""
    assert sorted(m for m in known_modules() if stage_of(m) == "unknown") == []


def direct_py(folder: Path) -> int:
    return len(list(folder.glob("*.py")))


def test_the_measured_goal_of_the_rooms() -> None:
    """Root: __init__, __main__ and api; present/ and measure/ hold packages by output and by concern."""
    counts = {name: direct_py(PACKAGE / name) for name in MAX_DIRECT}
    assert {n: c for n, c in counts.items() if c > MAX_DIRECT[n]} == {}
    entries = [p for p in (PACKAGE / "analysis").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()]
    assert len(entries) <= MAX_ANALYSIS_ENTRIES, sorted(p.name for p in entries)


def test_every_package_says_what_it_decides_and_may_import() -> None:
    """Each package's ``__init__`` docstring names what it may import (the map, in words)."""
    silent = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if init.parent != PACKAGE and "may import" not in doc.lower():
            silent.append(str(init.relative_to(PACKAGE)))
    assert silent == []


def test_every_package_folder_is_a_regular_package_that_setuptools_ships() -> None:
    """A folder without ``__init__.py`` imports from a checkout (namespace package) but is left out of a wheel."""
    from setuptools import find_packages

    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(f.relative_to(PACKAGE.parent)) for f in folders if not (f / "__init__.py").exists())
    assert missing == []
    shipped = set(find_packages(str(PACKAGE.parent), include=["mfu_sweep*"]))
    assert {module_name(f / "__init__.py") for f in folders} <= shipped


# Inside analysis/, parts in order of the question they answer; a part imports only parts of a lower rank
# (docs/layout.md). steps (a step's GEMM sum and time to N steps) sits beside fleet, above fits.
ANALYSIS_RANK = {"ground": 0, "sources": 0, "fits": 1, "verdicts": 2,
                 "fleet": 3, "steps": 3, "refine": 4}


def analysis_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["mfu_sweep", "analysis"] else None


def analysis_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(edges.items()):
        if (part := analysis_part(module)) is None:
            continue
        for target in sorted(targets):
            other = analysis_part(target)
            if other is None or other == part:
                continue
            if ANALYSIS_RANK[other] >= ANALYSIS_RANK[part] and ANALYSIS_RANK[part] > 0 or (
                    ANALYSIS_RANK[part] == 0 and ANALYSIS_RANK[other] > 0):
                bad.append(f"{module} ({part}) imports {target} ({other})")
    return bad


def test_analysis_is_split_by_question_in_a_fixed_order() -> None:
    modules = known_modules()
    parts = {analysis_part(m) for m in modules} - {None, "__init__"}
    assert parts <= set(ANALYSIS_RANK), parts - set(ANALYSIS_RANK)
    assert analysis_violations(internal(graph())) == []


def test_analysis_rules_catch_an_arrow_back_up() -> None:
    edges = {"mfu_sweep.analysis.fits.fit": {"mfu_sweep.analysis.verdicts.comparison",
                                             "mfu_sweep.analysis.ground.series"},
             "mfu_sweep.analysis.ground.series": {"mfu_sweep.analysis.fits.fit"},
             "mfu_sweep.analysis.verdicts.pair": {"mfu_sweep.analysis.fits.fit", "mfu_sweep.analysis.steps.gemm_sum"},
             "mfu_sweep.analysis.refine.plan": {"mfu_sweep.analysis.fleet.leaderboard"}}
    assert analysis_violations(edges) == [
        "mfu_sweep.analysis.fits.fit (fits) imports mfu_sweep.analysis.verdicts.comparison (verdicts)",
        "mfu_sweep.analysis.ground.series (ground) imports mfu_sweep.analysis.fits.fit (fits)",
        "mfu_sweep.analysis.verdicts.pair (verdicts) imports mfu_sweep.analysis.steps.gemm_sum (steps)",
    ]


def test_pyproject_reads_without_setuptools_warnings() -> None:
    """``make sweep`` printed four setuptools deprecation boxes (``project.license`` as a TOML table)."""
    import warnings

    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_configuration(Distribution(), PACKAGE.parent / "pyproject.toml")
    assert [f"{w.category.__name__}: {str(w.message).splitlines()[0]}" for w in caught] == []


# Inside present/, rooms in order of what they output; a room imports only the shared modules directly inside
# present/ (rank 0) and rooms of a lower rank: export's tables, then the figures, then the report on top.
PRESENT_RANK = {"shared": 0, "export": 1, "figures": 2, "report": 3}


def present_room(module: str) -> str | None:
    """``export``, ``figures`` or ``report`` for a module of that room, ``shared`` for one directly inside
    present/ (and present/ itself), None outside present/."""
    parts = module.split(".")
    if parts[:2] != ["mfu_sweep", "present"]:
        return None
    return parts[2] if len(parts) > 3 else "shared"


def present_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(edges.items()):
        if (room := present_room(module)) is None:
            continue
        for target in sorted(targets):
            other = present_room(target)
            if other is not None and other != room and PRESENT_RANK[other] >= PRESENT_RANK[room]:
                bad.append(f"{module} ({room}) imports {target} ({other})")
    return bad


def test_present_rooms_are_ranked() -> None:
    rooms = {present_room(m) for m in known_modules()} - {None}
    assert rooms == set(PRESENT_RANK), rooms ^ set(PRESENT_RANK)
    assert present_violations(internal(graph())) == []


def test_present_rules_catch_an_arrow_back_up() -> None:
    edges = {"mfu_sweep.present.export.tables": {"mfu_sweep.present.report.render", "mfu_sweep.present.words"},
             "mfu_sweep.present.figures.steps": {"mfu_sweep.present.report.steps", "mfu_sweep.present.export.steps"},
             "mfu_sweep.present.select": {"mfu_sweep.present.figures.theme"},
             "mfu_sweep.present.export.steps": {"mfu_sweep.present.figures.steps"},
             "mfu_sweep.present.report.write": {"mfu_sweep.present.figures.arrange", "mfu_sweep.present.export.tables",
                                                "mfu_sweep.present.group_metric"}}
    assert present_violations(edges) == [
        "mfu_sweep.present.export.steps (export) imports mfu_sweep.present.figures.steps (figures)",
        "mfu_sweep.present.export.tables (export) imports mfu_sweep.present.report.render (report)",
        "mfu_sweep.present.figures.steps (figures) imports mfu_sweep.present.report.steps (report)",
        "mfu_sweep.present.select (shared) imports mfu_sweep.present.figures.theme (figures)",
    ]
