"""``x.view(dtype)`` of another dtype (its bits read as that dtype) and storages mapped from
files: what safetensors' ``safe_open(..., framework="pt")`` does to load a checkpoint
(``UntypedStorage.from_file``, a byte slice, ``asarray(.., dtype=uint8).view(dtype=..)``),
as torch's."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import staged
from tests.checks import raises_like_torch

PAIRS = [
    ("float32", "int32"),
    ("float32", "float16"),
    ("float32", "float64"),
    ("float64", "uint8"),
    ("int16", "bfloat16"),
    ("bfloat16", "int16"),
    ("uint8", "float32"),
    ("bool", "uint8"),
    ("complex64", "float64"),
]


@pytest.mark.parametrize("src,dst", PAIRS)
def test_view_dtype_reads_the_bits_as_torch(src, dst):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 256, 2 * 3 * 16, dtype=np.uint8)

    def run(T):
        x = T.tensor(bits).view(getattr(T, src)) if src != "uint8" else T.tensor(bits)
        x = x.reshape(2, 3, -1)
        return x.view(getattr(T, dst))

    ours, theirs = run(staged), run(torch)
    assert ours.shape == theirs.shape and str(ours.dtype)[7:] == str(theirs.dtype)[6:]
    assert ours.stride() == theirs.stride()
    np.testing.assert_array_equal(
        ours.numpy().view(np.uint8),
        theirs.numpy().view(np.uint8)
        if dst != "bfloat16"
        else theirs.view(torch.int16).numpy().view(np.uint8),
    )


def test_view_dtype_is_a_view_outside_the_graph():
    def run(T):
        v = T.zeros(4, requires_grad=True)
        iv = v.detach().view(T.int32)
        iv[0] = 1065353216  # 1.0's bits
        w = v.view(T.float16)
        return v.tolist(), iv._version, w.requires_grad, w.grad_fn is None, w.shape

    assert run(staged) == run(torch)


@pytest.mark.parametrize(
    "make",
    [
        lambda T: T.arange(6, dtype=T.uint8).view(T.float32),
        lambda T: T.arange(6, dtype=T.uint8)[1:5].view(T.float32),
        lambda T: T.arange(6, dtype=T.uint8).reshape(2, 3).t().view(T.int16),
        lambda T: T.tensor(1.0).view(T.float16),
        lambda T: T.ones(2, 3)[:, :2].view(T.float64),
        lambda T: T.ones(2, 4).t().view(T.float16),
    ],
)
def test_view_dtype_refusals_as_torch(make):
    raises_like_torch(make, "different element sizes")


def test_safetensors_reads_a_file_as_torch(tmp_path):
    # safe_open's torch path: map the file, slice a tensor's bytes, view them as its dtype
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    h = np.array([1.5, -2.0], dtype=np.float16)
    path = tmp_path / "f.bin"
    path.write_bytes(b"header--" + w.tobytes() + h.tobytes())

    def run(T):
        storage = T.UntypedStorage.from_file(str(path), shared=False, nbytes=path.stat().st_size)
        storage = storage.untyped()

        def get(start, stop, dtype, shape):
            raw = T.asarray(storage[start:stop], dtype=T.uint8)
            return raw.view(dtype=dtype).reshape(shape)

        a = get(8, 56, T.float32, [3, 4])
        b = get(56, 60, T.float16, [2])
        a[0, 0] = 9.0  # copy on write: the file keeps its bytes
        return a.tolist(), b.tolist(), storage.nbytes(), storage[0], T.is_storage(storage)

    assert run(staged) == run(torch)
    assert path.read_bytes()[8:12] == w.tobytes()[:4]


def test_module_non_persistent_buffers_set_is_torchs_name():
    for T in (staged, torch):
        m = T.nn.Module()
        m.register_buffer("a", T.ones(1), persistent=False)
        m.register_buffer("b", T.ones(1))
        assert m._non_persistent_buffers_set == {"a"}


def test_view_dtype_compiles_for_one_width_and_is_refused_by_name_otherwise():
    code = """
import numpy as np, staged
@staged.compile
def f(x, y, h, b, i):
    return (x.view(staged.int32) + 1, y.view(staged.float64) * 2, h.view(staged.int16),
            b.view(staged.int16), i.view(staged.uint8))
x = staged.tensor([1.5, -2.0, 3.25])
y = staged.tensor([1.0, -3.5]).double().view(staged.int64)
h = staged.tensor([1.0, -0.5]).half()
b = staged.tensor([1.0, 3.0]).bfloat16()
i = staged.tensor([-1, 5, -128], dtype=staged.int8)
want = (x.view(staged.int32) + 1, y.view(staged.float64) * 2, h.view(staged.int16),
        b.view(staged.int16), i.view(staged.uint8))
for got, w in zip(f(x, y, h, b, i), want):
    assert got.dtype is w.dtype and np.array_equal(got.numpy(), w.numpy()), (got, w)
@staged.compile
def g(x):
    return x.view(staged.float16)
try:
    g(x)
except Exception as e:
    print(type(e).__name__, e)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "LoweringError view_dtype on float32" in r.stdout, r.stdout
    assert "another width runs eagerly only" in r.stdout, r.stdout


@pytest.mark.parametrize("in_dims,dtype", [(0, "float16"), (1, "int32"), (0, "float64")])
def test_view_dtype_under_vmap_as_torch(in_dims, dtype):
    # (a column, in_dims=1, viewed as a dtype of another size has stride(-1) != 1: staged
    # refuses it, as torch does outside vmap; torch's vmap takes it)
    x = np.arange(24, dtype=np.float32).reshape(4, 6) / 7

    def run(T):
        f = T.vmap(lambda t: t.view(getattr(T, dtype)), in_dims=in_dims)
        return f(T.tensor(x)).double().numpy()

    np.testing.assert_array_equal(run(staged), run(torch))
