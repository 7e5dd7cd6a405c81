"""Dropout: zeroes elements while training, the identity in eval mode."""
from __future__ import annotations

from .. import functional as F
from ..module import Module


class Dropout(Module):
    """Zero each element with probability ``p`` in training mode, scaling the rest by
    ``1 / (1 - p)``; ``eval()`` turns it into the identity."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
