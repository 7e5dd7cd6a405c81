"""MLIR text -> IREE ``.vmfb``, compiled in-process, cached on disk.

Diagnostics are collected through the compiler's callback hook (not printed to the
console) and raised as ``CompileError``, naming the staged primitive and user line
carried by the failing op's location.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import IO

import numpy as np

from .._locks import fork_safe
from . import cache, cpu
from ..lower.mlir.linalg import fenced_operands
from .logs import runtime_log

# IREE demotes f64 (and complex<f64>) to 32 bits by default, changing the function's
# signature; staged keeps the dtypes of the graph. No hoisting of constant expressions
# into globals: IREE 3.13's stream stage fuses a hoisted i1 global with another one
# initialized by the same dispatch, so a returned f64 read 8 bytes of the 1-byte i1
# global (OUT_OF_RANGE, a compile error, or silently 0.0 for -0.0, by pass order; fuzzer:
# ``w = b.clone(); w[None] = x.clone().fill_(-0.0)``). A step's constant expressions are
# index arrays and masks that fuse into their consumers anyway.
_COMMON = ["--iree-input-demote-f64-to-f32=false", "--iree-opt-const-expr-hoisting=false"]
_HOST_CPU = "--iree-llvmcpu-target-cpu=host"
BACKENDS = {
    "llvm-cpu": [
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu",
        # the generic CPU is 3-4x slower; --iree-opt-data-tiling measured 13%
        # slower on an MLP forward+backward here (and compiles 45% longer)
        # No flag keeps subnormals: IREE's CPU runtime sets MXCSR FTZ|DAZ around
        # every dispatch (task workers and local-sync); iree-compile 3.13 has no
        # llvmcpu denormal/ftz option (only --iree-rocm-denormal-fp-math-f32), and
        # LLVM's denormal-fp-math attribute cannot clear MXCSR (README "Backends")
        # No flag found compiles faster at the same run time (Note [compile time])
        _HOST_CPU,
    ],
    # the default SPIR-V target (what lavapipe and most drivers run) has no Int64 or
    # Float64 capability: i64 is demoted to i32 (the runtime casts at the boundary, see
    # BOUNDARY) and f64 is refused (UNSUPPORTED_DTYPES). Explicit desktop targets
    # (vp_desktop_2022, rdna3) crashed or gave wrong results on lavapipe.
    "vulkan-spirv": ["--iree-hal-target-device=vulkan", "--iree-input-demote-i64-to-i32"],
    "cuda": ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"],
}


# extra flags for steps run in-process by staged.compile (not for deployed modules, which
# keep the synchronous ABI iree-run-module calls): a call only enqueues the step
# (device.py, Note [asynchronous steps])
STEP_FLAGS = {b: ["--iree-execution-model=async-external"] for b in ("llvm-cpu", "vulkan-spirv")}

# process-wide compiler options (no session flag exists for them), set up before the first
# compile and part of every cache key. Indirect command buffers: a step with dynamic shapes
# otherwise records its command buffer when called, binding buffers whose queue_alloca
# commits only once the previous call has finished, so a second call made while the first
# runs failed with "transient buffer has not been committed" (Note [asynchronous steps]);
# static steps already use them (their modules are unchanged).
GLOBAL_FLAGS = (
    "--iree-hal-force-indirect-command-buffers",
    # matmul tiles of 32 KiB under data tiling (Note [data tiling]); modules compiled
    # without data tiling are byte-identical with and without it
    "--iree-llvmcpu-matmul-tile-bytes=32768",
)

# Note [data tiling]: IREE's data tiling packs matmul operands into the tiles its mmt4d
# kernels read. With the 32 KiB tile budget above it made the large matmuls of a step
# 1.1-1.8x faster on a 2-core Zen 3 (2026-11-29, bench/scaling.py's steps: MLP batch 4096
# 121 -> 68 ms/step, batch 1024 1.1x; 2-layer transformers of width 128-768 1.3-1.45x)
# but left steps of fewer multiply-adds as they were or slower (MLP batch 32: 1.14x), while
# compiling 1-4 s longer. On a 2-core AMD EPYC with AVX-512 the MLP step at batch 256 (155M
# multiply-adds in all) is 1.2x faster with it (bench/data_tiling.py, 2026-12-01, machine
# loaded: 1.85 -> 1.52 ms/step, JAX jit 1.67-1.72; compiling 0.4-0.7 s longer) and at batch
# 32 (19M) no faster, so the threshold is 2**27, between batch 128 (77M) and 256.
# It is on for llvm-cpu steps of static shapes (IREE 3.13 failed to compile a dynamic conv
# step with it). IREE 3.13 miscompiles a batched matmul whose operand it fuses into the
# packing: (x - x.amax(-1, keepdim=True)) @ v with x of 2 or 3 batches of 3 rows gives
# wrong rows, silently (a strict xfail in tests/runtime/test_data_tiling.py; it broke
# scaled_dot_product_attention in the op sweep run with data tiling forced). So in a
# module with data tiling each batched matmul operand computed by more than layout
# changes of an input or of a matmul's result (attention's probabilities and their
# gradient, not q, k or v) sits behind an optimization barrier (``fence_batched_matmuls``
# of lowering_options, ``fenced_operands`` in lower/mlir/linalg.py): nothing fuses into its
# packing, and the op sweep, attention, the models' steps and 150 fuzzed programs pass with
# data tiling forced on every step. The barriers cost: 2-layer transformers of width 128
# and 256 ran 1.9x and 1.14x slower with data tiling and them (2 workers; fencing q and k
# too, 2.2x and 1.4x), width 512 and 768 1.3x and 1.5x faster. So where a module needs
# barriers only matmuls of more than 2**26 multiply-adds count (DATA_TILING_FENCED_SMALL_MACS):
# the transformers of width 512 and more get it. Before the barriers they went without
# data tiling, and the width-768 one ran at 2.1-2.3x torch eager's time (2 threads; its
# 3072-wide matmuls at 40-64 GFLOP/s, 200 with data tiling).
# Data tiling's packed copies of the weights raised that step's peak from 180 to 284 MB
# (2 workers): IREE's default stream partitioning runs independent work (all the packing)
# at once, each with its buffers. Partitioned for no concurrency
# (``-partitioning-favor=debug``; ``min-peak-memory`` changed nothing) it is 235 MB, at
# the same speed (2 cores: a dispatch already has every worker); torch eager's is 189.
# It is an optional flag (compile_mlir): IREE 3.13 rejects it for some modules, which are
# then compiled without it, the rejection cached so the attempt is not repeated, and
# explain() says so.
DATA_TILING = ("--iree-opt-data-tiling", "--iree-stream-partitioning-favor=debug")
DATA_TILING_MIN_MACS = 1 << 27
DATA_TILING_FENCED_SMALL_MACS = 1 << 26  # matmuls this small do not count where batched
# matmuls need barriers

# Note [compile time]: a cold step is nearly all IREE's compile (trace and lowering take
# about 0.01 s each), and IREE's is nearly all per executable: the batch-32 MLP step has 23
# after IREE's deduplication (the CNN 54, the transformer 57 for 86 dispatches). MLP, CPU
# seconds by phase (--compile-to): up to executable configuration 0.26, codegen of the
# executables 0.6, LLVM's object code 0.45, the rest 0.1; a matmul dispatch costs about
# 0.08 s, an elementwise op or small reduction about 0.01. Flags measured 2026-12-01
# (iree-compile CPU s, one thread, least of 3-4 interleaved runs on a loaded 2-core machine;
# MLP / CNN / transformer): the flags above 1.35-1.44 / 2.57-2.80 / 3.28-4.2. Within that
# spread: --iree-llvmcpu-debug-symbols=false, source locations stripped, LLVM's loop and SLP
# vectorizers and unrolling off, --iree-llvmcpu-enable-ukernels=none,
# --iree-llvmcpu-link-ukernel-bitcode=false, --iree-opt-level=O1, 256-bit vectors,
# --iree-llvmcpu-disable-distribution. Slower: vector-pproc-strategy=peel (1.3-1.6x), data
# tiling (1.15-1.2x), --iree-hal-link-executables=false (2.3-2.8x). Aggressive dispatch fusion
# took the MLP from 23 executables to 17 and 1.44 to 1.23 s (step time 0.95x, within the
# spread), the CNN from 54 to 44 at no less time, and IREE 3.13 rejects the transformer with
# it (a 262400-byte stack allocation, limit 32768). LLVM's own levels (O2, codegen
# Aggressive) have no flag in 3.13.
# On a 2-core Intel Xeon (2026-12-03) the MLP's module takes 2.6-3.0 s, and each of its 23
# executables compiled alone (--compile-mode=hal-executable) costs 0.2 s of fixed cost
# plus 0.15-0.25 s for a matmul, 0.01-0.05 s for the others: 8 matmuls ~1.6 s, the loss's
# 12 small reductions and elementwise ops ~0.4 s. A module of one elementwise op takes
# 0.4-0.5 s: perf puts it in freezing MLIR's rewrite-pattern sets and first-touch page
# faults, per compile, so the in-process API is no faster (0.44-0.62 s). With both cores
# the transformer takes 4.1-4.3 s against 5.4-5.5 s on one (the serial part: the util.func
# pipelines and serializing the linked executables). No flag tried here moved a matmul
# dispatch (ukernels off, debug symbols off, generic or x86-64-v3 CPU, system linker).
# On the 2-core Zen 4 (2026-12-08, iree-compile alone, quiet): a module without a
# dispatch 0.11 s, one elementwise dispatch 0.32 s, the MLP's 20 executables 1.35-1.8 s
# (about 0.07 s each after the first); IREE's threads gain nothing there (1.43-1.78 s on
# both cores, 1.75 on one, 1.66-1.70 with --mlir-disable-threading), and perf finds no
# hot spot (the largest, freezing rewrite-pattern sets, 5% of the samples).
# So the flags stay; what would cut the time is fewer dispatches, which the lowering sometimes
# splits on purpose for run time (``_arg`` in lower/mlir/reduction.py), or fewer distinct
# ones: optimizer updates share executables across parameter shapes (Note [flat updates]
# in lower/mlir/flat.py).

# dtypes a backend holds in another type at the module's edge (to_mlir converts inside;
# the runtime converts arrays): Vulkan's baseline target has no Int64 and stores only
# 32-bit words, which a tensor of 1- or 2-byte values would not fill
BOUNDARY = {
    "vulkan-spirv": {
        "int64": "int32",
        "bool": "int32",
        "int8": "int32",
        "uint8": "int32",
        "int16": "int32",
    }
}


# backends whose reductions get dispatches of their own (Note [fenced reductions] in
# lower/mlir/reduction.py)
FENCED_REDUCTIONS = frozenset({"vulkan-spirv"})


def lowering_options(backend: str, graph=None) -> dict:
    """``to_mlir``'s keyword arguments for ``graph``'s module compiled for ``backend``."""
    return {
        "boundary": BOUNDARY.get(backend),
        "fence_reductions": backend in FENCED_REDUCTIONS,
        # Note [data tiling]: IREE 3.13 fuses into batched matmuls' packing wrongly
        "fence_batched_matmuls": graph is not None and data_tiled(graph, backend),
        # Note [int64 held in int32] in lower/mlir/overflow.py
        "int64_checks": BOUNDARY.get(backend, {}).get("int64") == "int32",
        "flat_updates": backend == "llvm-cpu",  # Note [flat updates]
        "in_place": graph is not None and writes_in_place(graph, backend),
    }


def narrowing(backend: str) -> dict:
    """{NumPy dtype: the dtype ``backend`` holds it in at the module's edge} (BOUNDARY)."""
    return {np.dtype(a): np.dtype(b) for a, b in BOUNDARY.get(backend, {}).items()}


def to_boundary(a: np.ndarray, dtype, what: str = "an input") -> np.ndarray:
    """``a`` as ``dtype``, the type its backend holds it in at the module's edge
    (``BOUNDARY``); raises OverflowError where an integer does not fit, instead of letting
    it wrap (int64 2**31 would arrive as -2**31)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and a.dtype.kind in "iu" and a.size:
        info = np.iinfo(dtype)
        lo, hi = a.min(), a.max()
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise OverflowError(
                f"{what} holds {a.dtype.name} value {bad}, which does not fit the "
                f"{dtype.name} this backend holds {a.dtype.name} in (range [{info.min}, "
                f"{info.max}]); keep values in that range or use the llvm-cpu backend"
            )
    return a.astype(dtype, copy=False)


# dtypes a backend cannot compute in, with the reason
UNSUPPORTED_DTYPES = {
    "vulkan-spirv": {
        **{
            d: "the baseline SPIR-V target has no Float64 capability; use float32 on "
            "vulkan-spirv, or llvm-cpu"
            for d in ("float64", "complex128")
        },
        **{
            d: "the baseline SPIR-V target stores only 32-bit values (no 16-bit storage), so "
            "16-bit floats cannot cross the boundary; use float32 on vulkan-spirv, or "
            "llvm-cpu"
            for d in ("float16", "bfloat16")
        },
    },
}


class CompileError(RuntimeError):
    """IREE rejected a module; the message carries the compiler's diagnostics."""


def flags(backend: str) -> list:
    try:
        return _COMMON + BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}") from None


def matmul_macs(graph) -> list | None:
    """The multiply-adds of each of ``graph``'s matmuls; None where one's size is dynamic."""
    sizes = []
    for op in graph.ops:
        if op.prim.name == "matmul":
            shape = (*op.out.aval.shape, op.inputs[0].aval.shape[-1])
            if not all(isinstance(n, int) for n in shape):
                return None
            sizes.append(math.prod(shape))
    return sizes


ONE_IN_FLIGHT_MACS = 1 << 30


def one_call_in_flight(graph, backend: str) -> bool:
    """Whether ``graph``'s module takes its calls one at a time (Note [pool growth] in
    device.py): llvm-cpu steps of ONE_IN_FLIGHT_MACS multiply-adds or more in matmuls."""
    sizes = matmul_macs(graph) if backend == "llvm-cpu" else None
    return sizes is not None and sum(sizes) >= ONE_IN_FLIGHT_MACS


# Note [state in place] (lower/mlir/in_place.py): on llvm-cpu, a step that writes this
# much state or more writes it into the state's own buffers, as torch's optimizers do,
# and holds one copy of it, not two; a call that fails on the device then loses that
# state (its buffers half written) rather than putting it back, so smaller steps, for
# which two copies cost little, keep the second.
IN_PLACE_MIN_BYTES = 1 << 24


def writes_in_place(graph, backend: str) -> bool:
    """Whether ``graph``'s module writes its state in place (IN_PLACE_MIN_BYTES)."""
    if backend != "llvm-cpu":
        return False
    sizes = (o.value.aval for o in graph.outputs if o.kind == "state")
    total = sum(
        math.prod(a.shape) * a.dtype.np.itemsize
        for a in sizes
        if all(isinstance(n, int) for n in a.shape)
    )
    return total >= IN_PLACE_MIN_BYTES


def data_tiled(graph, backend: str) -> bool:
    """Whether ``graph``'s module gets data tiling (Note [data tiling]): on llvm-cpu, for
    static matmuls of DATA_TILING_MIN_MACS multiply-adds or more in all, counting only
    those over DATA_TILING_FENCED_SMALL_MACS where batched matmuls need barriers."""
    if backend != "llvm-cpu":
        return False
    sizes = matmul_macs(graph)
    if sizes is None or sum(sizes) < DATA_TILING_MIN_MACS:
        return False
    if not fenced_operands(graph):
        return True
    return sum(n for n in sizes if n > DATA_TILING_FENCED_SMALL_MACS) >= DATA_TILING_MIN_MACS


def tuning_flags(graph, backend: str) -> tuple:
    """Optional flags (``compile_mlir``) that speed up ``graph``'s module on ``backend``:
    data tiling (Note [data tiling])."""
    return DATA_TILING if data_tiled(graph, backend) else ()


# a cached payload recording that IREE rejected a module's optional flags
_REJECTED = b"staged: IREE rejected these flags\n"


def compile_mlir(
    text: str,
    backend: str = "llvm-cpu",
    extra_flags=(),
    stats=None,
    builder=None,
    optional=(),
    target_cpu: str = "host",
) -> bytes:
    """The vmfb for ``text`` on ``backend``, from the disk cache when compiled before;
    ``stats`` (a dict), if given, gets ``cache``: ``"hit"`` or ``"miss"``, and ``key``.
    ``builder(text, flags)`` compiles on a miss (default ``compile_subprocess``, the
    ``iree-compile`` tool: Note [compiler process]; ``compile_uncached``, in-process). ``optional`` flags are tried
    first; where IREE rejects them the module is compiled without them, and ``stats`` gets
    ``declined``: the flags and IREE's first line. ``target_cpu``: llvm-cpu's CPU, the host's
    or an x86-64 level (Note [code for another CPU] in ``cpu.py``)."""
    fl = flags(backend)
    if target_cpu != "host":
        cpu.check_target(target_cpu, backend)
        fl = [f"--iree-llvmcpu-target-cpu={target_cpu}" if f == _HOST_CPU else f for f in fl]
    if optional:
        vmfb = _compile_mlir(text, backend, fl + [*extra_flags, *optional], stats, builder, True)
        if not vmfb.startswith(_REJECTED):
            if stats is not None:
                stats["optional"] = " ".join(optional)
            return vmfb
        if stats is not None:
            stats["declined"] = f"{' '.join(optional)}: {vmfb[len(_REJECTED) :].decode()}"
    return _compile_mlir(text, backend, fl + list(extra_flags), stats, builder, False)


def _compile_mlir(text, backend, fl, stats, builder, optional) -> bytes:
    # source locations only matter for diagnostics: an edit above the user's step should
    # not invalidate its compiled module; code for the host CPU is keyed on its features,
    # so a cache shared between machines never serves code this CPU cannot run
    host = host_cpu() if _HOST_CPU in fl else ""
    key = cache.cache_key(
        _LOCATION.sub("", text), backend, *fl, *GLOBAL_FLAGS, compiler_version(), host
    )
    missed = []

    def build():
        missed.append(True)
        try:
            return (builder or compile_subprocess)(text, fl)
        except CompileError as err:
            if not optional:
                raise
            runtime_log.debug("IREE rejected %s: %s", fl, err)
            return _REJECTED + str(err).partition("\n")[0].encode()

    vmfb = cache.cached(key, build)
    runtime_log.debug(
        "IREE module %s for %s: %s", key[:12], backend, "compiled" if missed else "from the cache"
    )
    if stats is not None:
        stats.update(cache="miss" if missed else "hit", key=key[:12])
    return vmfb


@functools.cache
def compiler_version() -> str:
    """IREE's compiler version (``iree.compiler.version.VERSION``, with its release-candidate
    date), read from the file: importing ``iree.compiler`` loads MLIR's libraries (~60 MB
    resident), which a step loaded from the compile cache never needs."""
    spec = importlib.util.find_spec("iree.compiler")  # imports only the ``iree`` namespace
    if spec is None or not spec.submodule_search_locations:
        raise CompileError("IREE's compiler is not installed (pip install iree-base-compiler)")
    text = (Path(spec.submodule_search_locations[0]) / "version.py").read_text()
    match = re.search(r'^VERSION = "([^"]+)"', text, re.MULTILINE)
    if match is None:
        from iree.compiler.version import VERSION  # a layout we do not know: import it

        return VERSION
    return match.group(1)


@functools.cache
def host_cpu() -> str:
    """What LLVM's ``host`` CPU depends on: vendor, family, model and feature flags
    (AVX2, AVX-512, FMA...) from /proc/cpuinfo, else the platform's processor name."""
    fields = cpu.cpuinfo()
    if not fields:
        import platform

        return f"{platform.machine()} {platform.processor()}"
    flags_ = " ".join(sorted(fields.get("flags", "").split()))
    return (
        " | ".join(fields.get(k, "") for k in ("vendor_id", "cpu family", "model")) + f" | {flags_}"
    )


_LOCATION = re.compile(r' loc\((?:unknown|"(?:[^"\\]|\\.)*"(?:\("(?:[^"\\]|\\.)*":\d+:\d+\))?)\)')
_DIAG = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p)
_SEVERITY = {0: "note", 1: "warning", 2: "error", 3: "remark"}
_NAME_LOC = re.compile(r'loc\("([^"]+)"\("((?:[^"\\]|\\.)*)":(\d+):\d+\)\)')
_DIAG_LOC = re.compile(r"(.+?):(\d+):\d+: ")


def compile_uncached(text: str, flag_list) -> bytes:
    """Compile with IREE's embedding API; raise CompileError with the diagnostics."""
    from iree.compiler.api import Output, Session, Source
    from iree.compiler.api import ctypes_dl

    _setup_global_flags()
    diags = []

    @_DIAG
    def on_diag(severity, message, size, _):
        diags.append(
            (
                _SEVERITY.get(severity, "error"),
                ctypes.string_at(message, size).decode(errors="replace"),
            )
        )

    session = Session()
    try:
        session.set_flags(*flag_list)
    except ValueError as err:
        raise CompileError(f"bad compiler flags {flag_list}: {err}") from None
    inv = session.invocation()
    enable = ctypes_dl._dylib.ireeCompilerInvocationEnableCallbackDiagnostics
    enable.argtypes = [ctypes.c_void_p, ctypes.c_int, _DIAG, ctypes.c_void_p]
    enable.restype = None
    enable(inv._inv_p, 0, on_diag, None)
    source = Source.wrap_buffer(session, text.encode())
    with _captured_stderr() as console, _first_of_target(flag_list):
        ok = inv.parse_source(source) and inv.execute()  # some passes print to stderr
    if not ok:
        raise CompileError(
            _message(diags + [("console", console.text)] if console.text else diags, text)
        )
    out = Output.open_membuffer()
    inv.output_vm_bytecode(out)
    vmfb = bytes(out.map_memory())
    out.close()
    inv.close()
    session.close()
    return vmfb


def compile_subprocess(text: str, flag_list) -> bytes:
    """``compile_uncached`` in an ``iree-compile`` process, how every step is compiled
    (Note [compiler process]): it holds neither the GIL nor this process's stderr while it
    runs, and ``kill_subprocesses`` stops it. Falls back to the in-process compile where
    the tool is missing.

    Note [compiler process]: IREE's compiler can crash on a module it should take (3.13
    segfaulted in AnnotateDispatches on a two-input generic whose first indexing map is
    shifted by a constant: ``lower/mlir/nn.py`` col2im). In-process, that kills the user's
    program with no Python traceback; in an ``iree-compile`` process it is a
    ``CompileError`` carrying IREE's stack dump, which ``fallback="eager"`` turns into an
    eager step. The cost, measured on the MLP, CNN and transformer steps: the same CPU time
    (1.31 vs 1.36 s, 2.69 vs 2.70 s, 3.41 vs 3.28 s), about 0.02 s more per module; the
    user's process never loads the compiler's library (0.55 s at its first compile)."""
    tool = _tool()
    if tool is None:
        return compile_uncached(text, flag_list)
    proc = subprocess.Popen(
        [tool, "-", "-o", "-", *flag_list, *GLOBAL_FLAGS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with _children_lock:
        _children.add(proc)
    err: bytes | str
    try:
        vmfb, err = proc.communicate(text.encode())
    finally:
        with _children_lock:
            _children.discard(proc)
    if proc.returncode != 0:
        err = err.decode(errors="replace").replace("<stdin>:", "source.mlir:")
        if "Unknown command line argument" in err:  # as the in-process Session says it
            raise CompileError(f"bad compiler flags {flag_list}: {err.strip().splitlines()[0]}")
        diags = [(m.group(2), m.group(1) + m.group(3)) for m in _TOOL_DIAG.finditer(err)] or [
            ("console", err.strip() or f"iree-compile exited with {proc.returncode}")
        ]
        raise CompileError(_message(diags, text))
    return vmfb


_TOOL_DIAG = re.compile(
    r"^(source\.mlir:\d+:\d+: )(error|warning|note|remark): (.*)$", re.MULTILINE
)
_children: set = set()
_children_lock = fork_safe()


@functools.cache
def _tool():
    from iree.compiler.tools.binaries import find_tool

    try:
        return find_tool("iree-compile")
    except Exception:  # noqa: BLE001 (the tool is optional: compile in-process instead)
        return None


def kill_subprocesses() -> None:
    """Stop the ``iree-compile`` processes still running (at exit: nobody waits for them)."""
    with _children_lock:
        for proc in _children:
            proc.kill()


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's compiles: their ``iree-compile`` processes
    are the parent's (the child's exit killed them, failing the parent's compiles), the
    threads running them are gone (a lock one held would stay held), and the stderr one
    captured goes back to where it went (their locks: Note [locks across a fork])."""
    _children.clear()
    cls = _captured_stderr
    if cls._users and cls._saved is not None and cls._file is not None:
        os.dup2(cls._saved, 2)
        os.close(cls._saved)
        cls._file.close()
        cls._users, cls._file, cls._saved = 0, None, None


os.register_at_fork(after_in_child=_after_fork_in_child)


_global_flags_lock = fork_safe()
_global_flags_set = False


def _setup_global_flags() -> None:
    """IREE's process-wide options, once per process. Under a lock: two threads setting
    them up at once (the first compiles of two steps, or a background compile and a
    foreground one) abort the process inside IREE."""
    global _global_flags_set
    with _global_flags_lock:
        if not _global_flags_set:
            from iree.compiler.api import ctypes_dl

            ctypes_dl._initializeGlobalCL("staged", *GLOBAL_FLAGS)
            _global_flags_set = True


_first_lock = fork_safe()
_targets_done: set = set()


@contextlib.contextmanager
def _first_of_target(flag_list):
    """The first compile of a process for a target runs alone: its pipeline registers
    LLVM's targets (IREE's const-eval JIT does it in ``createTargetMachine``), and two
    threads registering one target at once make LLVM's target list a cycle, which
    ``lookupTarget`` then walks forever (six threads compiling at once spun there for
    minutes). Once it is registered, compiles run side by side."""
    key = tuple(f for f in flag_list if f.startswith("--iree-hal-target"))
    if key in _targets_done:
        yield
        return
    with _first_lock:
        yield
        _targets_done.add(key)


class _captured_stderr:
    """Collect what native code writes to file descriptor 2 (kept in ``.text``). The
    descriptor is process-wide: concurrent compiles (threads) share one redirection, made
    by the first to enter and undone by the last to leave; each keeps what was written while
    it ran (which may include another's lines)."""

    _lock = fork_safe()
    _users = 0
    _file: IO[bytes] | None = None  # where fd 2 goes while captured
    _saved: int | None = None  # fd 2 as it was

    def __enter__(self):
        import tempfile

        cls = type(self)
        with cls._lock:
            if cls._users == 0:
                sys.stderr.flush()
                cls._file = tempfile.TemporaryFile()
                cls._saved = os.dup(2)
                os.dup2(cls._file.fileno(), 2)
            cls._users += 1
            self._start = os.lseek(cls._file.fileno(), 0, os.SEEK_END)
        self.text = ""
        return self

    def __exit__(self, *exc):
        cls = type(self)
        with cls._lock:
            self.text = (
                os.pread(cls._file.fileno(), 1 << 20, self._start).decode(errors="replace").strip()
            )
            cls._users -= 1
            if cls._users == 0:
                os.dup2(cls._saved, 2)
                os.close(cls._saved)
                cls._file.close()
        return False


def _message(diags, text: str) -> str:
    lines = ["IREE compilation failed:"]
    for severity, msg in diags:
        where = _where(msg, text)
        lines.append(f"  {severity}: {f'[{where}] ' if where else ''}{msg}")
    return "\n".join(lines)


def _where(msg: str, text: str) -> str:
    """'prim at file:line' for a diagnostic: its location is either a line of the MLIR
    text (whose op carries the staged location) or the user's file:line itself."""
    m = _DIAG_LOC.match(msg)
    if not m:
        return ""
    file, line = m.group(1), int(m.group(2))
    if file == "source.mlir":
        src = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else ""
        n = _NAME_LOC.search(src)
        return f"{n.group(1)} at {n.group(2)}:{n.group(3)}" if n else ""
    prims = {
        n.group(1)
        for n in _NAME_LOC.finditer(text)
        if n.group(2) == file and int(n.group(3)) == line
    }
    return f"{'/'.join(sorted(prims)) or 'op'} at {file}:{line}"
