"""ms/step of whole SGD training steps compiled by staged (IREE llvm-cpu) and run by
staged eagerly, against torch eager, torch.compile and JAX jit (each when installed),
timed interleaved in one run; plus staged's trace+compile time (cold cache) and
cached-load time.

    python bench/compiled_steps.py [--rounds 8] [--workloads mlp32 mlp256 cnn transformer]

Each workload's loss is written once over tensor methods and an ``F`` namespace that
staged.nn.functional and torch.nn.functional both provide, so every framework runs the
same math from the same initial weights (checked before timing).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, interleaved, item, ratio_table  # noqa: E402
from bench.common import _uniform, block_shapes, mlp_loss, mlp_params  # noqa: E402
import staged  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = jnp = None

LR = 0.01


# --- workloads: params(rng) -> {name: array}, data(rng) -> (x, y), loss(F, P, x, y) -----


def cnn_params(rng):
    return {
        "c1": _uniform(rng, (6, 1, 5, 5), 25),
        "c1b": _uniform(rng, (6,), 25),
        "c2": _uniform(rng, (16, 6, 5, 5), 150),
        "c2b": _uniform(rng, (16,), 150),
        "w1": _uniform(rng, (120, 256), 256),
        "b1": _uniform(rng, (120,), 256),
        "w2": _uniform(rng, (10, 120), 120),
        "b2": _uniform(rng, (10,), 120),
    }


def cnn_loss(F, P, x, y):
    h = F.max_pool2d(F.conv2d(x, P["c1"], P["c1b"]).relu(), 2)
    h = F.max_pool2d(F.conv2d(h, P["c2"], P["c2b"]).relu(), 2)
    h = F.linear(h.reshape(h.shape[0], -1), P["w1"], P["b1"]).relu()
    return F.cross_entropy(F.linear(h, P["w2"], P["b2"]), y)


D, H, T, V = 64, 4, 32, 64


def transformer_params(rng):
    p = {
        "emb": rng.standard_normal((V, D)).astype(np.float32) * 0.1,
        "pos": rng.standard_normal((T, D)).astype(np.float32) * 0.1,
        "ln1w": np.ones(D, np.float32),
        "ln1b": np.zeros(D, np.float32),
        "ln2w": np.ones(D, np.float32),
        "ln2b": np.zeros(D, np.float32),
    }
    for k, shape in {**block_shapes(D), "head": (V, D)}.items():
        p[k] = _uniform(rng, shape, shape[1])
    return p


def transformer_loss(F, P, x, y):
    b = x.shape[0]
    h = F.embedding(x, P["emb"]) + P["pos"]
    a = F.layer_norm(h, (D,), P["ln1w"], P["ln1b"])

    def heads(t):
        return t.reshape(b, T, H, D // H).permute(0, 2, 1, 3)

    q, k, v = (heads(F.linear(a, P[n])) for n in ("wq", "wk", "wv"))
    scores = q @ k.transpose(-2, -1) / math.sqrt(D // H) + P["causal"]
    att = scores.softmax(-1) @ v
    h = h + F.linear(att.permute(0, 2, 1, 3).reshape(b, T, D), P["wo"])
    m = F.layer_norm(h, (D,), P["ln2w"], P["ln2b"])
    h = h + F.linear(F.gelu(F.linear(m, P["w1"])), P["w2"])
    logits = F.linear(h, P["head"])
    return F.cross_entropy(logits.reshape(b * T, V), y.reshape(b * T))


def _causal():
    return np.triu(np.full((T, T), -1e9, np.float32), 1)


WORKLOADS = {
    "mlp32": (
        mlp_params,
        lambda r: (r.standard_normal((32, 784), np.float32), r.integers(0, 10, 32)),
        mlp_loss,
    ),
    "mlp256": (
        mlp_params,
        lambda r: (r.standard_normal((256, 784), np.float32), r.integers(0, 10, 256)),
        mlp_loss,
    ),
    "cnn": (
        cnn_params,
        lambda r: (r.standard_normal((32, 1, 28, 28), np.float32), r.integers(0, 10, 32)),
        cnn_loss,
    ),
    "transformer": (
        transformer_params,
        lambda r: (r.integers(0, V, (8, T)), r.integers(0, V, (8, T))),
        transformer_loss,
    ),
}


# --- the same losses in JAX, as a JAX user writes them (jax.numpy and jax.lax only) ---------


def _jax_linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def _jax_cross_entropy(logits, y):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=-1))


def jax_mlp_loss(P, x, y):
    h = x
    for i in range(3):
        h = _jax_linear(h, P[f"w{i}"], P[f"b{i}"])
        h = jax.nn.relu(h) if i < 2 else h
    return _jax_cross_entropy(h, y)


def _jax_conv_relu_pool(x, w, b):
    h = jax.lax.conv_general_dilated(
        x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")
    )
    h = jax.nn.relu(h + b[None, :, None, None])
    return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def jax_cnn_loss(P, x, y):
    h = _jax_conv_relu_pool(x, P["c1"], P["c1b"])
    h = _jax_conv_relu_pool(h, P["c2"], P["c2b"])
    h = jax.nn.relu(_jax_linear(h.reshape(h.shape[0], -1), P["w1"], P["b1"]))
    return _jax_cross_entropy(_jax_linear(h, P["w2"], P["b2"]), y)


def _jax_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * w + b


def jax_transformer_loss(P, x, y, causal):
    b = x.shape[0]
    h = P["emb"][x] + P["pos"]
    a = _jax_layer_norm(h, P["ln1w"], P["ln1b"])

    def heads(t):
        return t.reshape(b, T, H, D // H).transpose(0, 2, 1, 3)

    q, k, v = (heads(_jax_linear(a, P[n])) for n in ("wq", "wk", "wv"))
    scores = q @ k.swapaxes(-2, -1) / math.sqrt(D // H) + causal
    att = jax.nn.softmax(scores, axis=-1) @ v
    h = h + _jax_linear(att.transpose(0, 2, 1, 3).reshape(b, T, D), P["wo"])
    m = _jax_layer_norm(h, P["ln2w"], P["ln2b"])
    h = h + _jax_linear(jax.nn.gelu(_jax_linear(m, P["w1"]), approximate=False), P["w2"])
    logits = _jax_linear(h, P["head"])
    return _jax_cross_entropy(logits.reshape(b * T, V), y.reshape(b * T))


JAX_LOSSES = {
    "mlp32": jax_mlp_loss,
    "mlp256": jax_mlp_loss,
    "cnn": jax_cnn_loss,
    "transformer": jax_transformer_loss,
}


def jax_sgd_step(loss_fn):
    """A jitted SGD step that donates the old parameters (updated in place by XLA)."""

    def step(params, *data):
        loss, grads = jax.value_and_grad(loss_fn)(params, *data)
        return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads), loss

    return jax.jit(step, donate_argnums=0)


# --- one SGD step per framework ------------------------------------------------------------


def sgd_step(lib, params, loss_fn, consts):
    """One SGD step in ``lib`` (staged or torch): the same code for both."""
    F = lib.nn.functional
    P = {k: lib.nn.Parameter(lib.tensor(v)) for k, v in params.items()}
    P.update({k: lib.tensor(v) for k, v in consts.items()})
    trained = [P[k] for k in params]

    def step(x, y):
        loss = loss_fn(F, P, x, y)
        loss.backward()
        with lib.no_grad():
            for p in trained:
                p.sub_(LR * p.grad)
                p.grad = None
        return loss

    return step


def implementations(name):
    make_params, make_data, loss_fn = WORKLOADS[name]
    rng = np.random.default_rng(0)
    params, (x, y) = make_params(rng), make_data(rng)
    consts = {"causal": _causal()} if name == "transformer" else {}
    xs, ys = staged.tensor(x), staged.tensor(y)
    impls = {}
    cstep = staged.compile(sgd_step(staged, params, loss_fn, consts))
    impls["staged compiled"] = lambda: cstep(xs, ys)
    dstep = staged.compile(sgd_step(staged, params, loss_fn, consts), dynamic=True)
    impls["staged compiled dynamic"] = lambda: dstep(xs, ys)
    gstep = staged.compile(
        sgd_step(staged, params, loss_fn, consts), dynamic=True, specialize=False
    )
    impls["staged dynamic, unspecialized"] = lambda: gstep(xs, ys)
    estep = sgd_step(staged, params, loss_fn, consts)
    impls["staged eager"] = lambda: estep(xs, ys)
    if torch is not None:
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        teager = sgd_step(torch, params, loss_fn, consts)
        impls["torch eager"] = lambda: teager(xt, yt)
        tcomp = torch.compile(sgd_step(torch, params, loss_fn, consts))
        impls["torch.compile"] = lambda: tcomp(xt, yt)
    if jax is not None:
        jstep = jax_sgd_step(JAX_LOSSES[name])
        state = {"params": {k: jnp.asarray(v) for k, v in params.items()}}
        jdata = (jnp.asarray(x), jnp.asarray(y)) + tuple(jnp.asarray(v) for v in consts.values())

        def jax_step():
            state["params"], loss = jstep(state["params"], *jdata)
            return loss

        impls["JAX jit"] = jax_step
    return impls


def ready(name, impls) -> dict:
    """``impls`` after their first calls (which trace and compile; one that fails there is
    left out, with the reason printed), checked: their losses over the next three steps
    agree with staged compiled's."""
    impls = dict(impls)
    for k, s in list(impls.items()):
        try:
            item(s())
        except Exception as err:  # torch.compile's inductor needs a C++ toolchain
            print(f"  {k} unavailable: {type(err).__name__}: {err}"[:300])
            del impls[k]
    losses = {k: [item(s()) for _ in range(3)] for k, s in impls.items()}
    ref = losses["staged compiled"]
    for k, v in losses.items():
        if not np.allclose(v, ref, rtol=2e-4, atol=1e-5):
            raise AssertionError(f"{name}: {k} losses {v} differ from staged's {ref}")
    return impls


def compile_times(name) -> tuple:
    """(cold trace+compile s, cached trace+load s) for a fresh staged.compile."""
    make_params, make_data, loss_fn = WORKLOADS[name]
    rng = np.random.default_rng(0)
    params, (x, y) = make_params(rng), make_data(rng)
    consts = {"causal": _causal()} if name == "transformer" else {}
    out = []
    with tempfile.TemporaryDirectory() as cache:
        old = os.environ.get("STAGED_CACHE_DIR")
        os.environ["STAGED_CACHE_DIR"] = cache
        try:
            for _ in range(2):  # cold, then from the cache
                step = staged.compile(sgd_step(staged, params, loss_fn, consts))
                t0 = time.perf_counter()
                step(staged.tensor(x), staged.tensor(y)).item()
                out.append(time.perf_counter() - t0)
        finally:
            if old is None:
                os.environ.pop("STAGED_CACHE_DIR")
            else:
                os.environ["STAGED_CACHE_DIR"] = old
    return tuple(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument(
        "--skip",
        nargs="*",
        default=[],
        metavar="IMPL",
        help='implementations to leave out, e.g. --skip "torch.compile"',
    )
    a = p.parse_args(argv)
    base = "torch eager" if torch is not None else "staged compiled"
    results, names, compile_rows = {}, [], []
    for name in a.workloads:
        print(f"{name}: ...", flush=True)
        impls = ready(name, {k: v for k, v in implementations(name).items() if k not in a.skip})
        results[name] = interleaved(impls, a.rounds)
        names += [k for k in impls if k not in names]
        cold, warm = compile_times(name)
        compile_rows.append(f"| {name} | {cold:.2f} | {warm:.2f} |")
    print("\n## Compiled training steps (SGD), f32\n")
    print(
        environment(a.rounds, base, torch)
        + (
            f"\n- jax {jax.__version__} ({jax.devices()[0].platform})"
            if jax
            else "\n- JAX: not installed (pip install -e '.[bench]')"
        )
        + "\n"
    )
    print(ratio_table(results, names, base))
    print("\n| workload | staged trace+compile, cold (s) | trace+load from cache (s) |")
    print("|---|---:|---:|")
    print("\n".join(compile_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
