"""A LeNet-style CNN for scikit-learn's 8x8 digits, trained eagerly or with a compiled step.

python -m models.cnn --compile --backend llvm-cpu
"""

from __future__ import annotations

from models import common  # noqa: I001  (first: sets OPENBLAS_THREAD_TIMEOUT before NumPy)

import sys

import staged
import staged.nn.functional as F
from staged import nn, optim

from models.common import classification_step, ddp_wrap
from models.data import load_digits


def build(seed: int = 0, channels=(8, 16), hidden: int = 64, batch_norm: bool = True):
    """conv 3x3 -> ReLU -> max-pool 2 (8x8 -> 4x4), conv 3x3 -> BatchNorm -> ReLU ->
    max-pool 2 (-> 2x2), then two Linear layers to 10 classes; seeded. Input (N, 64)
    rows of pixels, reshaped to (N, 1, 8, 8)."""
    staged.manual_seed(seed)
    c1, c2 = channels
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),
        nn.Conv2d(1, c1, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1),
        nn.BatchNorm2d(c2) if batch_norm else nn.Identity(),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * c2, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 10),
    )


def export_spec(batch_size: int = 16, seed: int = 0) -> dict:
    """What `staged export-onnx` exports (see models/mlp.py): loss and gradients of a fresh
    seeded CNN (training mode, BatchNorm included: its running variance's ``n / (n - 1)``
    follows the dynamic batch, ``staged/tracing/dynamic.py``); SGD for ``--training-step``."""
    model = build(seed)
    x, y = staged.randn(batch_size, 64), staged.randint(0, 10, (batch_size,))
    return dict(
        fn_or_module=model,
        example_args=(x, y),
        loss_fn=F.cross_entropy,
        dynamic_axes={"input": {0: "batch"}, "target": {0: "batch"}},
        optimizer=lambda params: optim.SGD(params, lr=0.05),
    )


def new_run(seed=0, lr=0.05, compile=False, backend="llvm-cpu", ddp=False, **build_kw):
    """(model, step) for a fresh seeded CNN with SGD (momentum 0.9); compiled when asked,
    data-parallel (DistributedDataParallel) with ``ddp``."""
    model = build(seed, **build_kw)
    step = classification_step(
        ddp_wrap(model, ddp), optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    )
    return model, (staged.compile(step, backend=backend) if compile else step)


def accuracy(model, x, y) -> float:
    """Held-out accuracy in eval mode (BatchNorm uses its running statistics)."""
    model.eval()
    with staged.no_grad():
        pred = model(staged.tensor(x)).argmax(1).numpy()
    model.train()
    return float((pred == y).mean())


def main(argv=None) -> int:
    a = common.parser(
        "python -m models.cnn", __doc__, epochs=10, batch_size=32, lr=0.05
    ).parse_args(argv)
    data = load_digits(seed=a.seed)
    return common.main(
        a,
        "cnn",
        f"digits: {len(data[0])} train / {len(data[2])} test; CNN conv8-pool-"
        f"conv16-bn-pool-64-10, SGD lr={a.lr} momentum=0.9",
        data,
        new_run,
        lambda model, x, y: ("held-out accuracy", f"{accuracy(model, x, y):.2%}"),
    )


if __name__ == "__main__":
    sys.exit(main())
