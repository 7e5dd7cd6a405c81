"""The cost of index checks (Note [index checks]) on the models' compiled SGD steps: the
step as compiled (its targets and embedding indices checked, the old state kept and the
results NaN where a check fails, the report read at the next call) against the same step
traced with the checks left out, timed interleaved.

    python bench/index_checks.py [--rounds 12] [--workloads mlp32 mlp256 cnn transformer]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from bench.common import environment, interleaved, item, ratio_table  # noqa: E402
from bench.compiled_steps import WORKLOADS, _causal, sgd_step  # noqa: E402
import staged  # noqa: E402
from staged.tracing import capture as _capture  # noqa: E402

BASE = "unchecked"


def steps(name) -> dict:
    """{"checked": step, "unchecked": step}, both traced and compiled (zero-argument)."""
    make_params, make_data, loss_fn = WORKLOADS[name]
    rng = np.random.default_rng(0)
    params, (x, y) = make_params(rng), make_data(rng)
    consts = {"causal": _causal()} if name == "transformer" else {}
    xs, ys = staged.tensor(x), staged.tensor(y)
    checked = staged.compile(sgd_step(staged, params, loss_fn, consts))
    unchecked = staged.compile(sgd_step(staged, params, loss_fn, consts))
    item(checked(xs, ys))
    with mock.patch.object(_capture, "_apply_checks", lambda *a: []):  # no report, no select
        item(unchecked(xs, ys))
    assert checked._last.captured.checks and not unchecked._last.captured.checks
    return {"checked": lambda: checked(xs, ys), BASE: lambda: unchecked(xs, ys)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    a = p.parse_args(argv)
    results = {}
    for name in a.workloads:
        print(f"{name}: ...", flush=True)
        impls = steps(name)
        losses = {k: [item(s()) for _ in range(3)] for k, s in impls.items()}
        if not np.allclose(losses["checked"], losses[BASE], rtol=1e-6):
            raise AssertionError(f"{name}: losses differ: {losses}")
        results[name] = interleaved(impls, a.rounds)
    print("\n## Index checks on compiled training steps (SGD), f32\n")
    print(environment(a.rounds, BASE) + "\n")
    print(ratio_table(results, ["checked", BASE], BASE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
