"""``torch.special``'s counterpart: torch.special's names for staged's ops (``gammaln``,
``psi``, ``expit``, ``erfinv`` ...), declared in ``SPECIAL`` of
``staged/eager/ops/table.py``."""

from .eager.ops import table

globals().update(table.special())
__all__ = sorted(table.special())
