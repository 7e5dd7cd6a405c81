"""Data tiling (Note [data tiling] in staged/runtime/compiler.py): which steps get it,
that their results match eager and survive a save, and that a module IREE rejects it for
is compiled without it, once."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged import nn, optim
from staged.runtime import compiler
from staged.runtime.compiler import compile_mlir
from models.common import classification_step

TEXT = """func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %r = math.exp %a : tensor<3xf32>
  return %r : tensor<3xf32>
}
"""
WITH = "with --iree-opt-data-tiling"


def _matmuls(a, b, bb, i, j, d):
    return a @ b, bb @ bb.mT, i @ j, d @ d.T


def _operands():
    rng = np.random.default_rng(0)
    return (
        staged.tensor(rng.standard_normal((512, 512), np.float32)),
        staged.tensor(rng.standard_normal((512, 1024), np.float32)),
        staged.tensor(rng.standard_normal((3, 40, 24), np.float32)),
        staged.tensor(rng.integers(-50, 50, (17, 9), np.int32)),
        staged.tensor(rng.integers(-50, 50, (9, 5), np.int32)),
        staged.tensor(rng.standard_normal((33, 7))),
    )


def _close(got, args):
    """Each matmul within what two summation orders can differ by: 2 k eps sum |a_i b_i|."""
    want = _matmuls(*args)
    absolute = _matmuls(*(np.abs(t.numpy().astype(np.float64)) for t in args))
    for g, w, bound, x in zip(got, want, absolute, (args[0], args[2], args[3], args[5])):
        g, w, k = g.numpy(), w.numpy(), x.shape[-1]
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:
            assert (np.abs(g - w) <= 2 * k * np.finfo(w.dtype).eps * bound).all()


def test_large_static_matmuls_get_data_tiling_and_match_eager():
    """512 x 512 x 1024 is 2**28 multiply-adds: the threshold; with it the small matmuls
    of other shapes and dtypes in the same module (batched, transposed, int32, float64)."""
    args = _operands()
    step = staged.compile(_matmuls)
    _close(step(*args), args)
    assert WITH in step.explanation()


def test_small_and_dynamic_steps_are_compiled_without_it():
    args = _operands()[2:]
    small = staged.compile(lambda bb, i, j, d: _matmuls(bb, bb.mT, bb, i, j, d))
    small(*args)
    assert "data-tiling" not in small.explanation()
    a, b = _operands()[:2]
    dynamic = staged.compile(lambda a: a @ b, dynamic=True)
    np.testing.assert_allclose(dynamic(a).numpy(), (a @ b).numpy(), rtol=1e-4, atol=1e-3)
    assert "data-tiling" not in dynamic.explanation()


@pytest.fixture
def forced(monkeypatch):
    """Data tiling for every llvm-cpu step, however small."""
    monkeypatch.setattr(compiler, "DATA_TILING_MIN_MACS", 0)


def test_a_training_step_with_data_tiling_matches_eager_and_deploys(forced, tmp_path):
    def run(compiled):
        staged.manual_seed(0)
        model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
        step = classification_step(model, optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        step = staged.compile(step) if compiled else step
        x, y = staged.randn(16, 20), staged.randint(0, 5, (16,))
        return step, model, x, y, [step(x, y).item() for _ in range(4)]

    *_, eager = run(False)
    step, model, x, y, losses = run(True)
    np.testing.assert_allclose(losses, eager, rtol=1e-5)
    assert WITH in step.explanation()
    step.save(tmp_path, names={p: k for k, p in model.state_dict(keep_vars=True).items()})
    loaded = staged.runtime.load(tmp_path)
    assert loaded(x.numpy(), y.numpy()).item() == pytest.approx(step(x, y).item(), rel=1e-6)


def test_rejected_optional_flags_fall_back_and_are_not_tried_again(monkeypatch, tmp_path):
    monkeypatch.setenv("STAGED_CACHE_DIR", str(tmp_path))
    calls = []
    real = compiler.compile_uncached
    monkeypatch.setattr(compiler, "compile_uncached", lambda *a: calls.append(a) or real(*a))
    stats: dict = {}
    vmfb = compile_mlir(TEXT, optional=("--no-such-iree-flag",), stats=stats)
    assert "--no-such-iree-flag" in calls[0][1] and "--no-such-iree-flag" not in calls[1][1]
    assert stats["declined"].startswith("--no-such-iree-flag: bad compiler flags")
    assert "optional" not in stats
    again: dict = {}
    assert compile_mlir(TEXT, optional=("--no-such-iree-flag",), stats=again) == vmfb
    assert len(calls) == 2 and again["declined"] == stats["declined"]
    assert again["cache"] == "hit"
