"""``staged.backends.cudnn``: flags scripts set; no effect (no cuDNN here)."""

import contextlib
import sys

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version():
    return None


@contextlib.contextmanager
def flags(
    enabled=False,
    benchmark=False,
    benchmark_limit=10,
    deterministic=False,
    allow_tf32=True,
    fp32_precision="none",
    depthwise_kernel="auto",
):
    """torch's context setting the flags above for a block (transformers' CTC loss turns
    cuDNN off so): set, then restored; they change nothing here."""
    module = sys.modules[__name__]
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    saved = {n: getattr(module, n) for n in names}
    module.__dict__.update(zip(names, (enabled, benchmark, deterministic, allow_tf32)))
    try:
        yield
    finally:
        module.__dict__.update(saved)
