"""Every model in models/ trains on vulkan-spirv (lavapipe in CI) along eager's loss curve."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from models import cnn, common, mlp, transformer  # noqa: E402
from models.data import load_digits  # noqa: E402
from tests.backends import needs_vulkan  # noqa: E402


def _digits(n):
    x_tr, y_tr, x_te, y_te = load_digits()
    return x_tr[:n], y_tr[:n], x_te, y_te


def _runs():
    vocab = transformer.load_corpus(block=8, stride=8)
    tiny = transformer.make_new_run(len(vocab[4]), block=8, d=16, heads=2, layers=1)
    return {
        "mlp": (
            lambda seed, compile, backend: mlp.new_run(seed, 0.05, compile, backend),
            _digits(96),
            8,
        ),
        "cnn": (
            lambda seed, compile, backend: cnn.new_run(
                seed, 0.05, compile, backend, channels=(4, 8), hidden=16
            ),
            _digits(96),
            8,
        ),
        "transformer": (
            lambda seed, compile, backend: tiny(seed, 1e-2, compile, backend),
            (*vocab[0:2], *vocab[2:4]),
            4,
        ),
    }


@needs_vulkan
@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_model_trains_on_vulkan_as_eagerly(name):
    new_run, data, batch = _runs()[name]
    data = (data[0][: 10 * batch], data[1][: 10 * batch], data[2], data[3])
    curves = []
    for compile in (False, True):
        model, step = new_run(3, compile, "vulkan-spirv")
        curves.append(
            np.asarray(common.train(model, step, data, 1, batch, seed=3, progress=False))[:10]
        )
    eager, vulkan = curves
    np.testing.assert_allclose(vulkan, eager, rtol=1e-4)
