"""Shared fixtures: seeded RNGs per test and a private IREE compile cache."""
from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import torch

import staged


@pytest.fixture(autouse=True)
def _seed():
    """Every test draws the same numbers each run, torch's oracle samples included (a
    comparison of two unseeded samples' spread is flaky by construction)."""
    staged.manual_seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """Compiled modules go to $STAGED_CACHE_DIR (set by `make test`) or a temp dir."""
    if not os.environ.get("STAGED_CACHE_DIR"):
        os.environ["STAGED_CACHE_DIR"] = str(tmp_path_factory.mktemp("staged-cache"))
    yield


# The Vulkan tests run on Mesa's lavapipe when it is installed (`make test` installs it):
# pin its ICD so a machine's other Vulkan drivers don't get in the way.
_LAVAPIPE = sorted(glob.glob("/usr/share/vulkan/icd.d/lvp_icd.*.json"))
if _LAVAPIPE and not os.environ.get("VK_ICD_FILENAMES"):
    os.environ["VK_ICD_FILENAMES"] = _LAVAPIPE[0]
