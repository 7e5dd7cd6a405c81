"""``staged.backends.openmp``: no OpenMP here; eager threads are BLAS's (``set_num_threads``)."""


def is_available() -> bool:
    return False
