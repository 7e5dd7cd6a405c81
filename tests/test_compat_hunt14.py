"""What sentence-transformers 6 and open_clip 3.3 needed of torch (the fourteenth hunt,
README "Running PyTorch programs"), each against torch 2.13: ``torch.types``, the symbolic
number classes, ``torch.TensorType``, checkpoint's device RNG states, and Adam on a 0-d
parameter (CLIP's ``logit_scale``)."""

import numpy as np
import pytest
import torch

import staged
import staged.types
import staged.utils.checkpoint


def test_torch_types_names_torchs_aliases():
    for name in ("Number", "Device", "FileLike", "Storage", "_size", "_dtype", "_device"):
        assert hasattr(staged.types, name) and hasattr(torch.types, name)
    assert isinstance(3, staged.types._Number) and isinstance(staged.float32, staged.types._dtype)
    assert staged.types._device is staged.device and staged.types.py_sym_types[0] is staged.SymInt


@pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])
def test_no_plain_number_is_symbolic(lib):
    assert not isinstance(3, lib.SymInt) and not isinstance(2.0, lib.SymFloat)
    assert not isinstance(True, lib.SymBool)
    assert lib.TensorType.get() is not None


@pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])
def test_checkpoint_device_states_of_cpu_tensors_are_empty(lib):
    ids, states = lib.utils.checkpoint.get_device_states(lib.ones(2), [lib.zeros(1)], 3)
    assert ids == [] and states == []
    lib.utils.checkpoint.set_device_states([], [])


def test_setting_an_accelerator_rng_state_says_there_is_none():
    with pytest.raises(RuntimeError, match="no accelerator devices"):
        staged.utils.checkpoint.set_device_states([0], [staged.zeros(1)])


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "SGD", "Adagrad", "NAdam"])
def test_a_0d_parameter_steps_as_torchs(name):
    """open_clip's ``logit_scale``: Adam's fused in-place update crashed on a 0-d tensor
    (NumPy gives 0-d results scalars, which cannot be written into)."""
    trace = {}
    for lib in (staged, torch):
        p = lib.nn.Parameter(lib.tensor(np.log(1 / 0.07), dtype=lib.float64))
        q = lib.nn.Parameter(lib.tensor([0.5, -0.25], dtype=lib.float64))
        opt = getattr(lib.optim, name)([p, q], lr=1e-2, weight_decay=0.1)
        for g in (0.3, -1.2, 0.7):
            opt.zero_grad()
            (p * g + (q * g).sum()).backward()
            opt.step()
        trace[lib.__name__] = (p.item(), q.tolist())
    np.testing.assert_allclose(trace["staged"][0], trace["torch"][0], rtol=1e-15)
    np.testing.assert_allclose(trace["staged"][1], trace["torch"][1], rtol=1e-15)
