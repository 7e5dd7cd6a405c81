"""The CNN and the tiny transformer in models/: small configurations train eagerly and
compiled along the same loss curve (20 steps), and learn; data loaders; CLIs."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")

from models import cnn, common, transformer  # noqa: E402
from models.data import load_digits  # noqa: E402

TINY_DECODER = dict(block=8, d=16, heads=2, layers=1)


def curves(new_run, data, batch_size, steps=20):
    """Loss curves of ``steps`` eager and compiled steps from the same seed."""
    out = []
    for compile in (False, True):
        model, step = new_run(seed=3, compile=compile)
        epochs = -(-steps // (len(data[0]) // batch_size))
        out.append(
            np.asarray(common.train(model, step, data, epochs, batch_size, seed=3, progress=False))[
                :steps
            ]
        )
    return model, out


def test_cnn_eager_and_compiled_curves_match():
    x_tr, y_tr, x_te, y_te = load_digits()
    data = (x_tr[:160], y_tr[:160], x_te, y_te)

    def new_run(seed, compile):
        return cnn.new_run(seed, lr=0.05, compile=compile, channels=(4, 8), hidden=16)

    model, (eager, compiled) = curves(new_run, data, batch_size=8)
    np.testing.assert_allclose(compiled, eager, rtol=1e-4)
    assert eager[-5:].mean() < 0.97 * eager[:5].mean()  # it learns
    assert cnn.accuracy(model, x_te, y_te) > 0.15  # chance: 0.1
    assert model.training  # accuracy() restores the mode


def test_transformer_eager_and_compiled_curves_match():
    x_tr, y_tr, x_te, y_te, vocab = transformer.load_corpus(block=8, stride=8)
    data = (x_tr[:80], y_tr[:80], x_te[:16], y_te[:16])
    new_run = transformer.make_new_run(len(vocab), **TINY_DECODER)
    model, (eager, compiled) = curves(
        lambda seed, compile: new_run(seed, 1e-2, compile), data, batch_size=4
    )
    np.testing.assert_allclose(compiled, eager, rtol=1e-4)
    assert eager[-5:].mean() < 0.9 * eager[:5].mean()
    assert transformer.heldout_loss(model, data[2], data[3]) < np.log(len(vocab))


def test_corpus_windows_are_next_character_pairs():
    x_tr, y_tr, x_te, y_te, vocab = transformer.load_corpus()
    assert x_tr.shape[1] == y_tr.shape[1] == 32 and x_tr.dtype == np.int64
    np.testing.assert_array_equal(x_tr[:, 1:], y_tr[:, :-1])
    assert len(x_te) > 50 and x_tr.max() < len(vocab)
    text = "".join(vocab[i] for i in x_tr[::2].ravel())  # stride 16, windows of 32
    assert "def " in text and "import " in text


def test_decoder_is_causal():
    """Changing a later character leaves the logits of earlier positions unchanged."""
    import staged

    model = transformer.build(20, 0, **TINY_DECODER)
    a = np.arange(8)[None] % 20
    b = a.copy()
    b[0, 5] = 19
    with staged.no_grad():
        la, lb = (model(staged.tensor(v)).numpy() for v in (a, b))
    np.testing.assert_allclose(la[:, :5], lb[:, :5], rtol=1e-6)
    assert not np.allclose(la[:, 5:], lb[:, 5:])


@pytest.mark.parametrize("mod", [cnn, transformer])
def test_cli_writes_loss_plot(mod, tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    if mod is transformer:  # one tiny epoch: shrink the corpus the CLI loads
        full = transformer.load_corpus
        monkeypatch.setattr(
            transformer,
            "load_corpus",
            lambda: tuple(v[:8] if i < 4 else v for i, v in enumerate(full())),
        )
    else:
        full = cnn.load_digits
        monkeypatch.setattr(cnn, "load_digits", lambda seed: tuple(v[:64] for v in full(seed)))
    assert (
        mod.main(
            [
                "--epochs",
                "1",
                "--batch-size",
                "4",
                "--timing-steps",
                "0",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    name = mod.__name__.rpartition(".")[2]
    assert (tmp_path / f"{name}_loss.png").stat().st_size > 0
    assert "held-out" in capsys.readouterr().out
