"""``kl_divergence(p, q)`` for two distributions of one family (torch's formulas)."""

from __future__ import annotations

from collections.abc import Callable

from ..eager import ops
from ..eager.tensor import Tensor
from ..eager.ops.composite import softplus
from .. import linalg
from .bernoulli import Bernoulli
from .categorical import Categorical
from .exponential import Exponential
from .independent import Independent
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal, mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .uniform import Uniform
from .utils import sum_rightmost


def _normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


def _categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill(q.probs == 0, float("inf"))
    t = t.masked_fill(p.probs == 0, 0)
    return t.sum(-1)


def _bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = t1.masked_fill(q.probs == 0, float("inf")).masked_fill(p.probs == 0, 0)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = t2.masked_fill(q.probs == 1, float("inf")).masked_fill(p.probs == 1, 0)
    return t1 + t2


def _uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = ops.logical_or(q.low > p.low, q.high < p.high)
    return result.masked_fill(outside, float("inf"))


def _exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


def _laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


def _multivariate_normal(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes "
            "cannot be computed"
        )
    p_tril, q_tril = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = q._half_log_det() - p._half_log_det()
    n = p.event_shape[0]
    batch = ops.broadcast_shapes(q_tril.shape[:-2], p_tril.shape[:-2])
    x = linalg.solve_triangular(
        q_tril.expand(*batch, n, n), p_tril.expand(*batch, n, n), upper=False
    )
    term2 = x.reshape(-1, n * n).pow(2).sum(-1).reshape(x.shape[:-2])  # tr(X X^T)
    term3 = mahalanobis(q_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


def _independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


def _one_hot_categorical(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _categorical(p._categorical, q._categorical)


_RULES: dict[tuple, Callable[..., Tensor]] = {
    (Normal, Normal): _normal,
    (Categorical, Categorical): _categorical,
    (Bernoulli, Bernoulli): _bernoulli,
    (Uniform, Uniform): _uniform,
    (Exponential, Exponential): _exponential,
    (Laplace, Laplace): _laplace,
    (MultivariateNormal, MultivariateNormal): _multivariate_normal,
    (Independent, Independent): _independent,
    (OneHotCategorical, OneHotCategorical): _one_hot_categorical,
}


def kl_divergence(p, q) -> Tensor:
    """KL(p || q); a pair of families without a formula raises NotImplementedError."""
    rule = _RULES.get((type(p), type(q)))
    if rule is None:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p = {type(p).__name__}, q = {type(q).__name__} "
            "(staged has Normal, Categorical, Bernoulli, Uniform, Exponential, Laplace, "
            "MultivariateNormal, Independent and OneHotCategorical pairs)"
        )
    return rule(p, q)
