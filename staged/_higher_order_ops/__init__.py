"""``torch._higher_order_ops``: the structured control-flow operators staged can mean, as
torch 2.13's eager forms compute them (built of staged ops: autograd, vmap and
``staged.compile`` see ordinary ops). ``cond`` and ``while_loop`` are ``staged.cond`` and
``staged.while_loop``."""

from ..eager.control_flow import cond, while_loop
from .associative_scan import associative_scan
from .map import map  # noqa: A004  (torch's name)
from .scan import scan

__all__ = ["associative_scan", "cond", "map", "scan", "while_loop"]
