"""The folder tree is the architecture: this test reads the import graph and enforces its rules.

Stages, bottom to top: the ground (top-level modules and ``specs/``) -> ``measure/`` and
``importers/`` (both make results) -> ``analysis/`` -> ``present/`` -> ``cli/``; ``workflow/``
(loops that alternate measuring and analysing, e.g. the refinement loop) sits above ``measure/``
and ``analysis/``, beside ``present/``, and only ``cli/`` imports it; ``api.py`` (the Python API) sits beside
``cli/``: it imports ``analysis/`` and ``present/`` but no device code, figures or Click. Every import
statement counts, also the ones inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mfu_sweep"
MAX_LINES = 500
STAGES = ("measure", "importers", "analysis", "present", "workflow", "cli")
# (importing stage, forbidden target prefixes): the rules of docs/layout.md.
FORBIDDEN = {
    "ground": ("mfu_sweep.measure", "mfu_sweep.analysis", "mfu_sweep.present", "mfu_sweep.cli", "mfu_sweep.workflow",
               "torch", "matplotlib", "seaborn", "click"),
    "measure": ("mfu_sweep.analysis", "mfu_sweep.present", "mfu_sweep.cli", "mfu_sweep.workflow", "matplotlib",
                "seaborn", "click"),
    "importers": ("mfu_sweep.measure", "mfu_sweep.analysis", "mfu_sweep.present", "mfu_sweep.cli",
                  "mfu_sweep.workflow", "torch", "matplotlib", "seaborn", "click"),
    "analysis": ("mfu_sweep.measure", "mfu_sweep.present", "mfu_sweep.cli", "mfu_sweep.workflow", "torch",
                 "matplotlib", "seaborn", "click"),
    "present": ("mfu_sweep.measure", "mfu_sweep.cli", "mfu_sweep.workflow", "torch", "click"),
    # the loops take the measuring as a callable: no device code, no figures, no Click
    "workflow": ("mfu_sweep.present", "mfu_sweep.cli", "torch", "matplotlib", "seaborn", "click"),
    "cli": ("torch",),
    # the Python API (mfu_sweep/api.py): the analysis and its tables as DataFrames, no device, no Click, no figures
    "api": ("mfu_sweep.measure", "mfu_sweep.cli", "mfu_sweep.workflow", "torch", "matplotlib", "seaborn", "click"),
}
# Ground modules that drive a device need torch; everything else in the ground stays torch-free.
GROUND_TORCH_OK: frozenset[str] = frozenset()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of(module: str) -> str:
    parts = module.split(".")
    if module in ("mfu_sweep.cli", "mfu_sweep.__main__"):  # the group and `python -m mfu_sweep`
        return "cli"
    if module == "mfu_sweep.api":  # on top of analysis/ and present/, beside cli/
        return "api"
    return parts[1] if len(parts) > 2 and parts[1] in STAGES else "ground"


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
            if any(target == f or target.startswith(f + ".") for f in FORBIDDEN[stage]):
                if not (stage == "ground" and module in GROUND_TORCH_OK and target.startswith("torch")):
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
        "mfu_sweep.records.results (ground) imports mfu_sweep.analysis.fits.fit",
    ]


def test_rules_keep_the_workflow_stage_above_measure_and_analysis() -> None:
    edges = {"mfu_sweep.workflow.loop": {"mfu_sweep.measure.sweep", "mfu_sweep.analysis.refine.plan", "click"},
             "mfu_sweep.measure.sweep": {"mfu_sweep.workflow.loop"}}
    assert violations(edges) == ["mfu_sweep.measure.sweep (measure) imports mfu_sweep.workflow.loop",
                                 "mfu_sweep.workflow.loop (workflow) imports click"]


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
ANALYSIS_RANK = {"series": 0, "summary": 0, "sources": 0, "fits": 1, "verdicts": 2,
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
    edges = {"mfu_sweep.analysis.fits.fit": {"mfu_sweep.analysis.verdicts.comparison", "mfu_sweep.analysis.series"},
             "mfu_sweep.analysis.series": {"mfu_sweep.analysis.fits.fit"},
             "mfu_sweep.analysis.verdicts.pair": {"mfu_sweep.analysis.fits.fit", "mfu_sweep.analysis.steps.gemm_sum"},
             "mfu_sweep.analysis.refine.plan": {"mfu_sweep.analysis.fleet.leaderboard"}}
    assert analysis_violations(edges) == [
        "mfu_sweep.analysis.fits.fit (fits) imports mfu_sweep.analysis.verdicts.comparison (verdicts)",
        "mfu_sweep.analysis.series (series) imports mfu_sweep.analysis.fits.fit (fits)",
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
