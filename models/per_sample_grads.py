"""Per-example gradients of the digits MLP with staged.func (the torch.func tutorial, and
what DP-SGD / Opacus need): ``vmap(grad(loss), in_dims=(None, 0, 0))`` over a batch,
checked against a loop of single-example backward passes, then a few DP-SGD steps (each
example's gradient clipped to a norm bound before averaging, plus Gaussian noise).

    python -m models.per_sample_grads [--batch 64] [--steps 60]
"""

from __future__ import annotations

from models import common  # noqa: F401,I001  (first: sets OPENBLAS_THREAD_TIMEOUT before NumPy)

import argparse
import sys
import time

import numpy as np

import staged
import staged.nn.functional as F
from staged.func import functional_call, grad, vmap

from models import mlp
from models.data import load_digits


def per_example_grads(model):
    """``fn(params, x, y)``: the gradient of each example's loss, stacked on a leading dim."""

    def loss(params, xi, yi):
        return F.cross_entropy(functional_call(model, params, (xi[None],)), yi[None])

    return vmap(grad(loss), in_dims=(None, 0, 0))


def dp_sgd_step(params, grads, lr=0.5, clip=1.0, noise=0.5):
    """Clip each example's gradient to norm ``clip``, average, add noise, take a step."""
    n = next(iter(grads.values())).shape[0]
    norms = sum((g.reshape(n, -1) ** 2).sum(1) for g in grads.values()).sqrt()
    scale = (clip / (norms + 1e-6)).clamp(max=1.0)
    out = {}
    for k, g in grads.items():
        mean = (g * scale.reshape((n,) + (1,) * (g.ndim - 1))).mean(0)
        out[k] = params[k] - lr * (mean + noise * clip / n * staged.randn(*mean.shape))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=60)
    a = p.parse_args(argv)
    x_train, y_train, x_test, y_test = load_digits()
    model = mlp.build(seed=0)
    params = {k: v.detach() for k, v in model.named_parameters()}
    grads_of = per_example_grads(model)
    x, y = staged.tensor(x_train[: a.batch]), staged.tensor(y_train[: a.batch])

    t0 = time.perf_counter()
    grads = grads_of(params, x, y)
    t_vmap = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(a.batch):  # the same, one example at a time
        xi, yi = x[i : i + 1], y[i : i + 1]
        one = grad(lambda p, xi=xi, yi=yi: F.cross_entropy(functional_call(model, p, (xi,)), yi))(
            params
        )
        for k in grads:
            np.testing.assert_allclose(grads[k][i].numpy(), one[k].numpy(), rtol=1e-4, atol=1e-6)
    t_loop = time.perf_counter() - t0
    print(
        f"per-example gradients of {a.batch} examples: vmap(grad) {t_vmap * 1e3:.1f} ms, "
        f"a loop of single-example grads {t_loop * 1e3:.1f} ms (and the same values)"
    )

    rng = np.random.default_rng(0)
    for _step in range(a.steps):
        j = rng.choice(len(x_train), a.batch, replace=False)
        xb, yb = staged.tensor(x_train[j]), staged.tensor(y_train[j])
        params = dp_sgd_step(params, grads_of(params, xb, yb))
    with staged.no_grad():
        pred = functional_call(model, params, (staged.tensor(x_test),)).argmax(1).numpy()
    print(f"after {a.steps} DP-SGD steps: held-out accuracy {(pred == y_test).mean():.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
