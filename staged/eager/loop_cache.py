"""What an eager loop would otherwise work out again at every iteration (a reshape's sizes,
a permutation, an indexing plan, a number's array), kept under a key of what the loop
repeats. A cache empties itself when full: a stream of new keys costs one clear per
``size`` entries and never grows memory."""

from __future__ import annotations


class LoopCache(dict):
    """A dict whose ``put`` clears it first once it holds ``size`` entries (reads are
    ``dict.get``)."""

    __slots__ = ("size",)

    def __init__(self, size: int = 256):
        super().__init__()
        self.size = size

    def put(self, key, value) -> None:
        if len(self) >= self.size:
            self.clear()
        self[key] = value
