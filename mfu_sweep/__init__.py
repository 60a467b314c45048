"""mfu-sweep: GEMM throughput and MFU sweeps across accelerators.

Library first: everything the CLI does is importable. The command line's tables as pandas DataFrames are in
:mod:`mfu_sweep.api`::

    from mfu_sweep import api
    bands = api.bands(["sweeps/published/sm_100_B200.json", "sweeps/published/gfx950.json"], metric="tflops")
"""

# The one version source: pyproject.toml reads it (tool.setuptools.dynamic), so the metadata, `mfu-sweep
# --version` and every file's tool.version agree.
__version__ = "0.1.0"


def _install_moved_aliases() -> None:
    """The import paths of the modules that moved into ``records/``, ``gemm/`` and ``util/`` (issue 50) keep
    working for one release: ``import mfu_sweep.results`` gives ``mfu_sweep.records.results`` with a
    DeprecationWarning naming the new path."""
    import importlib
    import importlib.machinery
    import sys
    import warnings

    class MovedModules:
        """A meta path finder (and loader) that answers the old names with the moved modules."""

        @staticmethod
        def find_spec(fullname: str, path: object = None, target: object = None) -> object:
            package, _, old = fullname.partition(".")
            if package != __name__ or old not in MOVED:  # never another top-level module (filelock, stats ...)
                return None
            return importlib.machinery.ModuleSpec(fullname, MovedModules)

        @staticmethod
        def create_module(spec: importlib.machinery.ModuleSpec) -> object:
            new = f"{__name__}.{MOVED[spec.name.removeprefix(__name__ + '.')]}"
            warnings.warn(f"{spec.name} moved to {new}; the old path goes in the next release",
                          DeprecationWarning, stacklevel=2)
            return importlib.import_module(new)

        @staticmethod
        def exec_module(module: object) -> None:
            del module  # the moved module ran when it was imported

    sys.meta_path.insert(0, MovedModules)  # before an editable install's finder, which may know the old files


# old module (under mfu_sweep.) -> where it lives now
MOVED = {
    **{m: f"records.{m}" for m in ("results", "journal", "checks", "summaries", "shards", "contention",
                                    "fingerprint", "foreign", "step_files")},
    **{m: f"gemm.{m}" for m in ("shapes", "workloads", "models", "routing", "dtypes", "llm_options")},
    **{m: f"util.{m}" for m in ("inputs", "jsonio", "outputs", "manifest", "filelock", "names", "progress",
                                 "allocator", "text", "errors", "stats")},
    "present.plot": "present.figures.plot",  # the one import for notebooks
    "analysis.series": "analysis.ground.series",
    "analysis.summary": "analysis.ground.summary",
}
_install_moved_aliases()
