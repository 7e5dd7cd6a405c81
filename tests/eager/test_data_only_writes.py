"""In-place writes under no_grad that take the data-only path (Note [data-only writes] in
staged/eager/ops/inplace.py): values, versions, views and errors as torch's."""

import numpy as np
import pytest
import torch

import staged


def _pair(a, requires_grad=False):
    return (
        staged.tensor(a, requires_grad=requires_grad),
        torch.tensor(a, requires_grad=requires_grad),
    )


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "complex64"])
@pytest.mark.parametrize("name", ["add_", "sub_", "mul_"])
@pytest.mark.parametrize("other", ["tensor", "float", "int"])
def test_values_and_versions(dtype, name, other):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(dtype)
    u = rng.standard_normal((3, 4)).astype(dtype)
    (s, t), (su, tu) = _pair(a, requires_grad=True), _pair(u)
    ys, yt = {"tensor": (su, tu), "float": (-0.37, -0.37), "int": (3, 3)}[other]
    with staged.no_grad():
        rs = getattr(s, name)(ys)
    with torch.no_grad():
        getattr(t, name)(yt)
    assert rs is s
    want = t.detach().numpy()
    if dtype == "float16" and other == "float":
        # torch multiplies by the double in float32; staged's out-of-place op rounds it to
        # float16 first (_operands._number), and a data-only write must agree with that
        want = np.asarray(getattr(staged, name[:-1])(staged.tensor(a), ys))
    np.testing.assert_array_equal(np.asarray(s.detach()), want)
    assert s._version == t._version == 1
    assert s.requires_grad and s.is_leaf and s.grad_fn is None


def test_same_values_as_the_recorded_path():
    rng = np.random.default_rng(1)
    a, u = rng.standard_normal((2, 5)).astype(np.float32), rng.standard_normal(5)
    fast, slow = staged.tensor(a), staged.tensor(a, requires_grad=True)
    w = staged.tensor(u.astype(np.float32))
    with staged.no_grad():
        fast.add_(staged.tensor(a * 0.5))
        fast.mul_(1.25)
    out = slow.add(staged.tensor(a * 0.5)).mul(1.25)  # the out-of-place ops, recorded
    np.testing.assert_array_equal(np.asarray(fast), np.asarray(out.detach()))
    with staged.no_grad():
        fast.add_(w)  # a broadcast operand: the general path
    np.testing.assert_array_equal(np.asarray(fast), np.asarray(out.detach() + w))


def test_views_see_the_write_and_turn_stale():
    for lib in (staged, torch):
        base = lib.zeros(4, requires_grad=True)
        with lib.no_grad():
            v = base[1:3]
            base.add_(lib.ones(4))
        assert base._version == v._version == 1
        assert v.tolist() == [1.0, 1.0]
        with lib.no_grad():
            base.mul_(3.0)
        assert v.tolist() == [3.0, 3.0] and v._version == 2


def test_self_operand_and_overlap():
    s, t = _pair(np.arange(4.0, dtype=np.float32))
    with staged.no_grad():
        s.add_(s)
    with torch.no_grad():
        t.add_(t)
    assert s.tolist() == t.tolist()
    s = staged.arange(6.0)
    with staged.no_grad(), pytest.raises(RuntimeError, match="refer to a single memory"):
        s[:5].add_(s[1:])


def test_what_it_leaves_to_the_general_path():
    with staged.inference_mode():
        inf = staged.ones(3)
    with staged.no_grad(), pytest.raises(RuntimeError, match="Inplace update to inference"):
        inf.add_(staged.ones(3))
    ints = staged.tensor([1, 2, 3])
    with staged.no_grad():
        ints.mul_(2)
        ints.add_(staged.tensor([1, 1, 1]))
    assert ints.tolist() == [3, 5, 7] and ints.dtype is staged.int64
    x = staged.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(staged.ones(3))  # grad mode on: recorded, and refused on a leaf
    expanded = staged.zeros(1).expand(3)
    with staged.no_grad(), pytest.raises(RuntimeError, match="single memory location"):
        expanded.add_(staged.ones(3))


def test_copy_of_a_tensor_with_history_under_no_grad():
    for lib in (staged, torch):
        a = lib.ones(3, requires_grad=True)
        x = lib.zeros(3)
        with lib.no_grad():
            x.copy_(a * 2)
        assert not x.requires_grad and x.grad_fn is None and x.tolist() == [2.0, 2.0, 2.0]
