"""nn.Module: parameters, buffers and submodules registered by attribute, and
``__call__`` running forward pre-hooks, forward, then forward hooks."""
from __future__ import annotations

from collections import OrderedDict, namedtuple

from ..eager.dispatch import current_interceptor
from ..eager.grad_mode import no_grad
from ..eager.hooks import add_hook
from ..eager.tensor import Tensor
from .parameter import Parameter

_global_forward_pre_hooks: dict = OrderedDict()
_global_forward_hooks: dict = OrderedDict()


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


def register_module_forward_pre_hook(hook):
    """A forward pre-hook for every module (runs before each module's own)."""
    return add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook):
    """A forward hook for every module (runs before each module's own)."""
    return add_hook(_global_forward_hooks, hook)


class Module:
    """Base class of layers and models, PyTorch's ``torch.nn.Module``."""

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    # -- calling -------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        icpt = current_interceptor()
        if icpt is not None:  # a compiled step is reused only while this still holds
            icpt.guard(self._trace_key)
        for hook in (*_global_forward_pre_hooks.values(), *self._forward_pre_hooks.values()):
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in (*_global_forward_hooks.values(), *self._forward_hooks.values()):
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    def _trace_key(self):
        return (self.training, tuple(map(id, self._parameters.values())),
                tuple(map(id, self._buffers.values())))

    def register_forward_pre_hook(self, hook, *, prepend=False):
        """``hook(module, args)`` before forward; may return replacement args."""
        return add_hook(self._forward_pre_hooks, hook, prepend)

    def register_forward_hook(self, hook, *, prepend=False):
        """``hook(module, args, output)`` after forward; may return a replacement output."""
        return add_hook(self._forward_hooks, hook, prepend)

    # -- registration --------------------------------------------------------------------
    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._drop(name)
            params[name] = value
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._drop(name)
            self._modules[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter "
                                f"'{name}' (torch.nn.Parameter or None expected)")
            params[name] = None
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _drop(self, name):
        self.__dict__.pop(name, None)
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for d in (self._parameters, self._buffers, self._modules):
            if name in d:
                del d[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (torch.nn.Parameter or None required)")
        self._drop(name)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (torch Tensor or None required)")
        self._drop(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        self._drop(name)
        self._modules[name] = module

    register_module = add_module

    # -- traversal -----------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        memo = set() if memo is None else memo
        if self in memo and remove_duplicate:
            return
        memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name,
                                           remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, attr, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, m in mods:
            for name, v in getattr(m, attr).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def __hash__(self):
        return id(self)

    # -- state ---------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into parameters and buffers; NumPy arrays are accepted too."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for k, target in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            v = v if isinstance(v, Tensor) else Tensor(v)
            if tuple(v.shape) != tuple(target.shape):
                errors.append(f'size mismatch for {k}: copying a param with shape '
                              f'{v.shape} from checkpoint, the shape in current model is '
                              f'{target.shape}.')
                continue
            with no_grad():
                target.copy_(v.to(target.dtype))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # -- modes and utilities -------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad.zero_()

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, dtype=None, *args, **kwargs):
        from .. import dtypes as dt
        if dtype is None or not isinstance(dtype, dt.DType):
            return self  # devices: host only
        for m in self.modules():
            for d in (m._parameters, m._buffers):
                for k, v in d.items():
                    if v is not None and (v.dtype.is_floating_point or v.dtype.is_complex):
                        v._payload = v._host().astype(dtype.np)
                        v._vc[0] += 1
        return self

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {sub}")
        main = type(self).__name__ + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                return main + lines[0] + ")"
            main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))
