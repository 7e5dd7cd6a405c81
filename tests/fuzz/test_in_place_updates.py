"""Random steps whose state is written in place (Note [state in place] in
staged/lower/mlir/in_place.py), compiled with in place forced on every step, against the
same step run eagerly: two or three square state tensors read by the loss and by metrics
through transposes, slices, casts and products, then updated in a drawn order by updates
that read their own state and the others' (old or new) the same ways. Three calls each;
the outputs and then the state must agree.

What it hunts: a dispatch that writes a state tensor while reading it at other positions
(``w += (2 * w).T``, ``w -= w[0:1]``), and a reader of the old value that IREE runs after
the write (a matmul reading a slice of ``w`` that IREE clones into its dispatch).

CI runs ``CI_SEEDS`` fixed seeds (one compile each, about 1 s on 2 cores);
``STAGED_FUZZ_EXAMPLES=N`` runs N seeds instead. A failure names its seed and its step."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

import staged

CI_SEEDS = 12
SEEDS = range(int(os.environ.get("STAGED_FUZZ_EXAMPLES", "0")) or CI_SEEDS)
N = 16  # the state tensors are N x N

# how a tensor is read: (description, function of it), each giving an N x N tensor
READS = [
    ("w", lambda w: w),
    ("w.T", lambda w: w.T),
    ("(2 * w).T", lambda w: (2 * w).T),
    ("w[0:1]", lambda w: w[0:1].expand(N, N)),
    ("w[:, 1:2]", lambda w: w[:, 1:2].expand(N, N)),
    ("w[::2] tiled", lambda w: w[::2].repeat(2, 1)),
    ("w.double().T.float()", lambda w: w.double().T.float()),
    ("w.clone().T", lambda w: w.clone().T),
    ("w.sum(0)", lambda w: w.sum(0, keepdim=True).expand(N, N) / N),
    ("w.exp()", lambda w: w.exp()),
]


def _case(seed):
    """A step over fresh state, as a function, and its description."""
    rng = random.Random(seed)
    k = rng.choice([2, 3])
    reads = {i: rng.sample(range(len(READS)), 2) for i in range(k)}
    metrics = [(rng.randrange(k), rng.randrange(len(READS))) for _ in range(rng.randint(0, 2))]
    order = rng.sample(range(k), k)
    updates = [
        (i, rng.choice(["add_", "sub_", "copy_"]), rng.randrange(k), rng.randrange(len(READS)))
        for i in order
    ]
    read_after = rng.random() < 0.3
    about = (
        f"seed {seed}: {k} states; loss reads {[[READS[r][0] for r in rs] for rs in reads.values()]}"
        f"; metrics {[(i, READS[r][0]) for i, r in metrics]}; updates "
        f"{[(i, how, j, READS[r][0]) for i, how, j, r in updates]}; read after: {read_after}"
    )
    state0 = [
        np.random.default_rng(seed * 10 + i).standard_normal((N, N)).astype(np.float32) / 4
        for i in range(k)
    ]

    def make():
        ws = [staged.tensor(a, requires_grad=True) for a in state0]

        def step(x):
            loss = sum(
                (staged.tanh(x @ READS[r][1](ws[i])) ** 2).mean()
                for i, rs in reads.items()
                for r in rs
            )
            outs = [(x @ READS[r][1](ws[i])).abs().sum() for i, r in metrics]
            loss.backward()
            with staged.no_grad():
                for i, how, j, r in updates:
                    g = ws[i].grad
                    value = 0.5 * ws[i] - 0.1 * g + 0.05 * READS[r][1](ws[j])
                    if how == "copy_":
                        ws[i].copy_(value)
                    else:
                        getattr(ws[i], how)(0.1 * value)
                    ws[i].grad = None
            if read_after:
                outs.append((x @ ws[0]).sum())
            return (loss, *outs)

        return step, ws

    return make, about


@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_writing_its_state_in_place_matches_eager(forced, seed):
    make, about = _case(seed)
    x = staged.tensor(np.random.default_rng(1000 + seed).standard_normal((5, N)).astype(np.float32))
    eager, eager_state = make()
    step, state = make()
    compiled = staged.compile(step, backend="llvm-cpu")
    for call in range(3):
        want = [t.item() for t in eager(x)]
        got = [t.item() for t in compiled(x)]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"call {call}; {about}")
    for k, (a, b) in enumerate(zip(eager_state, state)):
        np.testing.assert_allclose(
            b.detach().numpy(),
            a.detach().numpy(),
            rtol=1e-4,
            atol=1e-5,
            err_msg=f"state {k}; {about}",
        )
