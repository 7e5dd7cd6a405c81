"""Dropout layers: zero elements (or whole channels) while training, the identity in eval
mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .. import functional as F
from ..module import Module


class _DropoutNd(Module):
    fn: ClassVar[Callable[..., Any] | None] = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return type(self).fn(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability ``p`` in training mode, scaling the rest by
    ``1 / (1 - p)``; ``eval()`` turns it into the identity."""

    fn = F.dropout


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p``."""

    fn = F.dropout1d


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``(N, C, H, W)`` with probability ``p``."""

    fn = F.dropout2d


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` with probability ``p``."""

    fn = F.dropout3d


class AlphaDropout(_DropoutNd):
    """Dropout that keeps SELU's zero mean and unit variance (``inplace`` is ignored, as in
    torch)."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels ``input[n, c]`` (one draw each) for SELU networks."""

    fn = F.feature_alpha_dropout
