"""The digits MLP example: data loader, eager/compiled agreement, CLI output."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")

from models import common, mlp  # noqa: E402
from models.data import batches, load_digits  # noqa: E402


def test_load_digits_shapes_and_dtypes():
    x_tr, y_tr, x_te, y_te = load_digits()
    assert x_tr.shape == (1437, 64) and x_te.shape == (360, 64)
    assert y_tr.shape == (1437,) and y_te.shape == (360,)
    assert x_tr.dtype == np.float32 and y_tr.dtype == np.int64
    assert 0.0 <= x_tr.min() and x_tr.max() <= 1.0
    assert set(np.unique(y_tr)) == set(range(10))
    assert np.array_equal(load_digits()[1], y_tr)  # the split is seeded
    xb = [b[0].shape for b in batches(x_tr, y_tr, 100, np.random.default_rng(0))]
    assert xb == [(100, 64)] * 14  # partial last batch dropped


def test_eager_and_compiled_training_agree():
    data = load_digits()
    curves = []
    for compile in (False, True):
        model, step = mlp.new_run(seed=3, lr=0.05, compile=compile)
        curves.append(
            common.train(model, step, data, epochs=2, batch_size=32, seed=3, progress=False)
        )
    eager, compiled = map(np.asarray, curves)
    assert len(eager) == len(compiled) == 2 * (1437 // 32)
    np.testing.assert_allclose(compiled[:20], eager[:20], rtol=1e-4)
    assert eager[-10:].mean() < 0.5 * eager[:10].mean()  # it learns
    assert mlp.accuracy(model, data[2], data[3]) > 0.8


def test_main_writes_loss_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert (
        mlp.main(
            [
                "--compile",
                "--epochs",
                "1",
                "--timing-steps",
                "0",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert (tmp_path / "mlp_loss.png").stat().st_size > 0
    assert "held-out accuracy" in capsys.readouterr().out
