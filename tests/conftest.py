"""Shared fixtures: a seeded RNG per test and a private IREE compile cache."""
from __future__ import annotations

import os

import numpy as np
import pytest

import staged


@pytest.fixture(autouse=True)
def _seed():
    staged.manual_seed(0)
    np.random.seed(0)
    yield


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """Compiled modules go to $STAGED_CACHE_DIR (set by `make test`) or a temp dir."""
    if not os.environ.get("STAGED_CACHE_DIR"):
        os.environ["STAGED_CACHE_DIR"] = str(tmp_path_factory.mktemp("staged-cache"))
    yield
