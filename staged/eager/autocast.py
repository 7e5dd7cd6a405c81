"""torch's autocast on the CPU: the per-thread state (on or off per device type, the dtype,
the weight cache) and the cast policy of the ops on torch's lists. The context manager and
torch's functions over this state are ``staged.amp``'s.

Note [autocast]: torch puts its ``AutocastCPU`` dispatch key in front of a fixed list of ops
(aten/src/ATen/autocast_mode.cpp). Here each of them is wrapped where its public function
is made (``sited``: the public-op table, ``nn.functional``, ``linalg``, ``fft``, ``stft``
and ``Tensor.__matmul__``). While CPU autocast is on, the wrapper casts the op's floating
operands but float64 ones to the autocast dtype (``LOWER``), to float32 (``FP32``), or to
the widest of them (``PROMOTE``), then runs the op with autocast off on its thread, as
torch runs it below its autocast key: the ops it is made of are not cast again. The casts
are ordinary ops, so gradients flow back through them (a float32 parameter's ``.grad`` is
float32) and a capture records them. With autocast off in every thread, a wrapped op pays
one test of a module global (``_active``) and any other op nothing.

Where torch builds an op from listed ones (einsum and tensordot are bmm and mm there), the
cast happens inside it; staged lists its compositions of those themselves, their operands
cast on entry (a function of the call decides where torch's choice depends on it: einsum
without a summed label is a mul). Where torch's op is one kernel and staged's a
composition of products (adaptive_avg_pool2d, matrix_exp, ...), ``BELOW`` runs it with
autocast off and nothing cast, as torch's kernel.
"""

from __future__ import annotations

import functools
import threading

from .._locks import fork_safe
from .. import autodiff as ad
from .. import dtypes as dt
from .. import _torch_function as _tf, _where
from .._where import PLAIN, name_site
from .grad_mode import _state as _grad_state
from .interceptor import current_interceptor
from .tensor import Tensor

LOWER, FP32, PROMOTE, BELOW = "lower", "fp32", "promote", "below"

# torch's device types (its error lists them), and the autocast dtype of those it has one
# for (c10's table); ``AVAILABLE`` are those torch.amp.is_autocast_available answers True
DEVICE_TYPES = (
    *("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve"),
    *("fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone"),
)
_F16, _BF16 = "float16", "bfloat16"
_DEFAULT_DTYPES = {
    **dict.fromkeys(("cuda", "ipu", "xpu", "hip", "mps", "mtia", "privateuseone"), _F16),
    **dict.fromkeys(("cpu", "maia", "xla", "hpu"), _BF16),
}
AVAILABLE = frozenset(_DEFAULT_DTYPES) - {"hip"}


def _einsum(args, kwargs):
    """torch's einsum is bmm where two operands share a summed label, a mul where they
    share none (``"i,j->ij"``)."""
    eq = args[0] if args else kwargs.get("equation")
    if sum(1 for _ in _each_tensor(args[1:])) < 2:
        return None
    if not isinstance(eq, str):  # the sublist format
        return LOWER
    lhs, arrow, rhs = eq.replace(" ", "").replace("...", "").partition("->")
    terms = lhs.split(",")
    labels = set(lhs) - {","}
    if not arrow:  # the output: the labels that appear once
        rhs = "".join(c for c in labels if lhs.count(c) == 1)
    shared = {c for c in labels if sum(c in t for t in terms) > 1}
    return LOWER if shared - set(rhs) else None


def _one_dtype(args, kwargs):
    """The tensor operands, or None where their dtypes differ: torch's multi_dot,
    tensordot and inner check that before their mm (and raise)."""
    ts = list(_each_tensor((*args, *kwargs.values())))
    return ts if all(t.dtype is ts[0].dtype for t in ts) else None


def _multi_dot(args, kwargs):
    return LOWER if _one_dtype(args, kwargs) else None


def _inner(args, kwargs):
    """torch's inner is tensordot (mm), but a product where an operand is 0-d and a dot
    of two vectors."""
    ts = _one_dtype(args, kwargs)
    return LOWER if ts and ts[0].ndim and ts[1].ndim and ts[0].ndim + ts[1].ndim > 2 else None


def _tensordot(args, kwargs):
    """torch's tensordot is an mm, but a sum of products where it contracts every dim."""
    ts = _one_dtype(args, kwargs)
    if not ts:
        return None
    dims = kwargs.get("dims", args[2] if len(args) > 2 else 2)
    k = dims if isinstance(dims, int) else len(dims[0]) if isinstance(dims[0], (list, tuple)) else 1
    return None if ts[0].ndim == ts[1].ndim == k else LOWER


def _pad(args, kwargs):
    """F.pad: torch's reflection_pad1d/2d and replication_pad1d/2d/3d are FP32."""
    pad = kwargs.get("pad", args[1] if len(args) > 1 else ())
    mode = kwargs.get("mode", args[2] if len(args) > 2 else "constant")
    return FP32 if mode == "replicate" or mode == "reflect" and len(pad) <= 4 else None


# torch's CPU lists by staged's public names: ``name`` (staged.<name>, Tensor.<name>,
# nn.functional.<name>) or ``linalg.<name>``, ``fft.<name>``; a function of the call's
# (args, kwargs) decides where torch's choice depends on them
POLICY: dict = {
    **dict.fromkeys(
        (
            *("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d"),
            *("conv_transpose3d", "bmm", "mm", "baddbmm", "addmm", "addbmm", "linear"),
            *("matmul", "prelu", "scaled_dot_product_attention", "linalg.vecdot", "conv_tbc"),
            "linalg.matmul",
            # torch casts at the mm inside these; here on entry: the same dtype, values
            # within bfloat16's rounding
            *("cov", "corrcoef"),
        ),
        LOWER,
    ),
    "einsum": _einsum,
    "inner": _inner,
    "tensordot": _tensordot,
    "linalg.multi_dot": _multi_dot,
    **dict.fromkeys(
        (
            *("avg_pool3d", "binary_cross_entropy", "grid_sample", "prod", "quantile"),
            *("nanquantile", "stft", "cdist", "trace", "view_as_complex", "cholesky"),
            *("cholesky_inverse", "cholesky_solve", "inverse", "lu_solve", "orgqr"),
            *("pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d"),
            *("adaptive_avg_pool3d", "adaptive_max_pool3d", "fractional_max_pool2d"),
            *("fractional_max_pool3d", "mse_loss", "cosine_embedding_loss", "nll_loss"),
            *("hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy"),
            *("l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss"),
            *("triplet_margin_loss", "multi_margin_loss", "ctc_loss", "kl_div"),
            *("multilabel_margin_loss", "binary_cross_entropy_with_logits", "qr", "svd"),
            *(f"fft.{n}" for n in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn")),
            *(f"fft.{n}" for n in ("rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn")),
            *("fft.hfft", "fft.ihfft"),
            *(f"linalg.{n}" for n in ("cond", "matrix_rank", "solve", "cholesky", "svdvals")),
            *(f"linalg.{n}" for n in ("eigvals", "eigvalsh", "inv", "householder_product")),
            *(f"linalg.{n}" for n in ("tensorinv", "tensorsolve", "qr", "cholesky_ex")),
            *(f"linalg.{n}" for n in ("svd", "eig", "eigh", "lstsq", "inv_ex")),
        ),
        FP32,
    ),
    "pad": _pad,
    **dict.fromkeys(("cat", "stack", "index_copy"), PROMOTE),
    # one kernel in torch, products here: they run below autocast, uncast
    **dict.fromkeys(
        (
            *("adaptive_avg_pool1d", "adaptive_avg_pool2d", "embedding_bag", "matrix_exp"),
            *("linalg.matrix_exp", "linalg.lu_solve", "linalg.solve_ex"),
            *("fft.hfft2", "fft.ihfft2", "fft.hfftn", "fft.ihfftn"),
        ),
        BELOW,
    ),
}


class _State(threading.local):
    """One thread's autocast state (torch's is thread-local too)."""

    def __init__(self) -> None:
        self.cpu = False  # CPU autocast on: what a wrapped op reads
        self.enabled: dict = {}  # the other device types: on or off
        self.dtype = {d: getattr(dt, n) for d, n in _DEFAULT_DTYPES.items()}
        self.cache_enabled = True
        self.nesting = 0
        self.cache: dict = {}  # id(weight) -> (weight, its cast, grad mode)


_tls = _State()
_active = 0  # threads with CPU autocast on; 0: every wrapped op runs as it is
_lock = fork_safe()


def device_type(device: str) -> str:
    """``device``'s type (``"cuda:1"`` -> ``"cuda"``), with torch's error for an unknown one."""
    kind = device.split(":")[0]
    if kind not in DEVICE_TYPES:
        raise RuntimeError(
            f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device "
            f"string: {device}"
        )
    return kind


def is_enabled(device: str) -> bool:
    kind = device_type(device)
    if kind not in AVAILABLE:
        raise RuntimeError(
            "unknown device type for autocast in get_autocast_dispatch_key_from_device_type"
        )
    return _tls.cpu if kind == "cpu" else _tls.enabled.get(kind, False)


def set_enabled(device: str, enabled: bool) -> None:
    global _active
    kind = device_type(device)
    is_enabled(kind)  # torch's error for a device type without autocast
    st = _tls
    if kind != "cpu":
        st.enabled[kind] = enabled
    elif enabled != st.cpu:
        with _lock:
            _active += 1 if enabled else -1
        st.cpu = enabled


def get_dtype(device: str) -> dt.DType:
    kind = device_type(device)
    if kind not in _DEFAULT_DTYPES:
        raise RuntimeError("unsupported scalarType")
    return _tls.dtype[kind]


def set_dtype(device: str, dtype) -> None:
    if not isinstance(dtype, dt.DType):
        raise TypeError(
            "set_autocast_dtype(): argument 'dtype' (position 2) must be staged.dtype, not "
            f"{type(dtype).__name__}"
        )
    get_dtype(device)  # torch's error for a device type without one
    _tls.dtype[device_type(device)] = dtype


def is_cache_enabled() -> bool:
    return _tls.cache_enabled


def set_cache_enabled(enabled: bool) -> None:
    _tls.cache_enabled = bool(enabled)


def clear_cache() -> None:
    _tls.cache.clear()


def increment_nesting() -> int:
    _tls.nesting += 1
    return _tls.nesting


def decrement_nesting() -> int:
    _tls.nesting -= 1
    return _tls.nesting


def trace_key():
    """What a compiled step's trace depends on: the CPU autocast dtype while it is on."""
    return _tls.dtype["cpu"] if _tls.cpu else None


# --- the ops on the lists ----------------------------------------------------------------
def sited(fn, name: str, site: bool = True, retry=None):
    """``fn`` as the public op ``name``: its plain errors name the user's line (as
    ``_where.sited``, with its ``retry``; not with ``site=False``: operators) and, where
    ``name`` is on torch's lists (``POLICY``), it applies autocast's policy (Note
    [autocast])."""
    policy = POLICY.get(name)
    if policy is None:
        return _where.sited(fn, retry) if site and not getattr(fn, "sited", False) else fn
    if getattr(fn, "sited", False):
        fn = fn.__wrapped__
    if site:

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if _tf.entered[0]:
                out = _tf.dispatch(call, args, kwargs, True)
                if out is not _tf.NOT_HANDLED:
                    return out
            try:
                if _active:
                    return _run(name, policy, fn, args, kwargs)
                return fn(*args, **kwargs)
            except PLAIN as e:
                fixed = _where.again(e, args, kwargs, retry, True)
                if fixed is None:
                    name_site(e)
                    raise
            if fixed is _where.OVERRIDDEN:
                return _tf.overridden(call, args, kwargs)
            return call(*fixed[0], **fixed[1])

    else:

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if _active:
                return _run(name, policy, fn, args, kwargs)
            return fn(*args, **kwargs)

    call.sited = site  # type: ignore[attr-defined]
    return call


def hook(namespace: dict, prefix: str) -> dict:
    """``{name: sited(function)}`` of the functions in ``namespace`` (a module's globals)
    that ``POLICY`` lists as ``prefix + name``: what the module puts in place of them."""
    hooked = {}
    for listed in POLICY:
        name = listed[len(prefix) :]
        if listed.startswith(prefix) and "." not in name and name in namespace:
            hooked[name] = sited(namespace[name], listed)
    return hooked


def _run(name, policy, fn, args, kwargs):
    st = _tls
    if not st.cpu:  # on in another thread only, or off inside this one's region
        return fn(*args, **kwargs)
    kind = policy if type(policy) is str else policy(args, kwargs)
    if kind is None:
        return fn(*args, **kwargs)
    if kind != BELOW:
        low = st.dtype["cpu"]
        if kind == LOWER:
            to = low
        elif kind == FP32:
            to = dt.float32
        else:
            to = _widest(name, low, args, kwargs)
        args = tuple(_cast(a, to, low) for a in args)
        kwargs = {k: _cast(v, to, low) for k, v in kwargs.items()}
    st.cpu = False  # the op runs below autocast, as torch's
    try:
        return fn(*args, **kwargs)
    finally:
        st.cpu = True


def _each_tensor(values):
    for v in values:
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (t for t in v if isinstance(t, Tensor))


def _eligible(t: Tensor) -> bool:
    d = t.dtype
    return d.is_floating_point and d is not dt.float64


def _widest(name, low, args, kwargs):
    """torch's ``promote`` type: float32 where an operand is, else the autocast dtype;
    float64 operands are not cast (and do not count)."""
    to = low
    for t in _each_tensor((*args, *kwargs.values())):
        if not _eligible(t):
            continue
        d = t.dtype
        if d is dt.float32 or to is dt.float32:
            to = dt.float32
        elif not (d is low and to is low):
            raise RuntimeError(
                "Unexpected floating ScalarType in at::autocast::prioritize: "
                f"{name} under autocast ({low}) got a {d} operand; cast it to {low} or "
                "float32 first"
            )
    return to


def _cast(v, to, low):
    if isinstance(v, Tensor):
        if v.dtype is to or not _eligible(v):
            return v
        st = _tls
        if (
            to is low
            and v.dtype is dt.float32
            and v._requires_grad
            and v.grad_fn is None
            and v._base is None
            and st.cache_enabled
            and current_interceptor() is None
        ):
            return _cached(v, to)
        return ad.cast(v, dtype=to)
    if isinstance(v, (list, tuple)) and any(isinstance(t, Tensor) for t in v):
        return type(v)(_cast(t, to, low) for t in v)
    return v


def _cached(w: Tensor, to) -> Tensor:
    """torch's weight cache: a float32 leaf that requires grad is cast once per outermost
    autocast region; here per grad mode too (a cast made without a graph is not reused
    with one), and eagerly only (a capture's casts stay in its graph)."""
    grad = _grad_state.grad_enabled
    hit = _tls.cache.get(id(w))
    if hit is not None and hit[0] is w and hit[2] == grad:
        return hit[1]
    out = ad.cast(w, dtype=to)
    _tls.cache[id(w)] = (w, out, grad)
    return out
