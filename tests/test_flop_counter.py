"""``torch.utils.flop_counter.FlopCounterMode`` and ``module_tracker.ModuleTracker``
against torch 2.13's: the flops of matrix products, convolutions and attention, forward
and backward, in all and per Module, and the table."""

import pytest
import torch
import torch.utils.flop_counter
import torch.utils.module_tracker

import staged
from staged.utils.flop_counter import FlopCounterMode
from staged.utils.module_tracker import ModuleTracker


def _net(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Sequential(nn.Linear(8 * 8 * 8, 16), nn.ReLU(), nn.Linear(16, 5))
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, x):
            h = self.fc[0](self.conv(x).relu().flatten(1)).unsqueeze(1).expand(-1, 3, -1)
            a, _ = self.attn(h, h, h)
            return self.fc[2](a.mean(1))

    lib.manual_seed(0)
    return Net()


def _counts(lib, backward):
    m = _net(lib)
    x = lib.randn(2, 3, 8, 8)
    with lib.utils.flop_counter.FlopCounterMode(display=False) as counter:
        y = m(x)
        if backward:
            y.sum().backward()
    totals = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    return counter.get_total_flops(), totals, y


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_a_models_flops_per_module_are_torchs(backward):
    (ours, by_module, y), (theirs, their_by_module, ty) = (
        _counts(staged, backward),
        _counts(torch, backward),
    )
    assert ours == theirs > 0 and by_module == their_by_module
    assert set(by_module) == {"Global", "Net", "Net.conv", "Net.fc.0", "Net.fc.2", "Net.attn"}
    assert abs(y.detach().numpy() - ty.detach().numpy()).max() < 1e-5  # the same results


A_SHAPE, B_SHAPE = (3, 4, 5), (3, 5, 6)

PRODUCTS = {
    "mm": lambda L, a, b: a[0] @ b[0],
    "bmm": lambda L, a, b: L.bmm(a, b),
    "broadcast": lambda L, a, b: a @ b[0],
    "vector_matrix": lambda L, a, b: a[0, 0] @ b,
    "einsum": lambda L, a, b: L.einsum("bij,bjk->bik", a, b),
    "baddbmm": lambda L, a, b: L.baddbmm(L.zeros(3, 4, 6), a, b),
    "linear_3d": lambda L, a, b: L.nn.functional.linear(a, L.ones(7, 5)),
    "sdpa": lambda L, a, b: L.nn.functional.scaled_dot_product_attention(a, a, a),
    "conv1d": lambda L, a, b: L.nn.functional.conv1d(a, L.ones(2, 4, 3)),
    "conv_transpose2d": lambda L, a, b: L.nn.functional.conv_transpose2d(
        L.ones(1, 3, 5, 5), L.ones(3, 2, 3, 3), stride=2
    ),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_each_products_flops_are_torchs(name):
    def count(lib):
        a, b = lib.ones(A_SHAPE), lib.ones(B_SHAPE)
        with lib.utils.flop_counter.FlopCounterMode(display=False) as c:
            PRODUCTS[name](lib, a, b)
        return c.get_total_flops()

    assert count(staged) == count(torch) > 0


def test_where_torchs_counter_differs_staged_counts_the_products_run():
    """torch 2.13 has no formula for a matrix-vector product (``mv``, ``dot``: 0 flops)
    and counts a grouped convolution's weight gradient ``groups`` times over; staged
    counts the multiply-adds it runs."""
    a, v = staged.ones(4, 5), staged.ones(5)
    with FlopCounterMode(display=False) as c:
        a @ v
        v @ v
    assert c.get_total_flops() == 2 * 4 * 5 + 2 * 5
    conv = staged.nn.Conv2d(8, 8, 3, groups=8)
    x = staged.ones(2, 8, 6, 6, requires_grad=True)
    with FlopCounterMode(display=False) as c:
        conv(x).sum().backward()
    forward = 2 * 2 * 4 * 4 * 8 * 1 * 9  # N, H_out, W_out, C_out, C_in / groups, kernel
    assert c.get_total_flops() == 3 * forward  # the forward and the two gradients


def test_table_depth_and_arguments():
    m, x = _net(staged), staged.randn(2, 3, 8, 8)
    with FlopCounterMode(display=False, depth=1) as c:
        m(x)
    table = c.get_table().splitlines()
    assert table[0].split() == ["Module", "FLOP", "%", "Total"]
    assert set(table[1]) == {"-", " "}
    assert table[2].split()[0] == "Net" and table[2].split()[-1] == "100.00%"
    assert table[3].split()[:2] == ["-", "matmul"]
    assert not any("Net.conv" in row for row in table)  # deeper than depth 1
    assert any("Net.conv" in row for row in c.get_table(depth=2).splitlines())
    with FlopCounterMode(display=False) as empty:
        staged.ones(2) + 1
    assert empty.get_total_flops() == 0  # which makes a Global row, as torch's
    assert empty.get_table().splitlines()[-1].split() == ["Global", "0.000", "0%"]
    with pytest.warns(UserWarning, match="not needed anymore"):
        FlopCounterMode(m, display=False)
    with pytest.raises(NotImplementedError, match="no aten ops"):
        FlopCounterMode(custom_mapping={"mm": lambda *a, **k: 0})
    with pytest.raises(RuntimeError, match="not reentrant"):
        with c, c:
            pass


def test_display_prints_the_table(capsys):
    with FlopCounterMode():
        staged.ones(2, 3) @ staged.ones(3, 4)
    out = capsys.readouterr().out
    assert "Global" in out and "48" in out and "100.00%" in out


def _tracked(lib):
    nn = lib.nn
    seen = []
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 1)))
    x = lib.ones(4, 2, requires_grad=True)
    with lib.utils.module_tracker.ModuleTracker() as tracker:
        m[2][0].register_forward_pre_hook(lambda *a: seen.append(sorted(tracker.parents)))
        m[1].register_full_backward_hook(lambda *a: seen.append(("bw", sorted(tracker.parents))))
        y = m(x)
        seen.append(("after", tracker.is_bw, sorted(tracker.parents)))
        y.register_hook(lambda g: seen.append(("y", tracker.is_bw, sorted(tracker.parents))))
        y.sum().backward()
    return seen


def test_module_tracker_parents_forward_and_backward_are_torchs():
    ours = _tracked(staged)
    assert ours == _tracked(torch)
    assert ours[0] == ["Global", "Sequential", "Sequential.2", "Sequential.2.0"]
    assert ModuleTracker is staged.utils.module_tracker.ModuleTracker
