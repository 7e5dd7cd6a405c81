"""In-place writes in grad mode that take the data-only path (Note [data-only writes] in
staged/eager/ops/inplace.py: neither the tensor nor the operand requires grad), and
fill_/zero_ on it: values, versions, views, graphs and errors as torch's."""

import numpy as np
import pytest
import torch

import staged


def _pair(a, requires_grad=False):
    return (
        staged.tensor(a, requires_grad=requires_grad),
        torch.tensor(a, requires_grad=requires_grad),
    )


_CALLS = ["zero_()", "fill_(1)", "add_(2)", "mul_(y)", "sub_(y)"]


@pytest.mark.parametrize(
    "dtype, call",
    [(d, c) for d in ("float32", "int64", "complex64", "float16") for c in _CALLS]
    + [("bool", "zero_()"), ("bool", "fill_(1)")],
)
def test_grad_mode_writes_of_tensors_not_requiring_grad(dtype, call):
    rng = np.random.default_rng(0)
    a, u = (
        (rng.standard_normal((2, 3)) * 3).astype(dtype),
        (rng.standard_normal((2, 3))).astype(dtype),
    )
    (s, t), (ys, yt) = _pair(a), _pair(u)
    vs, vt = s[0], t[0]  # a view, stale after the write
    rs = eval(f"s.{call}", {"s": s, "y": ys})
    eval(f"t.{call}", {"t": t, "y": yt})
    assert rs is s
    np.testing.assert_array_equal(np.asarray(s), t.numpy())
    np.testing.assert_array_equal(np.asarray(vs), vt.numpy())
    assert s._version == t._version == 1 and vs._version == vt._version == 1
    assert not s.requires_grad and s.grad_fn is None and vs.grad_fn is None


def test_an_operand_requiring_grad_is_recorded():
    for lib in (staged, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        x = lib.zeros(2)
        x.add_(w)
        assert x.requires_grad and type(x.grad_fn).__name__ == "AddBackward0"
        (x * 3).sum().backward()
        assert w.grad.tolist() == [3.0, 3.0]


def test_a_leaf_requiring_grad_is_refused_in_grad_mode():
    for lib in (staged, torch):
        x = lib.zeros(2, requires_grad=True)
        for write in (x.zero_, lambda: x.fill_(2.0), lambda: x.add_(1.0)):
            with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
                write()
        with lib.no_grad():
            x.zero_()
        assert x._version == 1


def test_saved_tensors_see_the_write():
    for lib in (staged, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        x = lib.ones(2)
        y = (w * x).sum()  # saves x for w's gradient
        x.zero_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


def test_inference_tensors_and_views_take_the_general_path():
    with staged.inference_mode():
        s = staged.ones(2)
    with torch.inference_mode():
        t = torch.ones(2)
    for x in (s, t):
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
            x.zero_()
    s, t = _pair(np.arange(6.0, dtype=np.float32))
    for x in (s, t):
        x[1:3].fill_(7)
        x.view(2, 3)[1].zero_()
    assert s.tolist() == t.tolist()
    e = staged.zeros(1).expand(3)  # read-only payload: write's errors
    with pytest.raises(RuntimeError, match="single memory location"):
        e.add_(1.0)
    e.fill_(2.0)  # a fill writes its one element, as torch's
    assert e.tolist() == torch.zeros(1).expand(3).fill_(2.0).tolist()


def test_fill_values_keep_torchs_checks():
    s, t = _pair(np.zeros(2, np.uint8))
    for x in (s, t):
        with pytest.raises(RuntimeError, match="value cannot be converted to type uint8_t"):
            x.fill_(300)
        x.fill_(-1)  # uint8 takes -255..-1, wrapped
    assert s.tolist() == t.tolist() == [255, 255]
