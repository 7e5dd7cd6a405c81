"""Chi2: the chi-squared distribution with ``df`` degrees of freedom."""

from __future__ import annotations

from ..eager.tensor import Tensor
from . import constraints
from .gamma import Gamma


class Chi2(Gamma):
    """``torch.distributions.Chi2(df, validate_args=None)``: ``Gamma(df / 2, 1 / 2)``."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2
