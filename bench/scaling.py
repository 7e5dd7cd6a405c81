"""Cost as work grows: ms/step and peak memory of an SGD training step for staged eager,
staged compiled, torch eager and JAX jit, over transformers of 1-12 layers and widths
64-768 and an MLP at batch 32-4096.

    python bench/scaling.py [--full] [--steps-s 1.0] [--impls ...] [--out bench/out]

Every (workload, implementation) runs in a process of its own, so that its peak resident
memory is its own: the figure is the high-water mark of its RSS over the RSS it had once
its libraries were imported and their runtimes started (IREE's device, XLA's client),
where the mark was reset: the framework's copy of the parameters, their gradients,
optimizer state, activations and, compiled, the trace and module (compiled into the cache
by a process before, so IREE's compiler is not counted); the NumPy arrays every
implementation starts from are made before, in all alike. A block's result is read at
its end only, so a compiled step's calls run queued behind each other. ms/step is the
median of 5 blocks of about ``--steps-s / 5`` each, and of at least 4 steps (a slow step
read every step would hide what queued calls hold), after 3 warm-up steps (a compiled
step's trace and IREE compile are not in it: see ``first_step.py``). Processes run one
at a time, the implementations of one workload back to back, so a ratio compares runs
seconds apart; read it with the load average in the header. The default grid is the
issue's corners; ``--full`` runs all of it (several minutes of IREE compiles for the large
transformers).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import _uniform, block_shapes, environment, mlp_loss, mlp_params  # noqa: E402

LR = 0.01
T, V, BATCH = 32, 64, 8  # the transformer's sequence length, vocabulary and batch
IMPLS = ("staged eager", "staged compiled", "torch eager", "JAX jit")


# --- workloads, written once over an F namespace (staged.nn.functional / torch's) ----------
def transformer_params(rng, layers, width):
    def uniform(shape):
        return _uniform(rng, shape, shape[1])

    p = {
        "emb": rng.standard_normal((V, width)).astype(np.float32) * 0.1,
        "pos": rng.standard_normal((T, width)).astype(np.float32) * 0.1,
        "head": uniform((V, width)),
    }
    for i in range(layers):
        for n in ("ln1", "ln2"):
            p[f"{i}{n}w"], p[f"{i}{n}b"] = np.ones(width, np.float32), np.zeros(width, np.float32)
        for n, shape in block_shapes(width).items():
            p[f"{i}{n}"] = uniform(shape)
    return p


def transformer_loss(F, P, x, y, causal, layers, width):
    b, heads = x.shape[0], width // 16
    h = F.embedding(x, P["emb"]) + P["pos"]

    def split(t):
        return t.reshape(b, T, heads, 16).permute(0, 2, 1, 3)

    for i in range(layers):
        a = F.layer_norm(h, (width,), P[f"{i}ln1w"], P[f"{i}ln1b"])
        q, k, v = (split(F.linear(a, P[f"{i}{n}"])) for n in ("wq", "wk", "wv"))
        att = (q @ k.transpose(-2, -1) / 4.0 + causal).softmax(-1) @ v
        h = h + F.linear(att.permute(0, 2, 1, 3).reshape(b, T, width), P[f"{i}wo"])
        m = F.layer_norm(h, (width,), P[f"{i}ln2w"], P[f"{i}ln2b"])
        h = h + F.linear(F.gelu(F.linear(m, P[f"{i}w1"])), P[f"{i}w2"])
    return F.cross_entropy(F.linear(h, P["head"]).reshape(b * T, V), y.reshape(b * T))


def workload(name):
    """(params, (x, y), {const: array}, loss(F, P, x, y, **consts)) of ``name``:
    ``transformer-L-D`` or ``mlp-B``."""
    rng = np.random.default_rng(0)
    kind, *args = name.split("-")
    if kind == "mlp":
        (batch,) = map(int, args)
        data = (rng.standard_normal((batch, 784), np.float32), rng.integers(0, 10, batch))
        return mlp_params(rng), data, {}, mlp_loss
    layers, width = map(int, args)
    data = (rng.integers(0, V, (BATCH, T)), rng.integers(0, V, (BATCH, T)))
    causal = np.triu(np.full((T, T), -1e9, np.float32), 1)

    def loss(F, P, x, y, causal):
        return transformer_loss(F, P, x, y, causal, layers, width)

    return transformer_params(rng, layers, width), data, {"causal": causal}, loss


def framework_step(lib, params, data, consts, loss_fn):
    """One SGD step in staged or torch (the same code), as a zero-argument function."""
    F = lib.nn.functional
    P = {k: lib.nn.Parameter(lib.tensor(v)) for k, v in params.items()}
    c = {k: lib.tensor(v) for k, v in consts.items()}
    trained = list(P.values())
    x, y = (lib.tensor(a) for a in data)

    def step(x, y):
        loss = loss_fn(F, P, x, y, **c)
        loss.backward()
        with lib.no_grad():
            for p in trained:
                p.sub_(LR * p.grad)
                p.grad = None
        return loss

    return step, x, y


def jax_transformer_loss(P, x, y, causal, layers, width):
    """The transformer in jax.numpy, with compiled_steps.py's JAX layers."""
    import jax

    from bench.compiled_steps import _jax_cross_entropy, _jax_layer_norm, _jax_linear

    b, heads = x.shape[0], width // 16
    h = P["emb"][x] + P["pos"]

    def split(t):
        return t.reshape(b, T, heads, 16).transpose(0, 2, 1, 3)

    for i in range(layers):
        a = _jax_layer_norm(h, P[f"{i}ln1w"], P[f"{i}ln1b"])
        q, k, v = (split(_jax_linear(a, P[f"{i}{n}"])) for n in ("wq", "wk", "wv"))
        att = jax.nn.softmax(q @ k.swapaxes(-2, -1) / 4.0 + causal, axis=-1) @ v
        h = h + _jax_linear(att.transpose(0, 2, 1, 3).reshape(b, T, width), P[f"{i}wo"])
        m = _jax_layer_norm(h, P[f"{i}ln2w"], P[f"{i}ln2b"])
        h = h + _jax_linear(
            jax.nn.gelu(_jax_linear(m, P[f"{i}w1"]), approximate=False), P[f"{i}w2"]
        )
    return _jax_cross_entropy(_jax_linear(h, P["head"]).reshape(b * T, V), y.reshape(b * T))


def jax_step(name, params, data, consts):
    """A jitted SGD step (parameters donated), as a zero-argument function."""
    import jax
    import jax.numpy as jnp

    from bench.compiled_steps import jax_mlp_loss

    if name.startswith("mlp"):
        loss = jax_mlp_loss
    else:
        layers, width = map(int, name.split("-")[1:])

        def loss(P, x, y, causal):
            return jax_transformer_loss(P, x, y, causal, layers, width)

    def step(params, *args):
        value, grads = jax.value_and_grad(loss)(params, *args)
        return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads), value

    jstep = jax.jit(step, donate_argnums=0)
    state = {"p": {k: jnp.asarray(v) for k, v in params.items()}}
    args = [jnp.asarray(a) for a in data] + [jnp.asarray(v) for v in consts.values()]

    def run():
        state["p"], value = jstep(state["p"], *args)
        return value

    return run


# --- one process per (workload, implementation) --------------------------------------------
def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024  # kB
    raise KeyError(field)


def _base_mb() -> float:
    """The resident memory now, where the high-water mark (``VmHWM``, the peak) starts
    afresh (Linux's ``clear_refs`` 5): what the process held before, while importing its
    libraries or as the copy of the driver ``subprocess`` forked, is not its step's peak."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_mb("VmRSS")


def worker(impl: str, name: str, steps_s: float) -> dict:
    params, data, consts, loss_fn = workload(name)
    if impl == "JAX jit":
        import jax

        import bench.compiled_steps  # noqa: F401  (its JAX layers; its imports before the base)

        jax.jit(lambda a: a + 1)(1.0).block_until_ready()  # XLA's client up, as a device
        base = _base_mb()
        run = jax_step(name, params, data, consts)
    else:
        if impl == "torch eager":
            import torch as lib

            lib.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        else:
            import staged as lib

            if impl == "staged compiled":  # the IREE runtime and its device up, as torch's
                from staged.runtime.device import device  # libraries are when imported

                device()
        base = _base_mb()
        step, x, y = framework_step(lib, params, data, consts, loss_fn)
        if impl == "staged compiled":
            step = lib.compile(step)

        def run():
            return step(x, y)

    for _ in range(3):
        float(run())
    if steps_s == 0:  # a warm-up run (the compile cache filled)
        return {}
    n = max(4, int(steps_s / 5 / max(_timed(run, 1), 1e-6)))  # unread: calls queue
    ms = sorted(_timed(run, n) * 1e3 for _ in range(5))[2]
    return {"ms": ms, "peak_mb": _status_mb("VmHWM") - base}


def _timed(run, n) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        value = run()
    float(value)
    return (time.perf_counter() - t0) / n


def measure(impl, name, steps_s, threads) -> dict | None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    cmd = [sys.executable, __file__, "--worker", impl, name, "--steps-s", str(steps_s)]
    if impl == "staged compiled":  # compile into the cache first: the compiler's own
        subprocess.run(cmd[:-1] + ["0"], env=env, capture_output=True)  # memory is not the step's
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        print(f"  {impl} on {name} failed: {tail}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def grid(full: bool) -> list:
    if full:
        return (
            [f"transformer-{n}-64" for n in (1, 2, 4, 8, 12)]
            + [f"transformer-2-{d}" for d in (128, 256, 512, 768)]
            + [f"mlp-{b}" for b in (32, 128, 512, 1024, 4096)]
        )
    return (
        [f"transformer-{n}-64" for n in (1, 4, 12)]
        + [f"transformer-2-{d}" for d in (256, 768)]
        + [f"mlp-{b}" for b in (32, 1024, 4096)]
    )


def _table(rows, impls) -> str:
    head = "| workload |" + "".join(f" {i} ms | {i} MB |" for i in impls)
    lines = [head, "| --- |" + " ---: | ---: |" * len(impls)]
    for name, res in rows.items():
        cells = []
        for i in impls:
            r = res.get(i)
            cells += ["n/a", "n/a"] if r is None else [f"{r['ms']:.2f}", f"{r['peak_mb']:.0f}"]
        lines.append(f"| {name} |" + "".join(f" {c} |" for c in cells))
    return "\n".join(lines)


def _plot(rows, impls, out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, label in ((axes[0], "ms", "ms/step"), (axes[1], "peak_mb", "peak MB")):
        names = list(rows)
        for i in impls:
            ys = [rows[n].get(i, {}) or {} for n in names]
            ax.plot(names, [y.get(key, np.nan) for y in ys], marker="o", label=i)
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.tick_params(axis="x", rotation=60)
        ax.legend()
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "scaling.png", dpi=110)
    print(f"wrote {out / 'scaling.png'}")


def _workload_name(name: str) -> str:
    """``transformer-LAYERS-WIDTH`` (width a multiple of 16) or ``mlp-BATCH``."""
    kind, *args = name.split("-")
    ok = all(a.isdigit() and int(a) > 0 for a in args) and (
        (kind == "mlp" and len(args) == 1)
        or (kind == "transformer" and len(args) == 2 and int(args[1]) % 16 == 0)
    )
    if not ok:
        raise argparse.ArgumentTypeError(
            f"{name!r}: expected transformer-LAYERS-WIDTH (width a multiple of 16) or mlp-BATCH"
        )
    return name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="the whole grid (slow)")
    ap.add_argument("--steps-s", type=float, default=1.0, help="seconds of timed steps")
    ap.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads of NumPy's BLAS, torch and IREE's workers (OMP_NUM_THREADS; XLA keeps its own pool)",
    )
    ap.add_argument(
        "--workloads", nargs="+", type=_workload_name, help="e.g. transformer-2-64 mlp-256"
    )
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    ap.add_argument("--worker", nargs=2, metavar=("IMPL", "WORKLOAD"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker, args.steps_s)))
        return 0
    print("## Cost as work grows\n")
    print("\n".join(environment(1, "").splitlines()[:-1]))  # no ratios: each runs alone
    print(
        f"- {args.threads} thread(s) for NumPy's BLAS, torch and IREE's workers; XLA uses its own pool"
    )
    rows = {}
    for name in args.workloads or grid(args.full):
        rows[name] = {i: measure(i, name, args.steps_s, args.threads) for i in args.impls}
        print(
            f"  {name}: " + ", ".join(f"{i} {r['ms']:.2f} ms" for i, r in rows[name].items() if r),
            file=sys.stderr,
        )
    print()
    print(_table(rows, args.impls))
    _plot(rows, args.impls, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
