"""A tiny causal transformer (character-level language model) trained on Python's own
standard-library source text, eagerly or with a compiled step.

    python -m models.transformer --compile --backend llvm-cpu
"""

from __future__ import annotations

from models import common  # noqa: I001  (first: sets OPENBLAS_THREAD_TIMEOUT before NumPy)

import inspect
import importlib
import math
import sys

import numpy as np

import staged
import staged.nn.functional as F
from staged import nn, optim

from models.common import classification_step, ddp_wrap

CORPUS_MODULES = ("textwrap", "fnmatch", "colorsys", "bisect")


def load_corpus(block: int = 32, stride: int = 16, test_fraction: float = 0.1):
    """The source of ``CORPUS_MODULES`` (shipped with Python, no network) as characters:
    ``(x_train, y_train, x_test, y_test, vocab)``; x are int64 windows of ``block``
    characters, y the same windows shifted by one (next-character targets). The last
    ``test_fraction`` of the text is held out."""
    text = "\n".join(inspect.getsource(importlib.import_module(m)) for m in CORPUS_MODULES)
    vocab = sorted(set(text))
    ids = np.array([vocab.index(c) for c in text], np.int64)
    split = int(len(ids) * (1 - test_fraction))

    def windows(a, step):
        starts = np.arange(0, len(a) - block - 1, step)
        w = np.stack([a[s : s + block + 1] for s in starts])
        return w[:, :-1], w[:, 1:]

    return (*windows(ids[:split], stride), *windows(ids[split:], block), "".join(vocab))


class Block(nn.Module):
    """Pre-LayerNorm decoder block: masked self-attention, then a GELU MLP (tanh form),
    each residual."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(
            nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d)
        )

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False, is_causal=True)[0]
        return x + self.mlp(self.ln2(x))


class TinyDecoder(nn.Module):
    """Token + learned position embeddings, ``layers`` causal blocks, LayerNorm, a linear
    head to next-character logits: ``(N, T)`` int64 -> ``(N, T, vocab)``."""

    def __init__(self, vocab: int, block: int = 32, d: int = 64, heads: int = 4, layers: int = 2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        causal = np.triu(np.ones((block, block), bool), 1)  # True: may not attend
        self.register_buffer("mask", staged.tensor(causal), persistent=False)
        self.register_buffer("positions", staged.arange(block), persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(self.positions[:t])
        for block in self.blocks:
            x = block(x, self.mask[:t, :t])
        return self.head(self.ln(x))


def lm_loss(logits, targets):
    """Mean next-character cross-entropy over every position."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def build(vocab: int, seed: int = 0, **kw):
    staged.manual_seed(seed)
    return TinyDecoder(vocab, **kw)


def export_spec(batch_size: int = 4, seed: int = 0) -> dict:
    """What `staged export-onnx` exports (see models/mlp.py): the language-model loss and
    its gradients for a fresh seeded decoder (vocabulary 64, 16 characters), dynamic batch;
    AdamW for ``--training-step``."""
    model = build(64, seed, block=16, d=32, heads=2, layers=1)
    x, y = staged.randint(0, 64, (batch_size, 16)), staged.randint(0, 64, (batch_size, 16))
    return dict(
        fn_or_module=model,
        example_args=(x, y),
        loss_fn=lm_loss,
        dynamic_axes={"idx": {0: "batch"}, "target": {0: "batch"}},
        optimizer=lambda params: optim.AdamW(params, lr=3e-3),
    )


def make_new_run(vocab: int, **build_kw):
    """``new_run(seed, lr, compile, backend, ddp) -> (model, step)`` for a decoder over
    ``vocab`` characters trained with AdamW (data-parallel with ``ddp``)."""

    def new_run(seed=0, lr=3e-3, compile=False, backend="llvm-cpu", ddp=False):
        model = build(vocab, seed, **build_kw)
        step = classification_step(
            ddp_wrap(model, ddp), optim.AdamW(model.parameters(), lr=lr), lm_loss
        )
        return model, (staged.compile(step, backend=backend) if compile else step)

    return new_run


def heldout_loss(model, x, y, batch_size: int = 64) -> float:
    """Mean next-character loss (nats) over the held-out windows."""
    with staged.no_grad():
        total = sum(
            lm_loss(
                model(staged.tensor(x[i : i + batch_size])), staged.tensor(y[i : i + batch_size])
            ).item()
            * len(x[i : i + batch_size])
            for i in range(0, len(x), batch_size)
        )
    return total / len(x)


def main(argv=None) -> int:
    a = common.parser(
        "python -m models.transformer", __doc__, epochs=8, batch_size=32, lr=3e-3
    ).parse_args(argv)
    *data, vocab = load_corpus()

    def evaluate(model, x, y):
        loss = heldout_loss(model, x, y)
        return "held-out loss", f"{loss:.3f} nats/char ({loss / math.log(2):.2f} bits/char)"

    return common.main(
        a,
        "transformer",
        f"Python stdlib source ({', '.join(CORPUS_MODULES)}): "
        f"{len(data[0])} train / {len(data[2])} test windows of 32 chars, "
        f"vocabulary {len(vocab)}; decoder d=64, 4 heads, 2 blocks, AdamW "
        f"lr={a.lr}",
        data,
        make_new_run(len(vocab)),
        evaluate,
    )


if __name__ == "__main__":
    sys.exit(main())
