"""staged: PyTorch's autograd rebuilt in Python, with whole training steps compiled by IREE.

Eager mode runs on NumPy; ``staged.compile(fn)`` traces forward, backward, hooks and
optimizer updates into one graph and compiles it with IREE.
"""

import importlib
import math
from typing import TYPE_CHECKING

from . import _native  # noqa: F401  (first: it picks compiled modules, Note [native modules])
from . import _blas  # noqa: F401  (before NumPy: Note [OpenBLAS spin])
from . import _malloc  # noqa: F401  (Note [malloc thresholds])
from . import _where
from . import autodiff  # noqa: F401
from .dtypes import (
    bfloat16,
    bool_ as bool,
    complex64,
    complex128,
    float16,  # noqa: F401
    float32,
    float64,
    float8_e4m3fn,  # noqa: F401
    float8_e4m3fnuz,  # noqa: F401
    float8_e5m2,  # noqa: F401
    float8_e5m2fnuz,  # noqa: F401
    finfo,
    get_default_dtype,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
    uint16,  # noqa: F401
    uint32,  # noqa: F401
    uint64,  # noqa: F401
)
from .dtypes import DType as dtype  # noqa: F401
from .eager import *  # noqa: F401,F403
from .eager import random  # noqa: F401  (torch.random's counterpart)
from .eager.legacy_types import CPU_TYPES as _legacy_types
from .eager.ops.shape import broadcast_shapes, unravel_index  # noqa: F401
from .eager.factories import deprecated_range as range  # noqa: F401  (torch.range)
from .eager.control_flow import cond, while_loop  # noqa: F401
from .eager.ops.table import exports as _exports
from .eager.ops.out import FACTORIES as _FACTORIES, RANDOM as _RANDOM_OUT
from .eager.ops.out import factory_out as _factory_out
from .eager.random import (
    Generator,
    default_generator,
    get_rng_state,  # noqa: F401
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from .eager.random import methods as _random_methods  # noqa: F401  (Tensor.uniform_, ...)
from . import autograd  # noqa: F401
from .autograd.engine import backward, grad  # noqa: F401
from .autograd.node import AccumulateGrad, Node, PrimitiveBackward  # noqa: F401
from .runtime.compiled import capture, compile  # noqa: F401
from . import nn, optim  # noqa: F401
from .nn.functional import celu_, relu_, rrelu_, selu_, threshold_  # noqa: F401  (F's)
from .eager.ops.inplace_functions import *  # noqa: F401,F403  (torch.exp_(x): x.exp_())
from .eager.ops.inplace import fill  # noqa: F401  (torch.fill: fill_ of a copy)
from .eager.ops.segments import _segment_reduce  # noqa: F401
from .nn.functional import (  # noqa: F401  (torch's forms: torch.dropout(input, p, train) ...)
    _torch_alpha_dropout as alpha_dropout,
    _torch_alpha_dropout_ as alpha_dropout_,
    _torch_batch_norm as batch_norm,
    _torch_binary_cross_entropy_with_logits as binary_cross_entropy_with_logits,
    _torch_constant_pad_nd as constant_pad_nd,
    _torch_dropout as dropout,
    _torch_dropout_ as dropout_,
    _torch_embedding as embedding,
    _torch_feature_alpha_dropout as feature_alpha_dropout,
    _torch_feature_alpha_dropout_ as feature_alpha_dropout_,
    _torch_feature_dropout as feature_dropout,
    _torch_feature_dropout_ as feature_dropout_,
    _torch_kl_div as kl_div,
    embedding_renorm_,
)
from .eager.ops.memory_formats import MemoryFormat as memory_format  # noqa: F401
from .eager.ops.memory_formats import channels_last, channels_last_3d  # noqa: F401
from .eager.ops.memory_formats import contiguous_format, preserve_format  # noqa: F401
from .nn.functional import (  # noqa: F401  (torch.<name>: nn.functional's, same arguments)
    avg_pool1d,
    bilinear,
    celu,
    channel_shuffle,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    conv_tbc,
    cosine_similarity,
    group_norm,
    layer_norm,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    pairwise_distance,
    pdist,
    pixel_shuffle,
    pixel_unshuffle,
    rms_norm,
    rrelu,
    selu,
    threshold,
)
from .nn.functional import (  # noqa: F401  (torch's forms, the indices always returned)
    adaptive_avg_pool1d,
    adaptive_max_pool1d_with_indices as adaptive_max_pool1d,
    max_pool1d_with_indices,
)
from .nn.modules.rnn import gru_cell, lstm_cell, rnn_relu_cell, rnn_tanh_cell  # noqa: F401
from ._sym import sym_float, sym_int, sym_ite, sym_max, sym_min, sym_not, sym_sqrt  # noqa: F401
from ._sym import SymBool, SymFloat, SymInt, sym_sum  # noqa: F401
from .utils.dlpack import to_dlpack  # noqa: F401
from .func import vmap  # noqa: F401  (torch.vmap is torch.func.vmap)
from . import func  # noqa: F401
from . import profiler  # noqa: F401  (torch.profiler's counterpart)
from . import overrides  # noqa: F401  (torch.overrides: the __torch_function__ protocol)
from . import utils  # noqa: F401
from . import accelerator, backends, cpu, cuda  # noqa: F401  (CPU-build answers: Note [devices])
from . import compiler  # noqa: F401  (torch.compiler)
from . import fft, linalg, special  # noqa: F401  (torch.fft, torch.linalg, torch.special)
from . import signal  # noqa: F401  (torch.signal.windows)
from .spectral import bartlett_window, blackman_window, hamming_window  # noqa: F401
from .spectral import hann_window, istft, kaiser_window, stft  # noqa: F401
from ._threads import get_num_threads, set_num_threads  # noqa: F401
from ._version import __version__  # noqa: F401
from .serialization import PyTorchFileReader, load, save  # noqa: F401
from .foreach import *  # noqa: F401,F403  (torch._foreach_add_ ...: one op per tensor)
from .torch_compat import as_torch  # noqa: F401
from .eager.storage import TypedStorage, UntypedStorage  # noqa: F401
from ._custom_ops import ops  # type: ignore[no-redef]  # noqa: F401  (torch.ops, not the star import's staged.eager.ops)
from . import _aten  # noqa: F401  (ops.aten: staged's ops under torch's schemas)
from . import _torch_dispatch  # noqa: F401  (Tensor.__torch_dispatch__, _make_wrapper_subclass)
from . import amp, futures, jit, testing, version  # noqa: F401
from .jit import ScriptModule  # noqa: F401  (torch.ScriptModule: no object is one)
from .amp import (  # noqa: F401  (torch's autocast state functions; torch.GradScaler)
    GradScaler,
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .autograd.anomaly import is_anomaly_check_nan_enabled, is_anomaly_enabled  # noqa: F401
from .autograd.anomaly import set_detect_anomaly as set_anomaly_enabled  # noqa: F401
from .eager.printing import get_printoptions, set_printoptions  # noqa: F401
from .eager.tensor import Layout as layout, sparse_coo, sparse_csr, strided  # noqa: F401
from .eager.tensor import _mkldnn, sparse_bsc, sparse_bsr, sparse_csc  # noqa: F401
from ._global_flags import (  # noqa: F401
    are_deterministic_algorithms_enabled,
    get_deterministic_debug_mode,
    get_float32_matmul_precision,
    is_deterministic_algorithms_warn_only_enabled,
    set_deterministic_debug_mode,
    set_float32_matmul_precision,
    set_flush_denormal,
    use_deterministic_algorithms,
)
from ._utilities import (  # noqa: F401
    _assert,
    can_cast,
    get_num_interop_threads,
    is_storage,
    is_warn_always_enabled,
    promote_types,
    result_type,
    scalar_tensor,
    set_default_tensor_type,
    set_num_interop_threads,
    set_warn_always,
    typename,
)
from . import sparse  # noqa: F401  (torch.sparse)
from .sparse import sparse_coo_tensor, sparse_csc_tensor, sparse_csr_tensor, spmm  # noqa: F401
from .sparse import _convert_indices_from_coo_to_csr, _convert_indices_from_csr_to_coo  # noqa: F401

sparse.refuse_dense_methods()  # last: every module's Tensor methods are in place

if TYPE_CHECKING:
    # the public ops that globals().update(_exports()) adds below (a generated stub)
    from ._ops import *  # noqa: F403

    # the legacy types that globals().update(_legacy_types) adds below
    from . import onnx as onnx  # loaded on first use: __getattr__
    from .eager.legacy_types import LegacyType
    from .linalg import _cholesky as cholesky, _logdet as logdet, det, inv as inverse
    from .linalg import matrix_power, slogdet
    from .linalg import cholesky_inverse, cholesky_solve, householder_product as orgqr
    from .linalg import lu_unpack, matrix_exp
    from .linalg._composed import _torch_lu as lu, _torch_lu_solve as lu_solve
    from .linalg._composed import _torch_vander as vander
    from .linalg._core import _torch_chain_matmul as chain_matmul
    from .linalg._lapack import _pinverse as pinverse, _torch_qr as qr, _torch_svd as svd
    from .linalg._lapack import _frobenius_norm as frobenius_norm, _nuclear_norm as nuclear_norm
    from .linalg._lapack import _triangular_solve as triangular_solve
    from .linalg._geqrf import geqrf, ormqr
    from .linalg._lowrank import pca_lowrank, svd_lowrank

    BoolTensor: LegacyType
    ByteTensor: LegacyType
    CharTensor: LegacyType
    ShortTensor: LegacyType
    IntTensor: LegacyType
    LongTensor: LegacyType
    HalfTensor: LegacyType
    FloatTensor: LegacyType
    DoubleTensor: LegacyType
    BFloat16Tensor: LegacyType

globals().update(_exports())  # the public ops: staged/eager/ops/table.py
globals().update(_legacy_types)  # FloatTensor, LongTensor ...: Note [legacy tensor types]
globals().update(linalg.TOP_LEVEL)  # inverse, det, svd, qr, matrix_exp ... (linalg/__init__)
Tensor = Tensor  # noqa: F405  (the class, re-exported explicitly for readers)
equal, detach = Tensor.equal, Tensor.detach  # torch.equal(a, b), torch.detach(x)
# torch's functions defined as plain calls elsewhere: here they name the user's line in their
# errors and take part in the torch function protocol (staged/_where.py), as the others
globals().update(
    {
        _n: _where.sited(globals()[_n])
        for _n in (
            "alpha_dropout",
            "alpha_dropout_",
            "batch_norm",
            "constant_pad_nd",
            "detach",
            "dropout",
            "dropout_",
            "embedding",
            "equal",
            "feature_alpha_dropout",
            "feature_alpha_dropout_",
            "feature_dropout",
            "feature_dropout_",
            "fill",
            "gru_cell",
            "lstm_cell",
            "rnn_relu_cell",
            "rnn_tanh_cell",
        )
    }
)
from . import functional, return_types  # noqa: E402,F401

vars(functional).update({_n: globals()[_n] for _n in functional._NAMES})  # after TOP_LEVEL

globals().update(sparse.TOP_LEVEL)  # mm, matmul, addmm, sum: with sparse operands too
globals().update({n: _factory_out(n, globals()[n]) for n in _FACTORIES})  # out=
globals().update({n: out(globals()[n]) for n, out in _RANDOM_OUT.items()})
nn.module.set_compiler(compile)  # what Module.compile runs (nn sits below the runtime)
get_device, is_inference = Tensor.get_device, Tensor.is_inference  # torch.get_device(x) ...
float = float32
double = float64
long = int64
cfloat = complex64
cdouble = complex128
half = float16
int = int32  # noqa: A001  (torch's names: torch.int is int32, torch.short int16)
short = int16
nan, inf, pi, e = math.nan, math.inf, math.pi, math.e
newaxis = None
_aten.freeze()  # last: the aten operators' kernels are staged's names as made above


# loaded on first use: onnx needs the onnx extra (as torch.onnx loads it); distributions
# (68 ms) and multiprocessing are attributes after a plain import, as torch's are
_LAZY = (
    "onnx",
    "distributions",
    "multiprocessing",
    "_dynamo",
    "_C",
    "fx",
    "hub",
    "library",
    "_higher_order_ops",
    "__config__",
    "ao",
    "vision_ops",
    "_tensor_str",
)
# torch's samplers drawn in C++ (staged.distributions, loaded on first use)
_SAMPLERS = ("poisson", "binomial")
_FROM_C = ("TensorType",)  # torch's names of its C extension's classes (staged._C)


def __getattr__(name: str):
    """``staged.onnx``, ``staged.distributions`` and ``staged.multiprocessing`` imported
    on first use, not at ``import staged``; ``staged.poisson`` and ``staged.binomial``
    without importing ``staged.distributions``."""
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    if name in _SAMPLERS:
        return getattr(importlib.import_module(".distributions._samplers", __name__), name)
    if name in _FROM_C:
        return getattr(importlib.import_module("._C", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
