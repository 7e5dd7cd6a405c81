"""ms for the per-example gradients of 256 examples of the example MLP (64-128-128-10,
cross-entropy): ``vmap(grad(loss), in_dims=(None, 0, 0))`` against one batched forward and
backward of the same 256 examples (the mean loss's gradient), staged eager (NumPy's BLAS on
1 thread: on a loaded machine its threads made one batched backward take 2-40 ms),
torch.func (1 thread) and JAX (jitted, and op by op) in interleaved rounds. The ratio per library is
what batching rules cost over the batched backward (target: at most 3x, issue 17); the
per-example weight gradients alone are 27 MB to write: the last row times just those
outer products, the floor under any eager implementation's ratio. ``--split`` splits
staged's CPU time per call into its NumPy kernels (the outer products apart) and the rest
(Python): the NumPy kernels alone against the batched backward are the eager floor.

    python bench/vmap.py [--rounds 10] [--batch 256] [--profile | --split]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, interleaved, ratio_table  # noqa: E402
import staged  # noqa: E402
from models import mlp  # noqa: E402

import torch  # noqa: E402
from bench.compiled_steps import jax, jax_mlp_loss, jnp  # noqa: E402  (None where missing)


def _cases(lib, model, x, y):
    """{"vmap(grad)": per-example gradients, "batched backward": one forward+backward}."""
    F = lib.nn.functional
    params = {k: v.detach() for k, v in model.named_parameters()}
    leaves = {k: v.clone().requires_grad_() for k, v in params.items()}

    def loss(p, xb, yb):
        return F.cross_entropy(lib.func.functional_call(model, p, (xb,)), yb)

    per_example = lib.func.vmap(
        lib.func.grad(lambda p, xi, yi: loss(p, xi[None], yi[None])), in_dims=(None, 0, 0)
    )

    def batched(xb, yb):
        return lib.autograd.grad(loss(leaves, xb, yb), tuple(leaves.values()))

    out = {
        "vmap(grad)": lambda: per_example(params, x, y),
        "batched backward": lambda: batched(x, y),
    }
    if lib.__name__ == "staged":  # the same two, each compiled into one graph
        per_c, batched_c = lib.compile(per_example), lib.compile(batched)
        out["compiled vmap(grad)"] = lambda: per_c(params, x, y)
        out["compiled batched backward"] = lambda: batched_c(x, y)
    return out


def _jax_cases(model, x, y):
    """The same two computations in JAX on the same weights: {"jit <case>": jitted,
    "<case>": op by op}."""
    linears = [m for m in model if type(m).__name__ == "Linear"]
    params = {}
    for i, m in enumerate(linears):
        params[f"w{i}"] = jnp.asarray(m.weight.detach().numpy())
        params[f"b{i}"] = jnp.asarray(m.bias.detach().numpy())
    xs, ys = jnp.asarray(x), jnp.asarray(y)
    per_example = jax.vmap(
        jax.grad(lambda p, xi, yi: jax_mlp_loss(p, xi[None], yi[None])), in_axes=(None, 0, 0)
    )
    batched = jax.grad(jax_mlp_loss)
    fns = {"vmap(grad)": per_example, "batched backward": batched}
    fns.update({f"jit {k}": jax.jit(f) for k, f in fns.items()})
    return {k: (lambda f=f: f(params, xs, ys)) for k, f in fns.items()}


def _floor(model, batch):
    """The per-example weight gradients alone, outer products of stored activations and
    output gradients into fresh arrays by staged's matmul kernel (as its vmap writes them:
    Note [outer products]): the memory any implementation must write, whatever its
    batching rules cost."""
    rng = np.random.default_rng(1)
    linears = [m for m in model if type(m).__name__ == "Linear"]
    pairs = [
        (
            rng.standard_normal((batch, m.out_features)).astype(np.float32),
            rng.standard_normal((batch, m.in_features)).astype(np.float32),
        )
        for m in linears
    ]
    outer = staged.autodiff.matmul.impl
    return lambda: {i: outer(g[:, :, None], x[:, None, :]) for i, (g, x) in enumerate(pairs)}


def _split(cases, rounds, n=20):
    """Print staged's CPU ms per call of each case (medians over ``rounds``), split into
    the NumPy impls of the primitives and Fused kernels it binds (each wrapped in a timer;
    impls called by impls count once), of them the outer products (the stacked matmul of
    one-column matrices), and the rest: Python."""
    spent, inside = {"numpy": 0, "outer": 0}, [False]

    def timer(p, impl):
        def timed(*args, **params):
            if inside[0]:
                return impl(*args, **params)
            inside[0], t0 = True, time.thread_time_ns()
            try:
                return impl(*args, **params)
            finally:
                dt = time.thread_time_ns() - t0
                spent["numpy"] += dt
                if p is staged.autodiff.matmul and args[0].ndim > 2 and args[0].shape[-1] == 1:
                    spent["outer"] += dt
                inside[0] = False

        return timed

    prims = [*staged.autodiff.REGISTRY.values(), *staged.autodiff.FUSED.values()]
    impls = {p: p.impl for p in prims}
    for p in prims:
        p.impl = timer(p, p.impl)
    rows = {k: [] for k in cases}
    try:
        for _ in range(rounds):
            for k, f in cases.items():
                f()
                spent.update(numpy=0, outer=0)
                t0 = time.thread_time_ns()
                for _ in range(n):
                    f()
                total = time.thread_time_ns() - t0
                rows[k].append([v / n / 1e6 for v in (total, spent["numpy"], spent["outer"])])
    finally:
        for p, impl in impls.items():
            p.impl = impl
    base = statistics.median(r[0] for r in rows["batched backward"])
    print("| staged, CPU ms per call | total | NumPy kernels | of them outer products | rest |")
    print("|---|---:|---:|---:|---:|")
    for k, rs in rows.items():
        total, numpy, outer = (statistics.median(r[i] for r in rs) for i in range(3))
        print(
            f"| {k} | {total:.3f} ({total / base:.2f}x) | {numpy:.3f} ({numpy / base:.2f}x) | "
            f"{outer:.3f} ({outer / base:.2f}x) | {total - numpy:.3f} |"
        )


def _timed(fn):
    """``fn`` returning one number of its gradients (``interleaved`` times a loss)."""

    def step():
        g = fn()
        first = next(iter(g.values())) if isinstance(g, dict) else g[0]
        return first.reshape(-1)[0].item()

    return step


def _torch_twin(model):
    t = torch.nn.Sequential(
        *(
            torch.nn.Linear(m.in_features, m.out_features)
            if type(m).__name__ == "Linear"
            else torch.nn.ReLU()
            for m in model
        )
    )
    with torch.no_grad():
        for (_, a), (_, b) in zip(t.named_parameters(), model.named_parameters()):
            a.copy_(torch.tensor(b.detach().numpy()))
    return t


def _check(ours, theirs):
    for k in theirs:
        np.testing.assert_allclose(ours[k].numpy(), theirs[k].numpy(), rtol=1e-4, atol=1e-6)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--profile", action="store_true", help="profile staged's vmap(grad)")
    p.add_argument("--split", action="store_true", help="staged's NumPy kernels and the rest")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    staged.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch, 64)).astype(np.float32)
    y = rng.integers(0, 10, a.batch)
    model = mlp.build()
    ours = _cases(staged, model, staged.tensor(x), staged.tensor(y))
    theirs = _cases(torch, _torch_twin(model), torch.tensor(x), torch.tensor(y))
    _check(ours["vmap(grad)"](), theirs["vmap(grad)"]())
    _check(ours["compiled vmap(grad)"](), theirs["vmap(grad)"]())
    anchors = {} if jax is None else _jax_cases(model, x, y)
    if anchors:
        got = anchors["jit vmap(grad)"]()
        np.testing.assert_allclose(
            np.asarray(got["w0"]), ours["vmap(grad)"]()["0.weight"].numpy(), rtol=1e-4, atol=1e-6
        )
    if a.split:
        _split({k: ours[k] for k in ("vmap(grad)", "batched backward")}, a.rounds)
        return 0
    if a.profile:  # one call's results freed before the next: 20 kept were 540 MB of
        pr = cProfile.Profile()  # fresh pages, whose faults the profile then showed
        pr.runcall(lambda: [ours["vmap(grad)"]() and None for _ in range(20)])
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)
        return 0
    steps = {f"staged {k}": _timed(f) for k, f in ours.items()}
    steps.update({f"torch.func {k}": _timed(f) for k, f in theirs.items()})
    steps.update({f"JAX {k}": _timed(f) for k, f in anchors.items()})
    floor = "NumPy: the per-example weight gradients' outer products alone"
    steps[floor] = _timed(_floor(model, a.batch))
    times = interleaved(steps, a.rounds)
    base = "staged batched backward"
    print(
        f"# per-example gradients: vmap(grad) vs one batched backward, MLP 64-128-128-10, "
        f"batch {a.batch}\n"
    )
    print(environment(a.rounds, base, torch) + "\n")
    print(ratio_table({"": times}, list(steps), base) + "\n")
    print("| library | vmap(grad) / batched backward |\n|---|---:|")
    libs = ["staged", "staged compiled", "torch.func"] + (["JAX jit", "JAX"] if anchors else [])
    for lib in libs:
        r = [v / b for v, b in zip(times[f"{lib} vmap(grad)"], times[f"{lib} batched backward"])]
        print(f"| {lib} | {statistics.median(r):.2f} |")
    r = [v / b for v, b in zip(times[floor], times[base])]
    print(f"| floor: staged's outer products alone | {statistics.median(r):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
