"""An MLP classifier for scikit-learn's digits, trained eagerly or with a compiled step.

python -m models.mlp --compile --backend llvm-cpu
"""

from __future__ import annotations

from models import common  # noqa: I001  (first: sets OPENBLAS_THREAD_TIMEOUT before NumPy)

import sys

import staged
import staged.nn.functional as F
from staged import nn, optim

from models.common import classification_step, ddp_wrap
from models.data import load_digits


def build(seed: int = 0, hidden: int = 128):
    """A fresh 64-hidden-hidden-10 MLP, seeded."""
    staged.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(64, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 10),
    )


def export_spec(batch_size: int = 32, seed: int = 0) -> dict:
    """What `staged export-onnx` exports: keyword arguments of ``staged.onnx.export``
    (loss and gradients of a fresh seeded model, dynamic batch), plus ``optimizer``, the
    factory used with ``--training-step``."""
    model = build(seed)
    x, y = staged.randn(batch_size, 64), staged.randint(0, 10, (batch_size,))
    return dict(
        fn_or_module=model,
        example_args=(x, y),
        loss_fn=F.cross_entropy,
        dynamic_axes={"input": {0: "batch"}, "target": {0: "batch"}},
        optimizer=lambda params: optim.SGD(params, lr=0.05),
    )


def new_run(seed=0, lr=0.05, compile=False, backend="llvm-cpu", ddp=False):
    """(model, step) for a fresh seeded model with SGD (momentum 0.9); `step` is compiled
    when asked, and data-parallel (DistributedDataParallel) with ``ddp``."""
    model = build(seed)
    step = classification_step(
        ddp_wrap(model, ddp), optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    )
    return model, (staged.compile(step, backend=backend) if compile else step)


def accuracy(model, x, y) -> float:
    """Held-out accuracy of the model's argmax prediction."""
    with staged.no_grad():
        pred = model(staged.tensor(x)).argmax(1).numpy()
    return float((pred == y).mean())


def main(argv=None) -> int:
    a = common.parser(
        "python -m models.mlp", __doc__, epochs=20, batch_size=32, lr=0.05
    ).parse_args(argv)
    data = load_digits(seed=a.seed)
    return common.main(
        a,
        "mlp",
        f"digits: {len(data[0])} train / {len(data[2])} test; MLP 64-128-128-10, "
        f"SGD lr={a.lr} momentum=0.9",
        data,
        new_run,
        lambda model, x, y: ("held-out accuracy", f"{accuracy(model, x, y):.2%}"),
    )


if __name__ == "__main__":
    sys.exit(main())
