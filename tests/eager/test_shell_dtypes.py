"""torch's "shell" dtypes: uint16/uint32/uint64 and the float8s, made, converted, printed,
promoted (refused), saved and loaded as torch's; compiled steps take the unsigned ones and
refuse the float8s by name."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import staged
from tests.checks import raises_like_torch

UINTS = ["uint16", "uint32", "uint64"]
FLOAT8 = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]


def _values():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    edges = [0.0, -0.0, 1.0, 448.0, 464.0, 465.0, 500.0, 57344.0, 61440.0, 1e6, 1e-9, 2.0**-10]
    edges += [np.inf, np.nan, 0.3]
    f32 = np.concatenate([bits.view(np.float32), np.array(edges + [-e for e in edges], np.float32)])
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random bits
        f64 = np.concatenate([f32.astype(np.float64), rng.standard_normal(50_000) * 300.0])
    return f32, f64


@pytest.mark.parametrize("name", FLOAT8)
def test_float8_conversions_give_torch_bits(name):
    # e4m3fn saturates (inf and anything past 448 are 448), e5m2's NaN is 0x7F/0xFF: where
    # ml_dtypes differs from torch
    for src in _values():
        theirs = torch.from_numpy(src).to(getattr(torch, name)).view(torch.uint8).numpy()
        ours = staged.tensor(src).to(getattr(staged, name)).numpy().view(np.uint8)
        np.testing.assert_array_equal(ours, theirs)
    every = np.arange(256, dtype=np.uint8)
    back = torch.from_numpy(every).view(getattr(torch, name)).double().numpy()
    ours = staged.tensor(every.view(getattr(staged, name).np)).double().numpy()
    np.testing.assert_array_equal(ours, back)  # NaNs equal too


@pytest.mark.parametrize("name", FLOAT8 + UINTS)
def test_made_converted_indexed_printed_as_torch(name):
    def run(T):
        d = getattr(T, name)
        x = T.tensor([1.0, 2.0, 200.0, 3.0]).to(d)
        y = x.clone()
        y[0] = 5
        return [
            repr(x),
            repr(T.zeros(0, dtype=d)),
            x.float().tolist(),
            x.long().tolist(),
            (x == x).tolist(),
            T.cat([x, x[1:]]).float().tolist(),
            y.float().tolist(),
            T.full((2,), 7, dtype=d).float().tolist(),
            T.tensor([-1.0, -2.5, 3.7]).to(d).double().tolist(),
            x.reshape(2, 2).t().contiguous().float().tolist(),
            T.stack([x, x]).shape == (2, 4),
            x.to(T.bfloat16).float().tolist(),
            x[2].item(),
            x.type(),
            x.element_size(),
            str(d),
            d.is_signed,
            d.is_floating_point,
            d.itemsize,
        ]

    theirs = run(torch)  # dtypes print with the package's name: compared without it
    ours = run(staged)
    assert [str(v).replace("staged.", "torch.") for v in ours] == [str(v) for v in theirs]


@pytest.mark.parametrize("name", FLOAT8)
def test_float8_finfo_is_torch(name):
    assert repr(staged.finfo(getattr(staged, name))) == repr(torch.finfo(getattr(torch, name)))


@pytest.mark.parametrize("name", UINTS)
def test_unsigned_iinfo_is_torch(name):
    assert repr(staged.iinfo(getattr(staged, name))) == repr(torch.iinfo(getattr(torch, name)))


def test_promotion_of_shell_dtypes_is_torchs():
    names = ["bool", "uint8", "int16", "int64", "float16", "bfloat16", "float32", "float64"]
    names += ["complex64", *UINTS, *FLOAT8]
    for a in UINTS + FLOAT8:
        for b in names:
            try:
                want = str(torch.promote_types(getattr(torch, a), getattr(torch, b)))
            except RuntimeError as e:
                with pytest.raises(RuntimeError) as ours:
                    staged.promote_types(getattr(staged, a), getattr(staged, b))
                assert str(ours.value) == str(e)
                continue
            got = staged.promote_types(getattr(staged, a), getattr(staged, b))
            assert str(got).replace("staged.", "torch.") == want, (a, b)
    raises_like_torch(
        lambda T: T.tensor([1.0]).to(T.float8_e4m3fn) + T.tensor([1.0]),
        "Promotion for Float8 Types is not supported",
    )


def test_requires_grad_refused_for_unsigned():
    raises_like_torch(
        lambda T: T.ones(2, dtype=T.uint16).requires_grad_(),
        "floating point dtype can require gradients",
    )


def test_saved_and_loaded_both_ways(tmp_path):
    names = UINTS + FLOAT8
    values = [1.0, 2.0, 100.0, 448.0]
    torch.save({n: torch.tensor(values).to(getattr(torch, n)) for n in names}, tmp_path / "t.pt")
    staged.save({n: staged.tensor(values).to(getattr(staged, n)) for n in names}, tmp_path / "s.pt")
    ours = staged.load(tmp_path / "t.pt")
    theirs = torch.load(tmp_path / "s.pt")  # weights only: torch's untyped storages
    for n in names:
        assert ours[n].dtype is getattr(staged, n) and theirs[n].dtype is getattr(torch, n)
        want = torch.tensor(values).to(getattr(torch, n)).double().numpy()
        np.testing.assert_array_equal(ours[n].double().numpy(), want)  # NaN: the fnuz's 448
        np.testing.assert_array_equal(theirs[n].double().numpy(), want)


def test_legacy_tensor_types_as_torch():
    for name in ["UInt16Tensor", "Float8_e4m3fnTensor"]:
        assert hasattr(staged, name) is hasattr(torch, name) is False


def test_compiled_step_takes_unsigned_refuses_float8():
    code = """
import staged
@staged.compile
def f(x, w):
    return x.float() * w, x.long(), x[1:].clone()
x = staged.tensor([1.0, 65535.0, 7.0]).to(staged.uint16)
a, b, c = f(x, staged.ones(3))
assert a.tolist() == [1.0, 65535.0, 7.0] and b.tolist() == [1, 65535, 7], (a, b)
assert c.dtype is staged.uint16 and c.tolist() == [65535, 7]
try:
    f(staged.tensor([1.0, 2.0, 3.0]).to(staged.float8_e4m3fn), staged.ones(3))
except Exception as e:
    print(type(e).__name__, e)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "compiled steps take no float8_e4m3fn tensors" in r.stdout, r.stdout
