"""Issue 17's leftovers against torch 2.13: ``norm``'s nuclear and dtype forms, the
activations' refusals of bool, integer and complex inputs, and CPU operands beside meta
tensors (the index of tied entries: tests/ops/test_tie_order.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_raises_like_torch, compare_with_torch

X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]], np.float32)
X3 = np.array([[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [2.0, -5.0]]], np.float64)


# --- norm ----------------------------------------------------------------------------------
NORMS = {
    "nuc": (X, {"p": "nuc"}),
    "nuc_float64": (X.astype(np.float64), {"p": "nuc"}),
    "nuc_dims": (X3, {"p": "nuc", "dim": (0, 2)}),
    "nuc_dims_keepdim": (X3, {"p": "nuc", "dim": (2, 1), "keepdim": True}),
    "nuc_dims_list": (X3, {"p": "nuc", "dim": [-1, 0]}),
    "nuc_dtype": (X, {"p": "nuc", "dtype": "float64"}),
    "fro_dtype": (X, {"p": "fro", "dtype": "float64"}),
    "p_none": (X, {"p": None}),
    "fro_dims": (X3, {"p": "fro", "dim": (0, 2)}),
    "fro_dim_keepdim": (X3, {"p": "fro", "dim": 1, "keepdim": True}),
    "inf_dims": (X3, {"p": math.inf, "dim": (1, 2)}),
    "-inf_dim": (X, {"p": -math.inf, "dim": 1}),
    "negative": (X, {"p": -1.5}),
    "p3_keepdim": (X, {"p": 3, "dim": 0, "keepdim": True}),
}


@pytest.mark.parametrize("name", NORMS)
def test_norm_as_torch(name):
    """Values, dtypes and gradients of ``staged.norm`` and ``Tensor.norm``."""
    a, kwargs = NORMS[name]

    def kw(lib):
        d = kwargs.get("dtype")
        return {**kwargs, "dtype": getattr(lib, d)} if d is not None else kwargs

    compare_with_torch(
        lambda x: staged.norm(x, **kw(staged)), lambda x: torch.norm(x, **kw(torch)), a
    )
    compare_with_torch(lambda x: x.norm(**kw(staged)), lambda x: x.norm(**kw(torch)), a)


def test_nuclear_norm_gradient_is_u_vh():
    """The gradient of the nuclear norm of a full-rank matrix is ``U @ Vh``."""
    a = np.random.default_rng(0).standard_normal((4, 3))
    x = staged.tensor(a, requires_grad=True)
    staged.norm(x, "nuc").backward()
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(x.grad.numpy(), u @ vh, rtol=1e-10, atol=1e-12)


def _t(lib, a, dtype=None):
    return lib.tensor(a, dtype=None if dtype is None else getattr(lib, dtype))


NORM_ERRORS = {
    "nuc_3d_every_dim": lambda lib: lib.norm(_t(lib, X3), p="nuc"),
    "nuc_1d": lambda lib: lib.norm(_t(lib, [1.0, 2.0]), p="nuc"),
    "nuc_one_dim": lambda lib: lib.norm(_t(lib, X), p="nuc", dim=1),
    "nuc_same_dims": lambda lib: lib.norm(_t(lib, X), p="nuc", dim=(0, -2)),
    "nuc_half": lambda lib: lib.norm(_t(lib, X, "float16"), p="nuc"),
    "nuc_bfloat16": lambda lib: lib.norm(_t(lib, X, "bfloat16"), p="nuc"),
    "nuc_int": lambda lib: lib.norm(_t(lib, [[1, 2], [3, 4]]), p="nuc"),
    "nuc_int_to_float": lambda lib: lib.norm(_t(lib, [[1, 2]]), p="nuc", dtype=lib.float64),
    "nuc_narrowing": lambda lib: lib.norm(_t(lib, X, "float64"), p="nuc", dtype=lib.float32),
    "fro_three_dims": lambda lib: lib.norm(_t(lib, X3), p="fro", dim=(0, 1, 2)),
    "bad_order": lambda lib: lib.norm(_t(lib, X), p="abc"),
    "int": lambda lib: lib.norm(_t(lib, [1, 2])),
    "bool": lambda lib: _t(lib, [True, False]).norm(),
    "int_inf": lambda lib: lib.norm(_t(lib, [1, 2]), p=math.inf),
    "int_to_float": lambda lib: lib.norm(_t(lib, [1, 2]), dtype=lib.float32),
    "narrowing": lambda lib: lib.norm(_t(lib, X, "float64"), dtype=lib.float32),
    "complex_to_real": lambda lib: lib.norm(_t(lib, [1 + 1j]), dtype=lib.float64),
    "real_to_complex": lambda lib: lib.norm(_t(lib, X), dtype=lib.complex64),
    "to_int": lambda lib: lib.norm(_t(lib, X), dtype=lib.int64),
    "matrix_norm_half_2": lambda lib: lib.linalg.matrix_norm(_t(lib, X, "float16"), 2),
    "matrix_norm_dims": lambda lib: lib.linalg.matrix_norm(_t(lib, X3), dim=(0,)),
}


@pytest.mark.parametrize("name", NORM_ERRORS)
def test_norm_errors_as_torch(name):
    assert_raises_like_torch(NORM_ERRORS[name])


def test_norm_complex_with_dtype():
    for lib in (staged, torch):
        out = lib.norm(lib.tensor([1 + 1j, 2]), dtype=lib.complex128)
        assert str(out.dtype).endswith("float64") and abs(out.item() - math.sqrt(6)) < 1e-12


# --- activations on bool, integer and complex inputs ---------------------------------------
def F(lib):
    return lib.nn.functional


ACTIVATIONS = {
    "F.relu": lambda lib, x: F(lib).relu(x),
    "F.relu_inplace": lambda lib, x: F(lib).relu(x, inplace=True),
    "F.relu_": lambda lib, x: F(lib).relu_(x),
    "Tensor.relu": lambda lib, x: x.relu(),
    "Tensor.relu_": lambda lib, x: x.relu_(),
    "relu": lambda lib, x: lib.relu(x),
    "relu_": lambda lib, x: lib.relu_(x),
    "nn.ReLU": lambda lib, x: lib.nn.ReLU()(x),
    "nn.ReLU_inplace": lambda lib, x: lib.nn.ReLU(inplace=True)(x),
    "abs": lambda lib, x: lib.abs(x),
    "Tensor.absolute": lambda lib, x: x.absolute(),
    "softsign": lambda lib, x: F(lib).softsign(x),
    "nn.Softsign": lambda lib, x: lib.nn.Softsign()(x),
    "prelu": lambda lib, x: F(lib).prelu(x, lib.tensor([0.25])),
    "prelu_int_weight": lambda lib, x: F(lib).prelu(x, lib.tensor([2])),
    "nn.PReLU": lambda lib, x: lib.nn.PReLU()(x),
    "hardtanh": lambda lib, x: F(lib).hardtanh(x),
    "hardtanh_": lambda lib, x: F(lib).hardtanh_(x),
    "hardtanh_fractional": lambda lib, x: F(lib).hardtanh(x, -1.5, 2.5, inplace=True),
    "hardtanh_nonnegative": lambda lib, x: F(lib).hardtanh(x, -0.5, 2),
    "relu6": lambda lib, x: F(lib).relu6(x),
    "nn.ReLU6": lambda lib, x: lib.nn.ReLU6()(x),
    "leaky_relu": lambda lib, x: F(lib).leaky_relu(x),
    "leaky_relu_": lambda lib, x: F(lib).leaky_relu_(x),
    "threshold": lambda lib, x: F(lib).threshold(x, 0.5, 7),
    "threshold_": lambda lib, x: F(lib).threshold_(x, 0.5, 7),
    "nn.Threshold": lambda lib, x: lib.nn.Threshold(0.5, 7)(x),
    "elu": lambda lib, x: F(lib).elu(x),
    "elu_": lambda lib, x: F(lib).elu_(x),
    "selu": lambda lib, x: lib.selu(x),
}
INPUTS = {
    "bool": lambda lib: lib.tensor([True, False]),
    "int64": lambda lib: lib.tensor([-2, 0, 3]),
    "uint8": lambda lib: lib.tensor([0, 3], dtype=lib.uint8),
    "complex64": lambda lib: lib.tensor([1j, -1]),
    "float32": lambda lib: lib.tensor([-1.5, 0.0, 2.0]),
}


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_dtypes_as_torch(name, kind):
    """The result (value and dtype) where torch gives one, else torch's exception type and
    message."""
    call = ACTIVATIONS[name]
    try:
        theirs = call(torch, INPUTS[kind](torch))
    except Exception:
        assert_raises_like_torch(lambda lib: call(lib, INPUTS[kind](lib)))
        return
    ours = call(staged, INPUTS[kind](staged))
    assert str(ours.dtype)[7:] == str(theirs.dtype)[6:]
    np.testing.assert_array_equal(np.asarray(ours.detach()), theirs.detach().numpy())


@pytest.mark.parametrize(
    "weight_dtype, input_dtype",
    [("float64", "float32"), ("float32", "float64"), ("float32", "float16")],
)
def test_prelu_refuses_mixed_dtypes(weight_dtype, input_dtype):
    assert_raises_like_torch(
        lambda lib: F(lib).prelu(
            lib.ones(2, 3, dtype=getattr(lib, input_dtype)),
            lib.tensor(0.25, dtype=getattr(lib, weight_dtype)),
        )
    )


def test_relu_of_bool_lowers_at_the_primitive():
    """The refusal is the public op's: the primitive keeps bool in its domain."""
    out = staged.autodiff.relu(staged.tensor([True, False]))
    assert out.dtype is staged.bool and out.tolist() == [True, False]


# --- CPU operands beside meta tensors --------------------------------------------------------
def M(lib, *shape, dtype="float32"):
    return lib.ones(shape, device="meta", dtype=getattr(lib, dtype))


MIXED = {
    "size_one_cpu": lambda lib: M(lib, 3) + lib.ones(1),
    "expanded_cpu": lambda lib: M(lib, 3) + lib.ones(1).expand(3),
    "expanded_cpu_first": lambda lib: lib.ones(1).expand(3) * M(lib, 3),
    "same_shape_cpu": lambda lib: M(lib, 3) - lib.ones(3),
    "int_cpu_promoted": lambda lib: M(lib, 3) + lib.ones(3, dtype=lib.int64),
    "bool_cpu_promoted": lambda lib: M(lib, 3) == lib.ones(3, dtype=lib.bool),
    "cpu_first_meta_0d": lambda lib: lib.ones(3) + M(lib),
    "cat": lambda lib: lib.cat([M(lib, 3), lib.ones(3)]),
}


@pytest.mark.parametrize("name", MIXED)
def test_cpu_operands_beside_meta_raise_as_torch(name):
    assert_raises_like_torch(MIXED[name])


ALLOWED = {
    "0d_float": lambda lib: M(lib, 3) + lib.tensor(2.0),
    "0d_first": lambda lib: lib.tensor(2.0) * M(lib, 2, 3),
    "0d_int": lambda lib: M(lib, 3) + lib.tensor(2),
    "0d_float64": lambda lib: M(lib, 3) + lib.tensor(2.0, dtype=lib.float64),
    "0d_where_condition": lambda lib: lib.where(lib.tensor(True), M(lib, 3), M(lib, 3)),
    "0d_clamp_bounds": lambda lib: lib.clamp(M(lib, 3), lib.tensor(0.0), lib.tensor(1.0)),
    "0d_lerp_weight": lambda lib: lib.lerp(M(lib, 3), M(lib, 3), lib.tensor(0.5)),
    "0d_in_place": lambda lib: M(lib, 3).mul_(lib.tensor(2.0)),
    "cpu_indices": lambda lib: M(lib, 3)[lib.tensor([0, 2])],
    "cross_entropy": lambda lib: lib.nn.functional.cross_entropy(
        M(lib, 2, 3), M(lib, 2, dtype="int64")
    ),
}


@pytest.mark.parametrize("name", ALLOWED)
def test_cpu_scalars_join_meta_tensors_as_torch(name):
    ours, theirs = ALLOWED[name](staged), ALLOWED[name](torch)
    assert ours.is_meta and theirs.is_meta
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype)[7:] == str(theirs.dtype)[6:]


@pytest.mark.parametrize("name", ["relu", "exp", "sin", "abs", "sigmoid", "tanh", "sqrt", "log"])
def test_unary_ops_given_a_python_number_raise_torchs_type_error(name):
    with pytest.raises(TypeError) as want:
        getattr(torch, name)(3)
    with pytest.raises(TypeError) as got:
        getattr(staged, name)(3)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "bool"])
def test_bfloat16_casts_to_integers_as_torchs_whatever_ml_dtypes_does(dtype):
    """ml_dtypes 0.7 casts a bfloat16 NaN, infinity or out-of-range value to 0 (0.6 as
    float32's cast): the cast goes through float32, as torch's."""
    v = [math.nan, math.inf, -math.inf, 3e9, -3e9, 1.5, -2.5, 300.0]
    want = torch.tensor(v).bfloat16().to(getattr(torch, dtype))
    with np.errstate(invalid="ignore"):
        got = staged.tensor(v).bfloat16().to(getattr(staged, dtype))
    assert got.tolist() == want.tolist()
