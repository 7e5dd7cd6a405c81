"""Every module whose torch twin has ``reset_parameters`` has it too (models re-initialise
their layers with it: PyTorch's FSDP2 example builds its Transformer empty, then resets
each module), and LayerNorm's gives torch's values."""

from __future__ import annotations

import inspect

import numpy as np
import torch

import staged


def test_every_module_with_torchs_reset_parameters_has_one():
    missing = [
        name
        for name in dir(torch.nn)
        if inspect.isclass(cls := getattr(torch.nn, name))
        and issubclass(cls, torch.nn.Module)
        and "reset_parameters" in vars(cls)
        and hasattr(staged.nn, name)
        and not hasattr(getattr(staged.nn, name), "reset_parameters")
    ]
    assert not missing


def test_layer_norm_reset_parameters():
    for bias in (True, False):
        got, want = staged.nn.LayerNorm(4, bias=bias), torch.nn.LayerNorm(4, bias=bias)
        for T, m in ((staged, got), (torch, want)):
            with T.no_grad():
                m.weight.mul_(3.0)
                if m.bias is not None:
                    m.bias.add_(2.0)
            m.reset_parameters()
        for (name, p), (_, q) in zip(got.named_parameters(), want.named_parameters()):
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=name)
    staged.nn.LayerNorm(4, elementwise_affine=False).reset_parameters()  # nothing to reset
