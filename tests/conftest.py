"""Shared fixtures. Tests run real code paths on the CPU; nothing here fakes a device."""

from __future__ import annotations

import os

import pytest
import torch

# Two threads at most: CI has two cores, and concurrent tests must not oversubscribe.
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture()
def no_fault_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MFU_SWEEP_TEST_FAULT", raising=False)


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that default to ./sweeps must never write into the repository."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "2"))
