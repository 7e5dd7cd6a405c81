"""Muon, following PyTorch's single-tensor implementation."""

from __future__ import annotations

import math

from ..dtypes import float32
from ..eager.factories import zeros_like
from ..eager.ops.elementwise import where
from .optimizer import Optimizer, check_tensor_lr


class Muon(Optimizer):
    """Momentum SGD for 2-D parameters whose update is orthogonalized: ``ns_steps``
    Newton-Schulz iterations with ``ns_coefficients`` take the (Nesterov) momentum towards
    the nearest semi-orthogonal matrix. As torch's, the iteration runs in bfloat16
    (``_orthogonalize``); weight decay is decoupled, and ``adjust_lr_fn`` scales ``lr`` by
    the shape: ``"original"`` (None) ``sqrt(max(1, rows / cols))``, ``"match_rms_adamw"``
    ``0.2 * sqrt(max(rows, cols))``."""

    def __init__(
        self,
        params,
        lr=1e-3,
        weight_decay=0.1,
        momentum=0.95,
        nesterov=True,
        ns_coefficients=(3.4445, -4.775, 2.0315),
        eps=1e-7,
        ns_steps=5,
        adjust_lr_fn=None,
    ):
        check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(
            params,
            dict(
                lr=lr,
                weight_decay=weight_decay,
                momentum=momentum,
                nesterov=nesterov,
                ns_coefficients=ns_coefficients,
                eps=eps,
                ns_steps=ns_steps,
                adjust_lr_fn=adjust_lr_fn,
            ),
        )
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        "Muon only supports 2D parameters whereas we found a parameter with "
                        f"size: {p.size()}"
                    )

    def _update(self, p, grad, state, h):
        if p.is_complex():
            raise RuntimeError("Muon does not support complex parameters")
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = zeros_like(grad)
        buf = state["momentum_buffer"]
        one_minus = h.one_minus("momentum")
        buf.add_((grad - buf) * one_minus)
        # grad.lerp(buf, momentum) in torch's arithmetic for a weight >= 0.5
        update = buf - (buf - grad) * one_minus if h.flag("nesterov") else buf
        update = _orthogonalize(update, h)
        shape = tuple(p.shape)
        p.mul_(h.number("1 - lr * weight_decay", lambda g: 1 - g["lr"] * g["weight_decay"]))
        lr = h.number(f"-adjusted lr {shape}", lambda g: -_adjust_lr(g, shape))
        p.add_(update.to(p.dtype) * lr)


def _adjust_lr(group, shape) -> float:
    """``group["lr"]`` scaled for a parameter of ``shape`` by ``group["adjust_lr_fn"]``."""
    rows, cols = shape
    fn = group["adjust_lr_fn"]
    if fn is None or fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return group["lr"] * ratio


def _bf16(x):
    """``x`` (float32) rounded to bfloat16 (8 significant bits, to nearest even), as each of
    torch's bfloat16 ops rounds its float32 result. Not by a cast: IREE drops the rounding
    of a one-element bfloat16 tensor (the norm; the Gram matrix of a (1, n) parameter), so
    by Veltkamp's splitting ``t - (t - x)``, ``t = x * (2**16 + 1)``, which rounds so for
    normal numbers below 2**112 (above, ``x`` as is: its norm overflows, in torch too)."""
    t = x * 65537.0
    return where(t.isinf(), x, t - (t - x))


def _orthogonalize(update, h):
    """torch's ``_zeropower_via_newtonschulz``: the update in bfloat16, scaled to norm 1,
    then ``X <- a X + (b G + c G @ G) @ X`` with ``G = X @ X.T`` (``X`` wide). torch's
    bfloat16 ops compute in float32 and round once, so here float32 matrices are rounded
    to bfloat16 (``_bf16``) after each of them. Returns float32."""
    steps = h.fixed("ns_steps")
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(h.group["ns_coefficients"]) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = (h.number(f"ns_{k}") for k in "abc")
    x = _bf16(update.to(float32))
    wide = x.shape[0] <= x.shape[1]
    x = x if wide else x.mT
    x = _bf16(x / _bf16(_bf16(x.norm()).clamp(min=h.number("eps"))))
    for _ in range(steps):
        gram = _bf16(x @ x.mT)
        x = _bf16(a * x + _bf16(b * gram + c * (gram @ gram)) @ x)
    return x if wide else x.mT
