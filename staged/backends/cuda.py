"""``staged.backends.cuda``: the TF32 switches scripts set; no effect here."""

from types import SimpleNamespace

matmul = SimpleNamespace(
    allow_tf32=False,
    allow_fp16_reduced_precision_reduction=True,
    allow_bf16_reduced_precision_reduction=True,
)


def is_built() -> bool:
    return False
