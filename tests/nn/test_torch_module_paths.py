"""torch's module paths that framework code imports private or moved names from (the
timm-style hunt's ImportErrors), with torch's behaviour where they have one."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import staged

PATHS = [
    ("nn.modules.batchnorm", "_BatchNorm"),
    ("nn.modules.utils", "_single"),
    ("nn.modules.utils", "_pair"),
    ("nn.modules.utils", "_triple"),
    ("nn.modules.utils", "_quadruple"),
    ("nn.modules.utils", "_ntuple"),
    ("nn.modules.transformer", "_get_clones"),
    ("nn.modules.activation", "NonDynamicallyQuantizableLinear"),
    ("optim.optimizer", "required"),
    ("optim.adamw", "AdamW"),
    ("utils.hooks", "RemovableHandle"),
    ("nn.parameter", "UninitializedParameter"),
    ("nn.parameter", "UninitializedBuffer"),
    ("nn.parameter", "is_lazy"),
]


@pytest.mark.parametrize("path,name", PATHS, ids=lambda p: str(p))
def test_importable_where_torch_has_it(path, name):
    for lib in ("torch", "staged"):
        assert hasattr(importlib.import_module(f"{lib}.{path}"), name), (lib, path, name)


@pytest.mark.parametrize("value", [3, (1, 2), [4, 5, 6], "ab", np.arange(3), np.int64(7)], ids=repr)
def test_size_parsers_as_torchs(value):
    from staged.nn.modules import utils as ours
    from torch.nn.modules import utils as theirs

    for name in ("_single", "_pair", "_triple", "_quadruple"):
        assert getattr(ours, name)(value) == getattr(theirs, name)(value)
        assert getattr(ours, name).__name__ == getattr(theirs, name).__name__
    assert ours._ntuple(5, "five")(value) == theirs._ntuple(5, "five")(value)


def test_what_the_names_are():
    from staged.nn.modules.batchnorm import _BatchNorm
    from staged.nn.modules.transformer import _get_clones

    assert all(
        isinstance(m, _BatchNorm) for m in (staged.nn.BatchNorm2d(3), staged.nn.SyncBatchNorm(3))
    )
    layer = staged.nn.Linear(2, 2)
    clones = _get_clones(layer, 3)
    assert isinstance(clones, staged.nn.ModuleList) and len(clones) == 3
    assert clones[0] is not layer and clones[0].weight is not layer.weight
    assert np.array_equal(clones[2].weight.detach().numpy(), layer.weight.detach().numpy())
    assert repr(staged.optim.optimizer.required) == repr(
        importlib.import_module("torch.optim.optimizer").required
    )
    assert staged.optim.adamw.AdamW is staged.optim.AdamW
    handle = staged.nn.Linear(1, 1).register_forward_hook(lambda *a: None)
    assert isinstance(handle, staged.utils.hooks.RemovableHandle)
