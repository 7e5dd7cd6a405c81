"""Index plans and permutations made once per (index or dims, shape) (``_PLANS`` in
staged/eager/ops/indexing.py, ``_PERMS`` in staged/eager/ops/shape.py): an index or a
dims list seen before, on another shape or with entries of another type that compare
equal (``1.0 == 1``, ``True == 1``), or with integer tensors of other values, gives
torch's result, grad_fn, gradient or error, as the first time."""

import numpy as np
import pytest
import torch

import staged
from tests.checks import message


def _outcome(lib, shape, call):
    x = lib.arange(float(np.prod(shape))).reshape(shape).requires_grad_()
    try:
        y = call(x)
    except Exception as e:  # noqa: BLE001  (the exception is the result under test)
        return ("raises", type(e).__name__, message(e).replace("permute(sparse_coo)", "permute()"))
    (y * lib.arange(float(y.numel())).reshape(y.shape)).sum().backward()
    return ("value", y.tolist(), y.grad_fn.name(), x.grad.tolist(), y._base is x)


def _same_as_torch(shape, call, type_only=False):
    """``call`` on a tensor of ``shape`` does what it does in torch (with ``type_only``,
    an error of torch's type: torch's argument parser words its messages its own way)."""
    got, want = _outcome(staged, shape, call), _outcome(torch, shape, call)
    assert got[:2] == want[:2] if type_only else got == want


def _ix(x, data):
    """An int64 index tensor of ``x``'s library."""
    return x.new_tensor(data).long()


INDICES = {
    "x[:, 1:]": lambda x: x[:, 1:],
    "x[1:]": lambda x: x[1:],
    "x[(slice(1, None),)]": lambda x: x[(slice(1, None),)],
    "x[1, :]": lambda x: x[1, :],
    "x[np.int64(1), :]": lambda x: x[np.int64(1), :],
    "x[1.0, :]": lambda x: x[1.0, :],
    "x[True, :]": lambda x: x[True, :],
    "x[False, :]": lambda x: x[False, :],
    "x[None, 1]": lambda x: x[None, 1],
    "x[..., 1]": lambda x: x[..., 1],
    "x[1, ..., None]": lambda x: x[1, ..., None],
    "x[:, :]": lambda x: x[:, :],
    "x[...]": lambda x: x[...],
    "x[2, :]": lambda x: x[2, :],
    "x[-3, :]": lambda x: x[-3, :],
    "x[:, 1:2.0]": lambda x: x[:, 1:2.0],
    "x[:, np.int64(1):]": lambda x: x[:, np.int64(1) :],
    "x[:, ::2]": lambda x: x[:, ::2],
    "x[:, 10**30:]": lambda x: x[:, 10**30 :],
    "x[1, 1, 1]": lambda x: x[1, 1, 1],
    "x[:, [0]]": lambda x: x[:, [0]],
    # integer tensors: the plan is kept, the tensors are checked and combined every call
    "x[idx]": lambda x: x[_ix(x, [1, -1, 0, 1])],
    "x[:, idx]": lambda x: x[:, _ix(x, [1, -1, 0, 1])],  # (4, 1, 3): out of range
    "x[idx, 1:]": lambda x: x[_ix(x, [1, 0, 1]), 1:],
    "x[..., idx2d]": lambda x: x[..., _ix(x, [[0, 2], [1, 0]])],
    "x[idx32]": lambda x: x[_ix(x, [1, -2]).int()],
    "x[idx, idx]": lambda x: x[_ix(x, [0, 1]), _ix(x, [[1], [-1]])],
    "x[idx, None, idx]": lambda x: x[_ix(x, [0, 1]), None, _ix(x, [0, -1])],  # not adjacent
    "x[idx, idx] mismatch": lambda x: x[_ix(x, [0, 1]), _ix(x, [0, 1, 0])],
}


@pytest.mark.parametrize("index", INDICES)
def test_an_index_seen_before_gives_torchs_result(index):
    for _ in range(2):  # the second round finds the plans made
        for shape in ((3, 4), (2, 5), (4, 1, 3)):
            _same_as_torch(shape, INDICES[index])


def test_a_write_through_a_planned_index_matches_torch():
    for _ in range(2):
        got, want = (lib.zeros(3, 4) for lib in (staged, torch))
        for x in (got, want):
            x[:, 1:] = 2.0
            x[1, :] = x[0, :] + 1
            x[:, 1:][0] = 5.0
        assert got.tolist() == want.tolist()


def test_a_kept_tensor_plan_reads_each_tensor():
    """Integer tensors of the shapes of a kept plan's, other values: torch's values,
    gradients and errors (the bounds of each tensor checked, in order)."""
    calls = [
        lambda x: x[:, _ix(x, [3, 0])],
        lambda x: x[:, _ix(x, [-4, 2])],
        lambda x: x[:, _ix(x, [4, 0])],
        lambda x: x[:, _ix(x, [1, -5])],
        lambda x: x[_ix(x, [2, 0]), _ix(x, [3, 1])],
        lambda x: x[_ix(x, [3, 0]), _ix(x, [4, 1])],
        lambda x: x[_ix(x, [2, 0]), _ix(x, [4, 1])],
    ]
    for call in calls:
        _same_as_torch((3, 4), call)
    got, want = (lib.zeros(3, 4) for lib in (staged, torch))  # and writes
    for x in (got, want):
        x[:, _ix(x, [1, 3])] = 1.0
        x[:, _ix(x, [0, 3])] += 2.0
        x.index_put_((_ix(x, [2, 2]), _ix(x, [1, 1])), x.new_ones(2), accumulate=True)
    assert got.tolist() == want.tolist()


DIMS = {
    "(1, 0)": lambda x: x.permute(1, 0),
    "(-1, 0)": lambda x: x.permute(-1, 0),
    "((1, 0),)": lambda x: x.permute((1, 0)),
    "([1, 0],)": lambda x: x.permute([1, 0]),
    "dims=(1, 0)": lambda x: x.permute(dims=(1, 0)),
    "(np.int64(1), 0)": lambda x: x.permute(np.int64(1), 0),
    "(1.0, 0)": lambda x: x.permute(1.0, 0),
    "(1, 1)": lambda x: x.permute(1, 1),
    "(2, 0)": lambda x: x.permute(2, 0),
    "(0,)": lambda x: x.permute(0),
    "(2, 0, 1)": lambda x: x.permute(2, 0, 1),
    "T": lambda x: x.T if x.ndim == 2 else x.permute(tuple(range(x.ndim - 1, -1, -1))),
    "t": lambda x: x.t(),
    "transpose(0, -1)": lambda x: x.transpose(0, -1),
    "transpose(0, 1)": lambda x: x.transpose(0, 1),
    "transpose(0, 1.0)": lambda x: x.transpose(0, 1.0),
    "transpose(0, 1.5)": lambda x: x.transpose(0, 1.5),
    "transpose(0, 3)": lambda x: x.transpose(0, 3),
}


# dims of another type than int, on a 2-d tensor (of another rank staged checks the
# count first): torch's TypeError, worded by its argument parser
PARSER_ERRORS = {"(1.0, 0)", "transpose(0, 1.0)", "transpose(0, 1.5)"}


@pytest.mark.parametrize("dims", DIMS)
def test_dims_seen_before_give_torchs_result(dims):
    shapes = ((3, 4),) if dims in PARSER_ERRORS else ((3, 4), (2, 3, 4), (5,), ())
    for _ in range(2):  # the second round finds (1, 0) and (0, 1) made
        for shape in shapes:
            _same_as_torch(shape, DIMS[dims], type_only=dims in PARSER_ERRORS)


def test_entries_equal_to_ints_after_the_ints_themselves():
    """A float (or NumPy int) entry equal to an int seen just before finds no plan made for
    the int: it raises (or works) as in torch."""
    for shape in ((3, 4), (2, 3, 4)):
        for call in (INDICES["x[1, :]"], INDICES["x[1.0, :]"], INDICES["x[np.int64(1), :]"]):
            _same_as_torch(shape, call)
    for name in ("(1, 0)", "(1.0, 0)", "(np.int64(1), 0)", "transpose(0, 1)", "transpose(0, 1.0)"):
        _same_as_torch((3, 4), DIMS[name], type_only=name in PARSER_ERRORS)
