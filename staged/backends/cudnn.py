"""``staged.backends.cudnn``: flags scripts set; no effect (no cuDNN here)."""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version():
    return None
