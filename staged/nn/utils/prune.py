"""``nn.utils.prune``, as torch's: a pruned parameter ``name`` becomes ``name_orig`` (the
Parameter) times the buffer ``name_mask``, recomputed by a forward pre-hook; pruning it
again narrows the mask (a ``PruningContainer``), ``remove`` makes the product permanent."""

from __future__ import annotations

import numbers
from collections.abc import Iterable

from ...eager import ops
from ...eager.factories import ones_like, rand, rand_like, zeros_like


class BasePruningMethod:
    """A way of computing a mask (``compute_mask``); ``PRUNING_TYPE`` says what it prunes:
    "unstructured" entries, "structured" slices along ``dim``, or "global"."""

    PRUNING_TYPE = "unstructured"
    _tensor_name: str | None = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    def compute_mask(self, t, default_mask):
        raise NotImplementedError

    def apply_mask(self, module):
        orig = getattr(module, self._tensor_name + "_orig")
        return getattr(module, self._tensor_name + "_mask").to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` by ``cls(*args, **kwargs)``, after any earlier pruning."""
        old = [(k, h) for k, h in module._forward_pre_hooks.items() if _prunes(h, name)]
        if len(old) > 1:
            raise AssertionError(
                f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                f"{module}. Use a PruningContainer."
            )
        for k, _ in old:
            del module._forward_pre_hooks[k]
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old:
            earlier = old[0][1]
            if not isinstance(earlier, PruningContainer):
                earlier = PruningContainer(earlier)
            earlier.add_pruning_method(method)
            method = earlier
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        elif importance_scores.shape != orig.shape:
            raise AssertionError(
                f"importance_scores should have the same shape as parameter {name} of {module}"
            )
        if old:
            default_mask = getattr(module, name + "_mask").detach().clone()
        else:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ones_like(orig)
        mask = method.compute_mask(importance_scores, default_mask=default_mask)
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times its mask (computed from ``importance_scores``, else ``t``)."""
        scores = t if importance_scores is None else importance_scores
        mask = ones_like(t) if default_mask is None else default_mask
        return t * self.compute_mask(scores, default_mask=mask)

    def remove(self, module):
        """Make the pruning permanent: ``name`` becomes the Parameter ``name_orig``, holding
        the masked values; the mask and ``name_orig`` go."""
        name = self._tensor_name
        weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters.pop(name + "_orig")
        orig.data = weight.data
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


def _prunes(hook, name) -> bool:
    return isinstance(hook, BasePruningMethod) and hook._tensor_name == name


class PruningContainer(BasePruningMethod):
    """Successive prunings of one tensor: the last method prunes what the mask so far
    keeps (entries, or for a structured one the slices along its ``dim`` not all pruned)."""

    def __init__(self, *methods):
        self._pruning_methods: tuple = ()
        if methods:
            self._tensor_name = methods[0]._tensor_name
        for m in methods:
            self.add_pruning_method(m)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(
                "Can only add pruning methods acting on the parameter named "
                f"'{self._tensor_name}' to PruningContainer {self}. Found '{method._tensor_name}'"
            )
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        if method.PRUNING_TYPE == "unstructured":
            where = mask == 1
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError(
                    "Pruning methods of PRUNING_TYPE 'structured' need to have the "
                    "attribute `dim` defined."
                )
            dim = method.dim % t.ndim
            kept = mask.sum(dim=[d for d in range(t.ndim) if d != dim]) != 0
            where = (slice(None),) * dim + (kept,)
        elif method.PRUNING_TYPE == "global":
            where = (slice(None),) * t.ndim
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        mask[where] = method.compute_mask(t[where], default_mask=mask[where]).to(dtype=mask.dtype)
        return mask


class Identity(BasePruningMethod):
    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _check_amount(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    whole = isinstance(amount, numbers.Integral)
    if (whole and amount < 0) or (not whole and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(
            f"amount={amount} should either be a float in the range [0, 1] or a non-negative "
            "integer"
        )


def _count(amount, size) -> int:
    """How many of ``size`` entries (or slices) ``amount`` prunes."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(
                f"amount={amount} should be smaller than the number of parameters to prune={size}"
            )
        return int(amount)
    return round(amount * size)


def _multidimensional(t) -> None:
    if t.ndim <= 1:
        raise ValueError(
            "Structured pruning can only be applied to multidimensional tensors. Found tensor "
            f"of shape {t.shape} with {t.ndim} dims"
        )


class _Unstructured(BasePruningMethod):
    """Zero the ``amount`` entries with the lowest scores (``_scores``)."""

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _count(self.amount, t.numel())
        mask = default_mask.clone()
        if k:
            mask.view(-1)[ops.topk(self._scores(t).view(-1), k, largest=self._largest).indices] = 0
        return mask


class RandomUnstructured(_Unstructured):
    _largest = True

    def _scores(self, t):
        return rand_like(t)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    _largest = False

    def _scores(self, t):
        return ops.abs(t)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Zero ``amount`` slices along ``dim``: all but those ``_kept`` picks."""

    PRUNING_TYPE = "structured"

    def compute_mask(self, t, default_mask):
        _multidimensional(t)
        size = t.shape[self.dim]
        k = _count(self.amount, size)
        if not k:
            return default_mask
        return _slices(t, self.dim, self._kept(t, size, k)) * default_mask.to(dtype=t.dtype)


class RandomStructured(_Structured):
    """Zero ``amount`` random slices along ``dim``."""

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount, self.dim = amount, dim

    def _kept(self, t, size, k):
        prob = rand(size)
        return prob > ops.kthvalue(prob, k).values

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Zero the ``amount`` slices along ``dim`` of lowest ``n``-norm."""

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def _kept(self, t, size, k):
        dim = self.dim % t.ndim
        norm = ops.norm(t, p=self.n, dim=[d for d in range(t.ndim) if d != dim])
        return ops.topk(norm, size - k, largest=True).indices

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(
            module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores
        )


def _slices(t, dim, kept):
    """A mask of ones on the slices ``kept`` (indices or booleans) along ``dim``."""
    mask = zeros_like(t)
    mask[(slice(None),) * (dim % t.ndim) + (kept,)] = 1
    return mask


class CustomFromMask(BasePruningMethod):
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError("default_mask and mask must have the same shape")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the ``(module, name)`` pairs together: ``pruning_method`` (an unstructured
    one) picks among all their entries at once."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    scores = _flat([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    default_mask = _flat([getattr(m, n + "_mask", ones_like(getattr(m, n))) for m, n in parameters])
    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(
            'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
            f"{pruning_method} of type {method.PRUNING_TYPE}"
        )
    method._tensor_name = "temp"
    final = PruningContainer(method).compute_mask(scores, default_mask)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=final[start : start + param.numel()].view_as(param))
        start += param.numel()


def _flat(tensors):
    return ops.cat([t.reshape(-1) for t in tensors])


def remove(module, name):
    """Make ``module.<name>``'s pruning permanent (see ``BasePruningMethod.remove``)."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if _prunes(hook, name):
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
    )


def is_pruned(module) -> bool:
    """Whether ``module`` or one of its submodules has a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for _, sub in module.named_modules()
        for hook in sub._forward_pre_hooks.values()
    )
