"""Leftover differences from torch 2.13, each checked against torch: fills of an
out-of-range float16/bfloat16 value, bool sizes of ``view``/``reshape``, decomposition
results that own their memory, ``consume_prefix_in_state_dict_if_present`` and loading a
checkpoint whose dtype staged lacks."""

from __future__ import annotations

import collections
import io
import pickle
import zipfile

import numpy as np
import pytest
import torch

import staged
import staged.nn.modules.utils as staged_utils
import torch.nn.modules.utils as torch_utils
from tests.checks import message


def _outcome(fn, lib):
    """``fn(lib)``'s values (as a list), or its exception's type and message."""
    try:
        out = fn(lib)
    except Exception as e:  # the outcome compared, whatever it is
        return type(e).__name__, message(e)
    return "ok", np.asarray(out.float().tolist()).tolist()


def _same_outcome(fn):
    ours, theirs = _outcome(fn, staged), _outcome(fn, torch)
    assert ours == theirs


# --- fill_ / full of an out-of-range value ------------------------------------------------------
_FILLS = {
    "fill_": lambda lib, n, d, v: lib.zeros(n, dtype=d).fill_(v),
    "fill_ of a view": lambda lib, n, d, v: lib.zeros(n + 1, dtype=d)[1:].fill_(v),
    "fill_ recorded": lambda lib, n, d, v: (
        lib.zeros(n, dtype=d, requires_grad=d.is_floating_point).clone().fill_(v)
    ),
    "fill_ of a 0-d tensor": lambda lib, n, d, v: lib.zeros(n, dtype=d).fill_(lib.tensor(v)),
    "full": lambda lib, n, d, v: lib.full((n,), v, dtype=d),
    "full_like": lambda lib, n, d, v: lib.full_like(lib.zeros(n, dtype=d), v),
    "new_full": lambda lib, n, d, v: lib.zeros(1, dtype=d).new_full((n,), v),
    "masked_fill_": lambda lib, n, d, v: lib.zeros(n, dtype=d).masked_fill_(
        lib.ones(n, dtype=lib.bool), v
    ),
    "index_fill_": lambda lib, n, d, v: lib.zeros(n, dtype=d).index_fill_(0, lib.arange(n), v),
}


@pytest.mark.parametrize("how", list(_FILLS))
@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        ("float16", 1e6),
        ("float16", 65520.0),
        ("float16", -1e39),
        ("float16", float("inf")),
        ("float16", 300),
        ("bfloat16", 1e39),
        ("bfloat16", 1e6),
        ("int8", 300),
        ("int8", 1e6),
    ],
)
def test_filling_an_out_of_range_value_raises_or_saturates_as_torch(how, n, dtype, value):
    # torch refuses a float16/bfloat16 value beyond range, except when filling exactly one
    # element (its scalar_fill saturates to inf) or from a 0-d tensor
    fill = _FILLS[how]
    _same_outcome(lambda lib: fill(lib, n, getattr(lib, dtype), value))


def test_fill_of_float16_beyond_range_raises_torchs_error():
    with pytest.raises(RuntimeError) as e:
        staged.zeros(2, dtype=staged.float16).fill_(1e6)
    assert message(e.value) == "value cannot be converted to type c10::Half without overflow"


@pytest.mark.parametrize(
    ("size", "value"), [((-1,), "a"), ((-1,), 1e6), ((2,), "a"), ((), 1e6), ((0,), 1e6)]
)
def test_full_checks_the_value_then_the_size_as_torch(size, value):
    _same_outcome(lambda lib: lib.full(size, value, dtype=lib.float16))


# --- bool sizes -----------------------------------------------------------------------------------
_BOOL_SIZES = {
    "view(True, 8)": lambda x: x.view(True, 8),
    "view(True, 8, 1)": lambda x: x.view(True, 8, 1),
    "view(True, 8.0)": lambda x: x.view(True, 8.0),
    "view(False, 8)": lambda x: x.view(False, 8),
    "view(True)": lambda x: x.view(True),
    "view((True, 8))": lambda x: x.view((True, 8)),
    "view([True, 8])": lambda x: x.view([True, 8]),
    "view((True,))": lambda x: x.view((True,)),
    "view(size=(True, 8))": lambda x: x.view(size=(True, 8)),
    "view(size=[True, 8])": lambda x: x.view(size=[True, 8]),
    "reshape(True, 8)": lambda x: x.reshape(True, 8),
    "reshape(True, 8, 1)": lambda x: x.reshape(True, 8, 1),
    "reshape(True)": lambda x: x.reshape(True),
    "reshape((True, 8))": lambda x: x.reshape((True, 8)),
    "reshape([True, 8])": lambda x: x.reshape([True, 8]),
    "reshape(shape=(True, 8))": lambda x: x.reshape(shape=(True, 8)),
    "reshape(shape=[True, 8])": lambda x: x.reshape(shape=[True, 8]),
    # a bool after the first size is read as 0 or 1 by torch's parser
    "view(8, True)": lambda x: x.view(8, True),
    "reshape((8, True))": lambda x: x.reshape((8, True)),
}


@pytest.mark.parametrize("how", list(_BOOL_SIZES))
def test_a_bool_first_size_is_refused_as_torch(how):
    fn = _BOOL_SIZES[how]
    _same_outcome(lambda lib: fn(lib.zeros(8)))


def test_view_of_a_bool_size_raises_type_error():
    with pytest.raises(TypeError):
        staged.zeros(8).view(True, 8)
    with pytest.raises(TypeError):
        staged.zeros(8).reshape(True, 8)


# --- results of their own memory --------------------------------------------------------------------
def _stored(t, path) -> int:
    """How many bytes ``save`` writes for ``t``: the size of its storage record."""
    staged.save(t, path)
    with zipfile.ZipFile(path) as zf:
        return sum(i.file_size for i in zf.infolist() if "/data/" in i.filename)


_A = np.random.default_rng(0).standard_normal((20, 30)).astype(np.float32)
_S = (lambda m: m @ m.T + 6 * np.eye(6, dtype=np.float32))(
    np.random.default_rng(1).standard_normal((6, 6)).astype(np.float32)
)
_RESULTS = {
    "svd.U": lambda lib, A, S: lib.linalg.svd(A).U,
    "svd.S": lambda lib, A, S: lib.linalg.svd(A).S,
    "svd.Vh": lambda lib, A, S: lib.linalg.svd(A).Vh,
    "svd reduced S": lambda lib, A, S: lib.linalg.svd(A, full_matrices=False).S,
    "batched svd S": lambda lib, A, S: lib.linalg.svd(A.expand(2, 20, 30)).S,
    "qr.Q": lambda lib, A, S: lib.linalg.qr(A.T).Q,
    "qr.R": lambda lib, A, S: lib.linalg.qr(A.T).R,
    "complete qr.R": lambda lib, A, S: lib.linalg.qr(A.T, mode="complete").R,
    "eigh.eigenvalues": lambda lib, A, S: lib.linalg.eigh(S).eigenvalues,
    "eigh.eigenvectors": lambda lib, A, S: lib.linalg.eigh(S).eigenvectors,
    "eig.eigenvalues": lambda lib, A, S: lib.linalg.eig(S).eigenvalues,
    "eig.eigenvectors": lambda lib, A, S: lib.linalg.eig(S).eigenvectors,
    "slogdet.sign": lambda lib, A, S: lib.linalg.slogdet(S).sign,
    "slogdet.logabsdet": lambda lib, A, S: lib.linalg.slogdet(S).logabsdet,
    "ldl_factor.LD": lambda lib, A, S: lib.linalg.ldl_factor(S).LD,
    "histc": lambda lib, A, S: lib.histc(lib.arange(10.0), bins=5),
    "histogram.hist": lambda lib, A, S: lib.histogram(lib.arange(10.0), bins=5).hist,
}


@pytest.mark.parametrize("what", list(_RESULTS))
def test_a_decompositions_result_owns_just_its_memory_as_torchs(what, tmp_path):
    fn = _RESULTS[what]
    theirs = fn(torch, torch.from_numpy(_A), torch.from_numpy(_S))
    ours = fn(staged, staged.tensor(_A), staged.tensor(_S))
    assert theirs.untyped_storage().nbytes() == theirs.numel() * theirs.element_size()
    assert _stored(ours, tmp_path / "r.pt") == theirs.untyped_storage().nbytes()


def test_lstsq_results_own_their_memory(tmp_path):
    A, B = staged.tensor(_A.T), staged.ones(30, 2)
    out = staged.linalg.lstsq(A, B, driver="gelsd")
    for name in ("solution", "residuals", "singular_values"):
        t = getattr(out, name)
        assert _stored(t, tmp_path / f"{name}.pt") == t.numel() * t.element_size(), name


# --- consume_prefix_in_state_dict_if_present --------------------------------------------------------
def _state(prefix_keys):
    d = collections.OrderedDict((k, i) for i, k in enumerate(prefix_keys))
    d._metadata = collections.OrderedDict(  # type: ignore[attr-defined]
        (k, {"version": i}) for i, k in enumerate(["", "module", "module.fc", "fc", "other"])
    )
    return d


@pytest.mark.parametrize("prefix", ["module.", "module", "fc.", "absent."])
def test_consume_prefix_in_state_dict_strips_keys_and_metadata_in_place_as_torch(prefix):
    keys = ["module.fc.weight", "bias", "module.fc.bias", "fc.weight", "modulex"]
    ours, theirs = _state(keys), _state(keys)
    assert staged_utils.consume_prefix_in_state_dict_if_present(ours, prefix) is None
    torch_utils.consume_prefix_in_state_dict_if_present(theirs, prefix)
    assert list(ours.items()) == list(theirs.items())
    assert list(ours._metadata.items()) == list(theirs._metadata.items())


def test_consume_prefix_in_a_plain_dict():
    d = {"module.w": 1, "b": 2}
    staged_utils.consume_prefix_in_state_dict_if_present(d, "module.")
    assert list(d.items()) == [("b", 2), ("w", 1)]


# --- a checkpoint of a dtype staged lacks -------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float8_e8m0fnu", "complex32"])
@pytest.mark.parametrize("weights_only", [True, False])
def test_loading_a_dtype_staged_lacks_names_it(dtype, weights_only, tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"w": torch.zeros(3, dtype=getattr(torch, dtype))}, path)
    with pytest.raises(pickle.UnpicklingError) as e:
        staged.load(path, weights_only=weights_only)
    text = message(e.value)
    assert f"dtype torch.{dtype}" in text and "staged has no such dtype" in text
    assert "_rebuild_tensor_v3" not in text


def _retyped(path, old: bytes, new: bytes) -> bytes:
    """The checkpoint at ``path`` with global ``torch.<old>`` renamed ``torch.<new>``."""
    out = io.BytesIO()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl"):
                assert b"torch\n" + old + b"\n" in data
                data = data.replace(b"torch\n" + old + b"\n", b"torch\n" + new + b"\n")
            dst.writestr(info.filename, data)
    return out.getvalue()


def test_rebuild_tensor_v3_of_a_dtype_staged_has_loads_as_torch(tmp_path):
    # torch writes _rebuild_tensor_v3 (over an untyped storage) only for dtypes without a
    # typed storage; one naming int16 loads the storage's bytes as int16
    path = tmp_path / "u16.pt"
    torch.save({"w": torch.tensor([1, 2, 40000], dtype=torch.uint16)[1:]}, path)
    data = _retyped(path, b"uint16", b"int16")
    theirs = torch.load(io.BytesIO(data))["w"]
    ours = staged.load(io.BytesIO(data))["w"]
    assert ours.dtype is staged.int16
    assert ours.tolist() == theirs.tolist() == [2, 40000 - 65536]
