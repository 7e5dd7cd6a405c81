"""torch names staged lacked, each checked against torch 2.13: ``return_types`` (the classes
the ops return), ``functional`` (torch.functional's names), ``chain_matmul`` (deprecated,
warned once), the top-level ATen forms ``kl_div binary_cross_entropy_with_logits
batch_norm constant_pad_nd fill`` and ``set_flush_denormal``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from staged._where import _WARNED_ONCE


def _pair(*shapes, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return [torch.tensor(a) for a in arrays], [staged.tensor(a) for a in arrays]


def _close(ours, theirs, tol=1e-12):
    assert str(ours.dtype).removeprefix("staged.") == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)
    assert tuple(ours.shape) == tuple(theirs.shape)


# --- return_types -----------------------------------------------------------------------------
def _spd(L):
    A = L.tensor(np.random.default_rng(1).standard_normal((3, 3)))
    return A @ A.mT + L.eye(3, dtype=L.float64)


RESULTS = {
    "max": lambda L, x: L.max(x, 1),
    "min": lambda L, x: L.min(x, 1),
    "sort": lambda L, x: L.sort(x),
    "topk": lambda L, x: L.topk(x, 2),
    "kthvalue": lambda L, x: L.kthvalue(x, 2),
    "mode": lambda L, x: L.mode(x),
    "median": lambda L, x: L.median(x, 1),
    "nanmedian": lambda L, x: L.nanmedian(x, 1),
    "aminmax": lambda L, x: L.aminmax(x),
    "cummax": lambda L, x: L.cummax(x, 1),
    "cummin": lambda L, x: L.cummin(x, 1),
    "histogram": lambda L, x: L.histogram(x.flatten().float()),
    "frexp": lambda L, x: L.frexp(x),
    "slogdet": lambda L, x: L.slogdet(_spd(L)),
    "linalg_slogdet": lambda L, x: L.linalg.slogdet(_spd(L)),
    "qr": lambda L, x: L.qr(_spd(L)),
    "linalg_qr": lambda L, x: L.linalg.qr(_spd(L)),
    "svd": lambda L, x: L.svd(_spd(L)),
    "linalg_svd": lambda L, x: L.linalg.svd(_spd(L)),
    "linalg_eigh": lambda L, x: L.linalg.eigh(_spd(L)),
    "linalg_eig": lambda L, x: L.linalg.eig(_spd(L)),
    "linalg_lu": lambda L, x: L.linalg.lu(_spd(L)),
    "linalg_lu_factor": lambda L, x: L.linalg.lu_factor(_spd(L)),
    "linalg_lu_factor_ex": lambda L, x: L.linalg.lu_factor_ex(_spd(L)),
    "lu_unpack": lambda L, x: L.lu_unpack(*L.linalg.lu_factor(_spd(L))),
    "linalg_inv_ex": lambda L, x: L.linalg.inv_ex(_spd(L)),
    "linalg_solve_ex": lambda L, x: L.linalg.solve_ex(_spd(L), _spd(L)),
    "linalg_cholesky_ex": lambda L, x: L.linalg.cholesky_ex(_spd(L)),
    "linalg_ldl_factor": lambda L, x: L.linalg.ldl_factor(_spd(L)),
    "linalg_ldl_factor_ex": lambda L, x: L.linalg.ldl_factor_ex(_spd(L)),
    "linalg_lstsq": lambda L, x: L.linalg.lstsq(_spd(L), _spd(L)),
}


@pytest.mark.filterwarnings("ignore:torch.qr is deprecated")
@pytest.mark.parametrize("name", RESULTS)
def test_return_types_are_the_classes_the_ops_return(name):
    (tx,), (sx,) = _pair((3, 4))
    theirs, ours = RESULTS[name](torch, tx), RESULTS[name](staged, sx)
    assert isinstance(theirs, getattr(torch.return_types, name))
    assert isinstance(ours, getattr(staged.return_types, name))
    assert ours._fields == type(theirs).__match_args__  # torch's field names, in order
    # printed as torch's, a field per line (``max(values=..., indices=...)`` before)
    lines = [line.split("=")[0] for line in repr(theirs).splitlines() if "=" in line[:20]]
    assert [line.split("=")[0] for line in repr(ours).splitlines() if "=" in line[:20]] == lines
    assert repr(ours).startswith(f"staged.return_types.{type(ours).__name__}(\n{lines[0]}=")


def test_return_types_names_are_torchs_but_the_out_classes():
    ours = set(staged.return_types.__all__)
    theirs = {n for n in torch.return_types.__all__ if not n.endswith("_out")}
    assert theirs - ours == {
        "pytree_register_structseq",
    }
    assert ours <= theirs
    assert staged.return_types.max in staged.return_types.all_return_types


def test_return_types_rebuild_as_namedtuples():
    v, i = staged.max(staged.tensor([[1.0, 3.0]]), 1)
    r = staged.return_types.max(v, i)
    assert r.values is v and r.indices is i


# --- functional -------------------------------------------------------------------------------
def test_functional_names_are_the_top_level_functions():
    assert set(staged.functional.__all__) == set(torch.functional.__all__)
    for n in staged.functional.__all__:
        assert getattr(staged.functional, n) is getattr(staged, n), n


def test_functional_einsum_and_unique_match_torch():
    (ta, tb), (sa, sb) = _pair((2, 3), (3, 4))
    _close(
        staged.functional.einsum("ij,jk->ik", sa, sb), torch.functional.einsum("ij,jk->ik", ta, tb)
    )
    x = [3, 1, 3, 2]
    ours = staged.functional.unique(staged.tensor(x), return_counts=True)
    theirs = torch.functional.unique(torch.tensor(x), return_counts=True)
    assert [t.tolist() for t in ours] == [t.tolist() for t in theirs]


# --- chain_matmul -----------------------------------------------------------------------------
def _chain(L, *xs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = L.chain_matmul(*xs)
    return out, [str(m.message) for m in w]


def test_chain_matmul_is_multi_dot_and_warns_once():
    (ta, tb, tc), (sa, sb, sc) = _pair((2, 3), (3, 4), (4, 5))
    _WARNED_ONCE.clear()
    theirs, _ = _chain(torch, ta, tb, tc)
    ours, said = _chain(staged, sa, sb, sc)
    _close(ours, theirs)
    assert said == [
        "torch.chain_matmul is deprecated and will be removed in a future PyTorch release. "
        "Use torch.linalg.multi_dot instead, which accepts a list of two or more tensors "
        "rather than multiple parameters."
    ]
    assert _chain(staged, sa, sb)[1] == []  # once a process, as torch's TORCH_WARN_ONCE


def test_chain_matmul_gradients_and_one_matrix():
    (ta, tb), (sa, sb) = _pair((2, 3), (3, 4))
    for t in (ta, tb, sa, sb):
        t.requires_grad_()
    _chain(torch, ta, tb)[0].sum().backward()
    _chain(staged, sa, sb)[0].sum().backward()
    _close(sa.grad, ta.grad)
    _close(sb.grad, tb.grad)
    one = _chain(staged, sa)[0]
    assert one is not sa and one.grad_fn.name() == _chain(torch, ta)[0].grad_fn.name()


@pytest.mark.parametrize("args", [(), ((3,),), ((2, 3), (3,))])
def test_chain_matmul_errors(args):
    errors = []
    for L in (torch, staged):
        with pytest.raises(RuntimeError) as e:
            _chain(L, *(L.ones(*s) for s in args))
        errors.append(str(e.value).split(": ", 1)[-1] if L is staged else str(e.value))
    assert errors[0] == errors[1]
    assert not hasattr(staged.Tensor, "chain_matmul")


# --- top-level ATen forms of nn.functional's ----------------------------------------------------
def _grads(L, fn, *arrays):
    ts = [L.tensor(a, requires_grad=True) for a in arrays]
    out = fn(L, *ts)
    out.sum().backward()
    return out, [t.grad for t in ts]


def _compare(fn, *arrays, tol=1e-12):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ours, ours_g = _grads(staged, fn, *arrays)
    theirs, theirs_g = _grads(torch, fn, *arrays)
    _close(ours, theirs, tol)
    for a, b in zip(ours_g, theirs_g):
        _close(a, b, tol)
    return [str(m.message) for m in w]


RNG = np.random.default_rng(3)
LOGP = np.log(RNG.dirichlet(np.ones(4), size=3))
P = RNG.dirichlet(np.ones(4), size=3)


@pytest.mark.parametrize("reduction", [0, 1, 2, 7])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_integer_reduction(reduction, log_target):
    target = np.log(P) if log_target else P
    said = _compare(lambda L, x, y: L.kl_div(x, y, reduction, log_target=log_target), LOGP, target)
    assert said == []  # no warning for "mean": that is F.kl_div's


def test_default_reduction_is_torchs_none():
    """torch 2.13's bindings parse the schema's default ``reduction=Mean`` as 0."""
    _compare(lambda L, x, y: L.kl_div(x, y), LOGP, P)
    _compare(lambda L, x, y: L.binary_cross_entropy_with_logits(x, y), LOGP, P)


def test_kl_div_reduction_must_be_an_int():
    for L in (torch, staged):
        with pytest.raises(
            TypeError, match=r"kl_div\(\): argument 'reduction' \(position 3\) must be int, not str"
        ):
            L.kl_div(L.zeros(2), L.zeros(2), "mean")


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_binary_cross_entropy_with_logits(reduction):
    y = (RNG.random((3, 4)) > 0.5).astype(np.float64)
    w, pw = RNG.random(4), RNG.random(4) + 0.5
    _compare(
        lambda L, x: L.binary_cross_entropy_with_logits(
            x, L.tensor(y), L.tensor(w), L.tensor(pw), reduction
        ),
        RNG.standard_normal((3, 4)),
    )


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_aten_order(training):
    x, w, b = RNG.standard_normal((4, 3, 2)), RNG.random(3), RNG.standard_normal(3)
    rm, rv = RNG.standard_normal(3), RNG.random(3) + 0.5
    stats = {}

    def fn(L, x, w, b):
        m, v = L.tensor(rm), L.tensor(rv)
        stats[L] = (m, v)
        return L.batch_norm(x, w, b, m, v, training, 0.2, 1e-3, False)

    _compare(fn, x, w, b, tol=1e-10)
    for a, t in zip(stats[staged], stats[torch]):
        _close(a, t)


def test_batch_norm_needs_every_argument():
    for L in (torch, staged):
        with pytest.raises(TypeError):
            L.batch_norm(L.ones(2, 3), None, None, None, None, True, 0.1, 1e-5)


@pytest.mark.parametrize("pad,value", [([1, 1], 0), ([1, -1, 0, 2], 2.5), ((2, 0), -1)])
def test_constant_pad_nd(pad, value):
    _compare(lambda L, x: L.constant_pad_nd(x, pad, value), RNG.standard_normal((2, 3)))
    theirs = torch.constant_pad_nd(torch.ones(2, 2, dtype=torch.long), pad, value)
    ours = staged.constant_pad_nd(staged.ones(2, 2, dtype=staged.long), pad, value)
    assert ours.tolist() == theirs.tolist() and ours.dtype is staged.long


@pytest.mark.parametrize("pad", [[1], [1, 1, 1, 1, 1, 1]])
def test_constant_pad_nd_errors(pad):
    with pytest.raises(RuntimeError) as theirs:
        torch.constant_pad_nd(torch.ones(2, 2), pad)
    with pytest.raises(
        RuntimeError, match=str(theirs.value).replace("(", r"\(").replace(")", r"\)")
    ):
        staged.constant_pad_nd(staged.ones(2, 2), pad)


# --- fill -------------------------------------------------------------------------------------
def test_fill_is_fill_of_a_copy():
    for value in (2.7, torch.tensor(3.5)):
        for dtype in ("float32", "int32"):
            t_in = torch.ones(3, dtype=getattr(torch, dtype))
            s_in = staged.ones(3, dtype=getattr(staged, dtype))
            v = value if isinstance(value, float) else staged.tensor(value.item())
            theirs, ours = torch.fill(t_in, value), staged.fill(s_in, v)
            assert ours.tolist() == theirs.tolist() and ours.dtype is s_in.dtype
            assert s_in.tolist() == [1, 1, 1]  # the input is unchanged
    assert not hasattr(staged.Tensor, "fill")


def test_fill_gradients_and_grad_fn():
    for L in (torch, staged):
        a, v = L.ones(3, requires_grad=True), L.tensor(2.0, requires_grad=True)
        y = L.fill(a, v)
        y.sum().backward()
        assert a.grad.tolist() == [0, 0, 0] and v.grad.item() == 3
        assert y.grad_fn.name() == "FillBackward1"
        assert L.fill(a, 1.0).grad_fn.name() == "FillBackward0"


def test_fill_value_tensor_must_be_0d():
    for L in (torch, staged):
        with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
            L.fill(L.ones(2), L.ones(2))


# --- set_flush_denormal -----------------------------------------------------------------------
def test_set_flush_denormal_answers_false_and_keeps_denormals():
    assert staged.set_flush_denormal(True) is False
    assert staged.tensor([1e-323], dtype=staged.float64).item() != 0.0
    assert staged.set_flush_denormal(False) is False


@pytest.mark.parametrize("mode", [1, None, 1.0])
def test_set_flush_denormal_takes_a_bool(mode):
    with pytest.raises(RuntimeError) as theirs:
        torch.set_flush_denormal(mode)
    with pytest.raises(RuntimeError) as ours:
        staged.set_flush_denormal(mode)
    assert str(ours.value) == str(theirs.value)


def test_return_types_pickle_to_the_same_class():
    """The named tuples are defined as staged.return_types' members, so pickle (and
    staged.save) finds them again (it raised PicklingError)."""
    import pickle

    x = staged.tensor([[1.0, 3.0], [2.0, 0.5]])
    for result in (staged.max(x, 1), staged.median(x, 1), staged.linalg.svd(x), staged.frexp(x)):
        back = pickle.loads(pickle.dumps(result))
        assert type(back) is type(result) and type(result).__module__ == "staged.return_types"
        for a, b in zip(back, result):
            assert a.tolist() == b.tolist()
