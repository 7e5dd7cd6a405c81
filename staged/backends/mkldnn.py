"""``staged.backends.mkldnn``: oneDNN is not in this build; eager kernels are NumPy's."""

enabled = True


def is_available() -> bool:
    return False
