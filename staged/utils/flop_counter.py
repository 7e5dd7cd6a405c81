"""``torch.utils.flop_counter``: ``FlopCounterMode`` counts the floating-point operations of
the matrix products run in its context, forward and backward, in all and per Module (what
Lightning's model summary shows, and MFU estimates divide by).

It counts as torch's does, which counts the products of ``mm``, ``bmm``, ``addmm``,
convolutions and attention, two per multiply-add (not the bias adds, the elementwise ops
or the reductions). staged runs all of those as its ``matmul`` primitive (a linear layer,
a convolution's im2col, attention's two products), so one formula counts them: while the
mode is on, fused kernels run as their primitives (``Note [fused kernels]`` in
``eager/dispatch.py``), whose results are the same. The counts are keyed by that primitive
where torch's name the aten op (``aten.mm``, ``aten.convolution``).
"""

from __future__ import annotations

import threading
import warnings
from collections import defaultdict

from ..autodiff.linalg import matmul_flops
from ..autodiff.primitive import REGISTRY
from ..eager import dispatch
from .module_tracker import ModuleTracker

__all__ = ["FlopCounterMode"]

_MATMUL = REGISTRY["matmul"]
_SUFFIXES = ("", "K", "M", "B", "T")


class FlopCounterMode:
    """A context that counts the flops of the matrix products run in it on this thread.

    Args:
        mods: ignored, as torch's (it warns that it is not needed).
        depth: how deep in the Module tree ``get_table`` (printed at exit when
            ``display``) goes.
        display: print the table when the context exits.
        custom_mapping: torch's formulas for other aten ops; staged has no aten ops, so
            a non-empty one raises.

    Example:
        >>> with FlopCounterMode(display=False) as counter:
        ...     model(x).sum().backward()
        >>> counter.get_total_flops()          # forward and backward
        >>> counter.get_flop_counts()["Net.fc1"]
    """

    def __init__(self, mods=None, depth: int = 2, display: bool = True, custom_mapping=None):
        if custom_mapping:
            raise NotImplementedError(
                "FlopCounterMode(custom_mapping=...): staged counts its matmul primitive, "
                "which every matrix product, convolution and attention runs as; it has no "
                "aten ops to map formulas to"
            )
        if mods is not None:
            warnings.warn(
                "mods argument is not needed anymore, you can stop passing it", stacklevel=2
            )
        self.flop_counts: defaultdict = defaultdict(lambda: defaultdict(int))
        self.depth = depth
        self.display = display
        self.mod_tracker = ModuleTracker()
        self._owner: int | None = None

    def get_total_flops(self) -> int:
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> dict:
        """``{module name: {op: flops}}``, with "Global" for the whole context."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None) -> str:
        """The counts per Module down to ``depth`` (default: the mode's), as torch's."""
        depth = self.depth if depth is None else depth
        depth = 999999 if depth is None else depth
        total = self.get_total_flops()
        suffix = _suffix(total)
        subsumed = False

        def rows(name, level):
            nonlocal subsumed
            flops = sum(self.flop_counts[name].values())
            subsumed |= flops >= total
            pad = " " * level
            out = [[pad + name, _with_suffix(flops, suffix), _percent(flops, total)]]
            for op, n in self.flop_counts[name].items():
                label = f"{pad} - {getattr(op, 'name', op)}"
                out.append([label, _with_suffix(n, suffix), _percent(n, total)])
            return out

        values = []
        for name in sorted(self.flop_counts):
            level = name.count(".") + 1
            if name != "Global" and level <= depth:
                values.extend(rows(name, level - 1))
        if "Global" in self.flop_counts and not subsumed:
            for v in values:
                v[0] = " " + v[0]
            values = rows("Global", 0) + values
        return _tabulate(values or [["Global", "0", "0%"]])

    def _count(self, a, b) -> None:
        flops = matmul_flops(a.shape, b.shape)
        for parent in set(self.mod_tracker.parents):
            self.flop_counts[parent][_MATMUL] += flops

    def _layer(self, apply):
        def apply_counted(prim, inputs, params):
            out = apply(prim, inputs, params)
            if prim is _MATMUL and threading.get_ident() == self._owner:
                self._count(*inputs)
            return out

        return apply_counted

    def __enter__(self):
        if self._owner is not None:
            raise RuntimeError("FlopCounterMode is not reentrant: it is already counting")
        self.flop_counts.clear()
        self.mod_tracker.__enter__()
        self._owner = threading.get_ident()
        dispatch.set_layer("flop_counter", self._layer)
        return self

    def __exit__(self, *exc) -> None:
        dispatch.set_layer("flop_counter", None)
        self._owner = None
        self.mod_tracker.__exit__()
        if self.display:
            print(self.get_table(self.depth))


def _suffix(number: int) -> str:
    """torch's: 1.01B shows as 1001M."""
    return _SUFFIXES[max(0, min(len(_SUFFIXES) - 1, (len(str(number)) - 2) // 3))]


def _with_suffix(number: int, suffix: str) -> str:
    return f"{number / 1000 ** _SUFFIXES.index(suffix):.3f}{suffix}"


def _percent(num: int, denom: int) -> str:
    return "0%" if denom == 0 else f"{num / denom:.2%}"


def _tabulate(values) -> str:
    """``values`` under the header Module / FLOP / % Total, the first column left-aligned
    and the others right, as torch's (tabulate's "simple" format)."""
    table = [["Module", "FLOP", "% Total"], *values]
    widths = [max(len(r[i]) for r in table) for i in range(3)]

    def line(cells):
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(table[0]), rule, *map(line, values)])
