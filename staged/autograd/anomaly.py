"""Anomaly detection (``detect_anomaly``, ``set_detect_anomaly``), global as in PyTorch.

When on, every Node created remembers the stack of the forward call that made it
(``node.metadata["traceback_"]``); an error raised while a Node runs in backward is
preceded by a UserWarning showing that stack, and with ``check_nan`` a Node whose
gradients contain NaN raises ``RuntimeError: Function 'XBackward0' returned nan values
in its 0th output.``; under capture that check is recorded in the graph, and a compiled
step raises it when its results are read, keeping its old state (Note [index checks]).
"""

from __future__ import annotations

import functools
import traceback
import warnings

import numpy as np

from ..eager.checks import require
from ..eager.grad_mode import no_grad
from ..eager.interceptor import current_interceptor

enabled = False  # read by Node.__init__ and the engine: off costs one global lookup
check_nan = True


def is_anomaly_enabled() -> bool:
    return enabled


def is_anomaly_check_nan_enabled() -> bool:
    return check_nan


def forward_stack() -> str:
    """The user's stack where a Node is being created (staged's own frames left out)."""
    frames = [
        f
        for f in traceback.extract_stack()[:-1]
        if "/staged/eager/" not in f.filename and "/staged/autodiff/" not in f.filename
    ]
    return "".join(traceback.format_list(frames))


class set_detect_anomaly:
    """Turn anomaly detection on or off: at once when called, for a block as a context
    manager."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = is_anomaly_enabled(), is_anomaly_check_nan_enabled()
        _set(bool(mode), bool(check_nan))

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _set(*self.prev)
        return False


class detect_anomaly:
    """Context manager and decorator enabling anomaly detection (see the module doc)."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime "
            "and should only be enabled for debugging.",
            UserWarning,
            stacklevel=2,
        )

    def __enter__(self):
        self.prev = (enabled, check_nan)
        _set(True, self.check_nan)

    def __exit__(self, *exc):
        _set(*self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


def _set(mode, nan):
    global enabled, check_nan
    enabled, check_nan = mode, nan


def report_error(node) -> None:
    """Called while an error raised by ``node`` in backward propagates."""
    stack = node.metadata.get("traceback_")
    if stack is None:
        warnings.warn(
            f"Error detected in {node.name()}. No forward pass information available. "
            "Enable detect anomaly during forward pass for more information.",
            UserWarning,
            stacklevel=2,
        )
    else:
        warnings.warn(
            f"Error detected in {node.name()}. Traceback of forward call that caused "
            f"the error:\n{stack}",
            UserWarning,
            stacklevel=2,
        )


def check_outputs(node, outs) -> None:
    """Raise if a gradient ``node`` produced holds NaN (anomaly mode with check_nan); under
    capture, record the check (a compiled step raises it when its results are read)."""
    for i, g in enumerate(outs):
        if g is None or not (g.dtype.is_floating_point or g.dtype.is_complex):
            continue
        message = f"Function '{node.name()}' returned nan values in its {i}th output."
        p = g._payload
        if type(p) is np.ndarray:
            if np.isnan(p).any():
                raise RuntimeError(message)
        elif current_interceptor() is not None:
            with no_grad():
                require(g.isnan().logical_not(), RuntimeError, message)
