"""The meta device (issue 17): tensors of shape, dtype and strides without data, against
torch 2.13's meta tensors (Note [meta tensors] in ``staged/eager/meta.py``)."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import message
from tests.nn.test_device_args import REQUIRED


def meta(lib, *shape, dtype="float32", requires_grad=False):
    return lib.empty(shape, dtype=getattr(lib, dtype), device="meta", requires_grad=requires_grad)


def assert_like(ours, theirs):
    """The same metadata: device, shape, dtype, strides, requires_grad."""
    assert ours.device.type == theirs.device.type
    assert ours.is_meta is theirs.is_meta
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert ours.stride() == theirs.stride()
    assert ours.requires_grad == theirs.requires_grad


FACTORIES = {
    "empty": lambda lib: lib.empty(2, 3, device="meta"),
    "empty_int": lambda lib: lib.empty((4,), dtype=lib.int32, device="meta"),
    "empty_channels_last": lambda lib: lib.empty(
        2, 3, 4, 5, device="meta", memory_format=lib.channels_last
    ),
    "empty_strided": lambda lib: lib.empty_strided((2, 3), (1, 2), device="meta"),
    "zeros": lambda lib: lib.zeros(3, 1, 2, device="meta", requires_grad=True),
    "ones": lambda lib: lib.ones((), dtype=lib.float64, device="meta"),
    "full": lambda lib: lib.full((2, 2), 7, device="meta"),
    "rand": lambda lib: lib.rand(5, device="meta"),
    "randn": lambda lib: lib.randn(2, 3, device=lib.device("meta")),
    "randint": lambda lib: lib.randint(0, 9, (3, 4), device="meta"),
    "randperm": lambda lib: lib.randperm(6, device="meta"),
    "arange": lambda lib: lib.arange(0, 10, 3, device="meta"),
    "linspace": lambda lib: lib.linspace(0, 1, 7, device="meta"),
    "eye": lambda lib: lib.eye(3, 5, device="meta"),
    "tensor": lambda lib: lib.tensor([[1.0, 2.0]], device="meta"),
    "zeros_like": lambda lib: lib.zeros_like(meta(lib, 2, 3).t()),
    "randn_like_cpu_to_meta": lambda lib: lib.randn_like(lib.ones(2, 3), device="meta"),
    "to": lambda lib: lib.ones(2, 3).t().to("meta"),
    "new_zeros": lambda lib: meta(lib, 2).new_ones(4, 1),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_make_torchs_meta_tensors(name):
    assert_like(FACTORIES[name](staged), FACTORIES[name](torch))


def test_meta_factories_draw_nothing():
    staged.manual_seed(3)
    staged.randn(1000, 1000, device="meta")
    staged.rand(10, device="meta")
    staged.manual_seed(3)
    expected = staged.randn(4)
    staged.manual_seed(3)
    staged.randn(4, device="meta")
    assert np.array_equal(staged.randn(4).numpy(), expected.numpy())


def _conv(lib):
    x, w = meta(lib, 2, 3, 8, 8), meta(lib, 4, 3, 3, 3)
    return lib.nn.functional.conv2d(x, w, stride=2, padding=1)


OPS = {
    "add_broadcast": lambda lib: meta(lib, 2, 3) + meta(lib, 3),
    "mul_number": lambda lib: meta(lib, 2, 3) * 2,
    "add_int_promotes": lambda lib: meta(lib, 4, dtype="int32") + meta(lib, 4, dtype="float64"),
    "true_div_int": lambda lib: meta(lib, 4, dtype="int64") / 2,
    "add_cpu_scalar": lambda lib: meta(lib, 2, 3) + lib.tensor(1.0),
    "compare": lambda lib: meta(lib, 2, 3) > 0,
    "exp_transposed": lambda lib: meta(lib, 2, 3).t().exp(),
    "matmul": lambda lib: meta(lib, 2, 3) @ meta(lib, 3, 4),
    "matmul_batched": lambda lib: meta(lib, 5, 2, 3) @ meta(lib, 3, 4),
    "sum_dim": lambda lib: meta(lib, 2, 3, 4).sum(1),
    "mean_keepdim": lambda lib: meta(lib, 2, 3, 4).mean(-1, keepdim=True),
    "amax": lambda lib: meta(lib, 2, 3).amax(0),
    "argmax": lambda lib: meta(lib, 2, 3).argmax(1),
    "sum_all_int": lambda lib: meta(lib, 2, 3, dtype="int32").sum(),
    "transpose": lambda lib: meta(lib, 2, 3, 4).transpose(0, 2),
    "permute": lambda lib: meta(lib, 2, 3, 4).permute(1, 2, 0),
    "view": lambda lib: meta(lib, 2, 3, 4).view(6, 4),
    "reshape_copy": lambda lib: meta(lib, 2, 3).t().reshape(6),
    "reshape_view": lambda lib: meta(lib, 4, 6)[:, :3].reshape(2, 2, 3),
    "contiguous": lambda lib: meta(lib, 2, 3).t().contiguous(),
    "clone_transposed": lambda lib: meta(lib, 2, 3).t().clone(),
    "expand": lambda lib: meta(lib, 3, 1).expand(2, 3, 5),
    "unsqueeze": lambda lib: meta(lib, 2, 3).unsqueeze(1),
    "flatten": lambda lib: meta(lib, 2, 3, 4).flatten(1),
    "index_int": lambda lib: meta(lib, 4, 5, 6)[1],
    "index_slices": lambda lib: meta(lib, 4, 5, 6)[1:3, ::2],
    "index_last": lambda lib: meta(lib, 4, 5, 6)[..., 2],
    "index_none": lambda lib: meta(lib, 4, 5)[None, :, 1:],
    "narrow": lambda lib: meta(lib, 4, 5).narrow(1, 1, 3),
    "diagonal": lambda lib: meta(lib, 4, 5).diagonal(),
    "cat": lambda lib: lib.cat([meta(lib, 2, 3), meta(lib, 4, 3)]),
    "cat_dim1": lambda lib: lib.cat([meta(lib, 2, 3), meta(lib, 2, 1)], 1),
    "stack": lambda lib: lib.stack([meta(lib, 2, 3), meta(lib, 2, 3)], 1),
    "conv2d": _conv,
    "linear": lambda lib: lib.nn.functional.linear(meta(lib, 5, 3), meta(lib, 4, 3), meta(lib, 4)),
    "softmax": lambda lib: meta(lib, 2, 3).softmax(-1),
    "layer_norm": lambda lib: lib.nn.functional.layer_norm(meta(lib, 2, 3), (3,)),
    "cross_entropy": lambda lib: lib.nn.functional.cross_entropy(
        meta(lib, 5, 3), meta(lib, 5, dtype="int64")
    ),
    "cast": lambda lib: meta(lib, 2, 3).to(lib.float64),
    "where": lambda lib: lib.where(meta(lib, 2, 3, dtype="bool"), meta(lib, 2, 3), 0.0),
    "add_": lambda lib: meta(lib, 2, 3).add_(1),
    "copy_from_cpu": lambda lib: meta(lib, 2, 3).copy_(lib.ones(2, 3)),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_give_torchs_metadata(name):
    ours, theirs = OPS[name](staged), OPS[name](torch)
    assert_like(ours, theirs)


def test_meta_results_match_the_same_ops_on_cpu():
    """Each op's metadata on meta is the shape and dtype its CPU result has here."""
    cpu = {
        "add": lambda lib, d: lib.ones(2, 3, device=d) + lib.ones(3, dtype=lib.int64, device=d),
        "matmul": lambda lib, d: lib.ones(5, 2, 3, device=d) @ lib.ones(3, 4, device=d),
        "var": lambda lib, d: lib.ones(4, 6, device=d).var(0),
    }
    for fn in cpu.values():
        ours, ref = fn(staged, "meta"), fn(staged, "cpu")
        assert (ours.shape, ours.dtype) == (ref.shape, ref.dtype)


BAD_SHAPES = {
    "broadcast": lambda lib, d: lib.ones(2, 3, device=d) + lib.ones(4, device=d),
    "matmul": lambda lib, d: lib.ones(2, 3, device=d) @ lib.ones(4, 5, device=d),
    "view": lambda lib, d: lib.ones(2, 3, device=d).view(4),
    "cat": lambda lib, d: lib.cat([lib.ones(2, 3, device=d), lib.ones(2, 4, device=d)]),
    "dim": lambda lib, d: lib.ones(2, 3, device=d).sum(2),
    "conv2d_channels": lambda lib, d: lib.nn.functional.conv2d(
        lib.ones(1, 2, 8, 8, device=d), lib.ones(4, 3, 3, 3, device=d)
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_SHAPES))
def test_bad_shapes_raise_as_on_the_cpu(name):
    """torch raises the same exception type on meta; staged's message is its CPU one."""
    fn = BAD_SHAPES[name]
    with pytest.raises(Exception) as theirs:
        fn(torch, "meta")
    with pytest.raises(type(theirs.value)) as ours:
        fn(staged, "meta")
    with pytest.raises(type(theirs.value)) as on_cpu:
        fn(staged, "cpu")
    assert message(ours.value) == message(on_cpu.value)


DATA = {
    "item": lambda lib: meta(lib, 1).item(),
    "item_many": lambda lib: meta(lib, 2).item(),
    "float": lambda lib: float(meta(lib)),
    "bool": lambda lib: bool(meta(lib, 1)),
    "bool_many": lambda lib: bool(meta(lib, 2)),
    "tolist": lambda lib: meta(lib, 2).tolist(),
    "numpy": lambda lib: meta(lib, 2).numpy(),
    "cpu": lambda lib: meta(lib, 2).cpu(),
    "to_cpu": lambda lib: meta(lib, 2).to("cpu"),
    "copy_out": lambda lib: lib.zeros(2).copy_(meta(lib, 2)),
    "mixed_add": lambda lib: meta(lib, 2, 3) + lib.ones(2, 3),
    "mixed_add_cpu_first": lambda lib: lib.ones(2, 3) + meta(lib, 2, 3),
    "mixed_cat": lambda lib: lib.cat([meta(lib, 2, 3), lib.ones(2, 3)]),
    "module_to_cpu": lambda lib: lib.nn.Linear(2, 3, device="meta").to("cpu"),
}


@pytest.mark.parametrize("name", sorted(DATA))
def test_data_out_of_meta_and_mixed_devices_raise_torchs_errors(name):
    fn = DATA[name]
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value)) as ours:
        fn(staged)
    assert message(ours.value) == str(theirs.value).replace("torch.", "staged.")


PRINTED = {
    "plain": lambda lib: meta(lib, 2, 3),
    "scalar": lambda lib: meta(lib),
    "empty_int": lambda lib: meta(lib, 0, dtype="int64"),
    "double_grad": lambda lib: meta(lib, 2, 3, dtype="float64", requires_grad=True),
    "grad_fn": lambda lib: meta(lib, 2, 3, requires_grad=True).sum(),
    "long_suffixes": lambda lib: meta(lib, 100000, 2000, 30, dtype="float16", requires_grad=True),
    "parameter": lambda lib: lib.nn.Parameter(meta(lib, 4)),
}


@pytest.mark.parametrize("name", sorted(PRINTED))
def test_printing_as_torch(name):
    theirs = repr(PRINTED[name](torch)).replace("torch.", "staged.")
    assert repr(PRINTED[name](staged)) == theirs
    assert str(PRINTED[name](staged)) == str(PRINTED[name](torch)).replace("torch.", "staged.")


def test_device_properties_and_defaults():
    x = staged.empty(2, device="meta")
    assert x.is_meta and not x.is_cpu and x.device == staged.device("meta")
    assert repr(x.device) == repr(torch.empty(2, device="meta").device)
    assert not staged.ones(1).is_meta and staged.ones(1).is_cpu
    assert staged.get_default_device() == staged.device("cpu")
    with staged.device("meta") as d:
        assert d == staged.device("meta") and staged.get_default_device() == d
        for t in (staged.zeros(2), staged.tensor([1.0]), staged.arange(3), staged.randn(2)):
            assert t.is_meta
        assert staged.zeros_like(staged.ones(1, device="cpu")).is_cpu  # torch's too
    assert staged.zeros(2).is_cpu and staged.get_default_device() == staged.device("cpu")
    staged.set_default_device("meta")
    try:
        assert staged.ones(3).is_meta and staged.get_default_device().type == "meta"
    finally:
        staged.set_default_device(None)
    assert staged.ones(3).is_cpu
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA"):
        staged.set_default_device("cuda")


def _modules(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(
        lib.nn.Conv2d(2, 4, 3),
        lib.nn.BatchNorm2d(4),
        lib.nn.ReLU(),
        lib.nn.Flatten(),
        lib.nn.Linear(4 * 4 * 4, 5),
        lib.nn.LayerNorm(5),
    )


def _construct_on_meta(lib):
    with lib.device("meta"):
        model = _modules(lib)
    return model


def test_module_construction_under_meta_then_to_empty_and_init():
    """``with device('meta')``: parameters without memory; ``to_empty`` then each
    module's ``reset_parameters`` gives torch's initialisation."""
    ours, theirs = _construct_on_meta(staged), _construct_on_meta(torch)
    for (n, p), (tn, tp) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert n == tn and isinstance(p, staged.nn.Parameter)
        assert_like(p, tp)
    for lib, model in ((staged, ours), (torch, theirs)):
        assert model.to_empty(device="cpu") is model
        lib.manual_seed(1)
        for m in model.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
    for p, tp in zip(ours.state_dict().values(), theirs.state_dict().values(), strict=True):
        assert p.device.type == "cpu"
        np.testing.assert_array_equal(p.numpy(), tp.numpy())


def test_load_state_dict_assign_gives_a_working_cpu_model():
    """The big-model pattern: build on meta, load a checkpoint with ``assign=True``."""
    checkpoint = _modules(torch).state_dict()
    x = torch.randn(3, 2, 6, 6)
    results = {}
    for lib in (staged, torch):
        model = _construct_on_meta(lib)
        state = {
            k: lib.tensor(v.numpy()) if lib is staged else v.clone() for k, v in checkpoint.items()
        }
        out = model.load_state_dict(state, assign=True)
        assert not out.missing_keys and not out.unexpected_keys
        assert all(not p.is_meta for p in model.parameters())
        assert all(p.requires_grad for p in model.parameters())
        model.eval()
        results[lib.__name__] = model(lib.tensor(x.numpy())).detach().numpy()
    np.testing.assert_allclose(results["staged"], results["torch"], rtol=1e-5, atol=1e-6)


def test_load_state_dict_into_meta_without_assign_warns_as_torch():
    caught = {}
    for lib in (staged, torch):
        model = lib.nn.Linear(2, 3, device="meta")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            model.load_state_dict(lib.nn.Linear(2, 3).state_dict())
        caught[lib.__name__] = [str(x.message) for x in w]
        assert model.weight.is_meta
    assert caught["staged"] == caught["torch"] and len(caught["torch"]) == 2


def test_module_to_meta():
    for lib in (staged, torch):
        m = lib.nn.Linear(2, 3)
        assert m.to("meta") is m
        assert all(p.is_meta and p.requires_grad for p in m.parameters())
        assert isinstance(m.weight, lib.nn.Parameter)
        assert m.to("meta", lib.float64).weight.dtype is lib.float64
        assert copy.deepcopy(m).weight.is_meta


def test_backward_on_meta_gives_meta_gradients():
    grads = {}
    for lib in (staged, torch):
        w = meta(lib, 4, 3, requires_grad=True)
        b = meta(lib, 4, requires_grad=True)
        x = meta(lib, 5, 3)
        loss = (lib.nn.functional.linear(x, w, b).relu() ** 2).mean()
        loss.backward()
        grads[lib.__name__] = (w.grad, b.grad, loss)
    for ours, theirs in zip(grads["staged"], grads["torch"], strict=True):
        assert ours.is_meta and theirs.is_meta
        assert (tuple(ours.shape), ours.requires_grad) == (
            tuple(theirs.shape),
            theirs.requires_grad,
        )
        assert str(ours.dtype)[7:] == str(theirs.dtype)[6:]
    assert grads["staged"][0].grad_fn is None


def test_cpu_ops_are_untouched():
    """CPU tensors never see the meta machinery: a CPU result is a NumPy array."""
    x = staged.ones(2, 3, requires_grad=True)
    y = (x * 2).sum()
    y.backward()
    assert type(y._payload) is np.ndarray and type(x.grad._payload) is np.ndarray


@pytest.mark.parametrize("name", sorted(n for n in REQUIRED if not n.startswith("Lazy")))
def test_every_layer_builds_on_meta_as_torchs(name):
    """``device="meta"`` on every layer taking it: the same parameters and buffers as
    torch's, all meta (initialisers draw nothing and write nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lazy modules' and nested tensors' notices
        ours = getattr(staged.nn, name)(*REQUIRED[name], device="meta")
        theirs = getattr(torch.nn, name)(*REQUIRED[name], device="meta")
    ours_state, theirs_state = ours.state_dict(), theirs.state_dict()
    assert list(ours_state) == list(theirs_state)
    for key, t in theirs_state.items():
        assert_like(ours_state[key].detach(), t.detach())
