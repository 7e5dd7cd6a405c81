"""``torch._tensor_str``: the print options as torch's ``PRINT_OPTS`` and the pieces of a
tensor's repr that tensor subclasses' own reprs call (PyTorch Geometric's ``Index``)."""

from __future__ import annotations

from .eager.printing import OPTIONS, add_suffixes, array_text, get_printoptions, set_printoptions
from .eager.tensor import Tensor

__all__ = ["PRINT_OPTS", "get_printoptions", "set_printoptions"]


class _PrinterOptions:
    """The current print options as attributes (``PRINT_OPTS.linewidth``); set them with
    ``set_printoptions``."""

    def __getattr__(self, name: str):
        try:
            return OPTIONS[name]
        except KeyError:
            raise AttributeError(f"print options have no {name!r}") from None


PRINT_OPTS = _PrinterOptions()


def _tensor_str(self: Tensor, indent: int) -> str:
    """The values of ``self`` as its repr writes them, lines after the first ``indent``
    in."""
    return array_text(self.detach().numpy(), " " * indent)


_add_suffixes = add_suffixes
