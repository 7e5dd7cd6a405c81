import numpy as np

def fma(
    a: np.ndarray, b: np.ndarray | float, c: np.ndarray | float, out: np.ndarray | None = None
) -> np.ndarray: ...
