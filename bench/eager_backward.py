"""ms per eager backward pass (``loss.backward()`` alone, the forward untimed) of the
example MLP (64-128-128-10, batch 32) and CNN (two conv/pool blocks with BatchNorm, batch
16): staged eager vs torch eager with the same weights, in interleaved rounds.

This is the time the VJP rules and the engine cost per step (issue 16, item 6: rules on
strict primitives); ``--profile`` prints where staged's backward spends it.

    python bench/eager_backward.py [--rounds 12] [--torch-threads 1 2] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, ratio_table  # noqa: E402
import staged  # noqa: E402
import staged.nn.functional as F  # noqa: E402
from models import cnn, mlp  # noqa: E402

import torch  # noqa: E402
import torch.nn as tnn  # noqa: E402


def _torch_twin(model):
    """The torch module of the same architecture and weights as staged ``model``."""
    layers = []
    for m in model:
        name = type(m).__name__
        if name == "Linear":
            layers.append(tnn.Linear(m.in_features, m.out_features))
        elif name == "Conv2d":
            layers.append(
                tnn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, padding=m.padding)
            )
        elif name == "BatchNorm2d":
            layers.append(tnn.BatchNorm2d(m.num_features))
        elif name == "MaxPool2d":
            layers.append(tnn.MaxPool2d(m.kernel_size))
        elif name == "Unflatten":
            layers.append(tnn.Unflatten(m.dim, m.unflattened_size))
        else:
            layers.append(getattr(tnn, name)())
    twin = tnn.Sequential(*layers)
    twin.load_state_dict(
        {k: torch.tensor(np.asarray(v.detach().numpy())) for k, v in model.state_dict().items()}
    )
    return twin


def _cases():
    rng = np.random.default_rng(0)
    out = {}
    for name, build, batch in (("MLP", mlp.build, 32), ("CNN", cnn.build, 16)):
        model = build()
        x = rng.standard_normal((batch, 64)).astype(np.float32)
        y = rng.integers(0, 10, batch)
        xs, ys = staged.tensor(x), staged.tensor(y)
        xt, yt = torch.tensor(x), torch.tensor(y)
        twin = _torch_twin(model)
        out[name] = {
            "staged eager": lambda m=model, a=xs, b=ys: F.cross_entropy(m(a), b),
            "torch eager": lambda m=twin, a=xt, b=yt: torch.nn.functional.cross_entropy(m(a), b),
        }
    return out


def backward_ms(forward, n: int) -> float:
    """Mean ms of ``forward().backward()``'s backward over ``n`` passes."""
    total = 0.0
    for _ in range(n):
        loss = forward()
        t0 = time.perf_counter()
        loss.backward()
        total += time.perf_counter() - t0
    return total / n * 1e3


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--passes", type=int, default=30, help="backward passes per block")
    p.add_argument("--torch-threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--profile", choices=("MLP", "CNN"), help="profile this model's backward")
    a = p.parse_args(argv)
    cases = _cases()
    if a.profile:
        pr = cProfile.Profile()
        for _ in range(a.passes):
            loss = cases[a.profile]["staged eager"]()
            pr.enable()
            loss.backward()
            pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(20)
        return 0
    print("# eager backward pass, staged vs torch\n")
    print(environment(a.rounds, "torch eager (1 thread)", torch))
    results = {}
    names = ["staged eager"] + [f"torch eager ({n} thread{'s' * (n > 1)})" for n in a.torch_threads]
    for case, impls in cases.items():
        times = {n: [] for n in names}
        for fn in impls.values():  # warm-up
            backward_ms(fn, 3)
        for _ in range(a.rounds):
            times["staged eager"].append(backward_ms(impls["staged eager"], a.passes))
            for n, name in zip(a.torch_threads, names[1:]):
                torch.set_num_threads(n)
                times[name].append(backward_ms(impls["torch eager"], a.passes))
        results[case] = times
    print()
    print(ratio_table(results, names, names[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
