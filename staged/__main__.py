"""The ``staged`` command line (also ``python -m staged``): ``staged --help`` lists the
subcommands, ``staged COMMAND --help`` shows each one's options and examples.

Note [CLI errors]: a mistake on the command line, and any error the command then raises
(a bad input file, user code that fails to trace, a damaged deployed step), is reported as
one ``staged COMMAND: error: ...`` line on stderr with exit status 2 (usage) or 1, never
as a traceback; ``staged --traceback COMMAND ...`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import ctypes.util
import glob
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

import staged
from staged import _native, nn
from staged._where import user_site
from staged._version import __version__
from staged.runtime import cache, deploy
from staged.runtime.compiled import Compiled
from staged.runtime.compiler import BACKENDS, compile_uncached, flags
from staged.runtime.device import available_devices, device


class UsageError(Exception):
    """A bad argument: reported as one line and exit status 2 (Note [CLI errors])."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --- inputs: [NAME=]VALUE ---------------------------------------------------------------
INPUTS_HELP = """
inputs are [NAME=]VALUE: NAME binds one to the function's parameter of that name (else
they bind by position) and VALUE is
  DTYPE[DIMS]  an array of that dtype and shape: float32[32,64], int64[32], float32[] (0-d);
               floats are drawn from a standard normal (seed 0), integers and bools are 0
  FILE.npy     the array saved in that file (numpy.save)
  NUMBER       a Python int or float (a constant of the trace: lr=0.1)"""

_NAMED = re.compile(r"([A-Za-z_][\w.]*)=(.*)", re.S)
_ARRAY = re.compile(r"(\w+)\[([\d,\s]*)\]")


def parse_inputs(items) -> tuple[list, dict]:
    """``(positional values, {name: value})`` of ``[NAME=]VALUE`` items (INPUTS_HELP)."""
    args: list = []
    kwargs: dict = {}
    for item in items:
        m = _NAMED.fullmatch(item)
        name, text = (m[1], m[2]) if m else (None, item)
        if name is None and kwargs:
            raise UsageError(f"input {item!r}: an unnamed input cannot follow named ones")
        if name in kwargs:
            raise UsageError(f"input {name!r} is given twice")
        value = parse_value(text)
        if name is None:
            args.append(value)
        else:
            kwargs[name] = value
    return args, kwargs


def parse_value(text: str):
    m = _ARRAY.fullmatch(text.strip())
    if m:
        try:
            dtype = np.dtype(m[1])
        except TypeError:
            raise UsageError(f"{text!r}: unknown dtype {m[1]!r}") from None
        shape = tuple(int(d) for d in m[2].replace(" ", "").split(",") if d)
        if dtype.kind in "fc":
            return np.asarray(np.random.default_rng(0).standard_normal(shape), dtype)
        return np.zeros(shape, dtype)
    if text.endswith(".npy"):
        try:
            return np.load(text, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot read {text}: {err}") from None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    raise UsageError(
        f"input {text!r}: expected DTYPE[DIMS] (e.g. float32[32,64]), a .npy file or a number"
    )


def as_tensors(values):
    return [staged.from_numpy(v) if isinstance(v, np.ndarray) else v for v in values]


def bound_args(fn, args, kwargs, what) -> tuple:
    """``args`` and ``kwargs`` as the positional arguments of ``fn``."""
    target = fn.forward if isinstance(fn, nn.Module) else fn
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        if kwargs:
            raise UsageError(
                f"{what} has no known signature: give its inputs without names"
            ) from None
        return tuple(args)
    try:
        b = sig.bind(*args, **kwargs)
    except TypeError as err:
        raise UsageError(f"the inputs do not fit {what}{sig}: {err}") from None
    if b.kwargs:
        raise UsageError(
            f"{what}{sig}: keyword-only parameters cannot be inputs ({', '.join(b.kwargs)})"
        )
    return b.args


# --- user code: path/to/file.py:name or package.module:name ------------------------------
def load_target(spec: str):
    """The object ``spec`` names: ``path/to/file.py:name`` or ``package.module:name``
    (imported with the current directory on ``sys.path``, as ``python -m`` does)."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise UsageError(f"{spec!r}: expected path/to/file.py:function or package.module:function")
    try:
        if where.endswith(".py") or os.sep in where or "/" in where:
            path = Path(where).resolve()
            if not path.is_file():
                raise UsageError(f"{where}: no such file")
            sys.path.insert(0, str(path.parent))
            name = path.stem
            # a .py file has a spec and a loader
            module = importlib.util.module_from_spec(
                importlib.util.spec_from_file_location(name, path)  # type: ignore[arg-type]
            )
            sys.modules[name] = module
            module.__spec__.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(where)
    except UsageError:
        raise
    except Exception as err:  # the user's module failed to import: say which and why
        raise UsageError(f"cannot import {where}: {type(err).__name__}: {err}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{where} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


# --- export-onnx ------------------------------------------------------------------------
def model_specs() -> dict:
    """``{name: models.<name>.export_spec}`` for every module of the ``models`` package
    that defines one."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        import models
    except ImportError:
        raise UsageError(
            "no `models` package here: run it from the repository root, or "
            "name your own code as file.py:function"
        ) from None
    specs = {}
    for info in pkgutil.iter_modules(models.__path__):
        mod = importlib.import_module(f"models.{info.name}")
        if callable(getattr(mod, "export_spec", None)):
            specs[info.name] = mod.export_spec
    return specs


def export_jobs(a) -> list:
    """``[(file stem, keyword arguments of staged.onnx.export)]`` for the targets."""
    user = [t for t in a.targets if ":" in t]
    if user:
        if len(a.targets) > 1:
            raise UsageError(
                "give one file.py:function (or package.module:function) at a "
                "time, without model names"
            )
        if a.example_inputs is None:
            raise UsageError(f"{user[0]} needs --example-inputs")
        if a.training_step:
            raise UsageError(
                "--training-step applies to the models in models/ (their "
                "export_spec() names the optimizer)"
            )
        fn = load_target(user[0])
        if not callable(fn):
            raise UsageError(f"{user[0]} is a {type(fn).__name__}, not a function or module")
        args = bound_args(fn, *parse_inputs(a.example_inputs), user[0])
        dynamic = {n: {0: "batch"} for n in a.dynamic or ()}
        return [
            (
                user[0].rpartition(":")[2],
                dict(
                    fn_or_module=fn,
                    example_args=tuple(as_tensors(args)),
                    dynamic_axes=dynamic or None,
                ),
            )
        ]
    if a.example_inputs is not None or a.dynamic:
        raise UsageError(
            "--example-inputs and --dynamic apply to your own code "
            "(file.py:function), not to the models in models/"
        )
    specs = model_specs()
    names = a.targets or sorted(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise UsageError(
            f"unknown model(s) {unknown}; models with an export_spec(): "
            f"{sorted(specs)}; your own code is file.py:function"
        )
    jobs = []
    for name in names:
        spec = dict(specs[name]())
        make_opt = spec.pop("optimizer", None)
        if a.static:
            spec.pop("dynamic_axes", None)
        if a.training_step:
            if make_opt is None:
                raise UsageError(f"{name}'s export_spec() has no optimizer")
            spec["training_step"] = make_opt(spec["fn_or_module"].parameters())
            name += "_step"
        jobs.append((name, spec))
    return jobs


def export_onnx(a) -> int:
    import staged.onnx

    jobs = export_jobs(a)
    gradients = False if a.no_gradients else a.gradients or True
    os.makedirs(a.out, exist_ok=True)
    for name, spec in jobs:
        path = os.path.join(a.out, f"{name}.onnx")
        t0 = time.perf_counter()
        model = staged.onnx.export(**spec, path=path, opset=a.opset, with_gradients=gradients)
        print(
            f"{path}: {len(model.graph.node)} nodes, inputs "
            f"{[i.name for i in model.graph.input]}, outputs "
            f"{[o.name for o in model.graph.output]} ({time.perf_counter() - t0:.1f} s)"
        )
    return 0


# --- run --------------------------------------------------------------------------------
def named_leaves(tree, prefix="out") -> list:
    """``[(name, leaf)]`` of a step's result: ``out``, or ``out.0``, ``out.1.logits``."""
    if isinstance(tree, (tuple, list)):
        return [x for i, t in enumerate(tree) for x in named_leaves(t, f"{prefix}.{i}")]
    if isinstance(tree, dict):
        return [x for k, t in tree.items() for x in named_leaves(t, f"{prefix}.{k}")]
    return [(prefix, np.asarray(tree.numpy() if isinstance(tree, staged.Tensor) else tree))]


def show(a: np.ndarray) -> str:
    if a.size == 1:
        return f"{a.item():.6g}" if a.dtype.kind in "fc" else str(a.item())
    return f"{a.dtype}{list(a.shape)}"


def run(a) -> int:
    d = Path(a.directory)
    if not (d / "manifest.json").is_file():
        raise UsageError(
            f"{d}: not a deployed step (no manifest.json); make one with "
            "staged.compile(step).save(dir)"
        )
    if a.steps < 1:
        raise UsageError(f"--steps must be at least 1, got {a.steps}")
    args, kwargs = parse_inputs(a.input)
    step = deploy.load(d, a.device)
    for i in range(1, a.steps + 1):
        outs = named_leaves(step(*args, **kwargs))
        print(f"step {i}: " + ", ".join(f"{n} = {show(v)}" for n, v in outs))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        for n, v in outs:
            np.save(os.path.join(a.out, f"{n}.npy"), v)
        print(f"step {a.steps}'s outputs: {', '.join(f'{n}.npy' for n, _ in outs)} in {a.out}")
    if a.save:
        step.save(a.save)
        print(f"the step with its state after {a.steps} steps: {a.save}")
    return 0


# --- explain ----------------------------------------------------------------------------
def explain(a) -> int:
    obj = load_target(a.target)
    if not isinstance(obj, Compiled):
        if not callable(obj):
            raise UsageError(f"{a.target} is a {type(obj).__name__}, not a function")
        obj = staged.compile(obj, backend=a.backend, dynamic=a.dynamic)
    if a.example_inputs is not None:
        args, kwargs = parse_inputs(a.example_inputs)
        obj(*as_tensors(bound_args(obj, args, kwargs, a.target)))
    elif obj.traces == 0:
        raise UsageError(f"{a.target} has not been called: give --example-inputs to call it once")
    obj.explain(verbose=a.verbose)
    return 0


# --- cache ------------------------------------------------------------------------------
_ENTRY = re.compile(r"[0-9a-f]{64}|\.[0-9a-f]{16}\..*\.tmp")  # cache.py's names


def cache_entries() -> list:
    d = cache.cache_dir()
    return (
        [p for p in d.iterdir() if p.is_file() and _ENTRY.fullmatch(p.name)] if d.is_dir() else []
    )


def human_size(n: float) -> str:  # type: ignore[return]  # returns at "GiB"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def cache_summary() -> str:
    entries = cache_entries()
    total = sum(p.stat().st_size for p in entries)
    return (
        f"{cache.cache_dir()}: {len(entries)} compiled module"
        f"{'s' * (len(entries) != 1)}, {human_size(total)}"
    )


def cache_cmd(a) -> int:
    if a.action == "info":
        print(cache_summary())
        print("(set by $STAGED_CACHE_DIR, default ~/.cache/staged)")
    else:
        entries = cache_entries()
        freed = sum(p.stat().st_size for p in entries)
        for p in entries:
            p.unlink(missing_ok=True)
        print(
            f"removed {len(entries)} compiled modules ({human_size(freed)}) from "
            f"{cache.cache_dir()}"
        )
    return 0


# --- doctor -----------------------------------------------------------------------------
PROBE_MLIR = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def probe(backend: str) -> str:
    """Whether a tiny module compiles for ``backend`` and runs here, in one line (run in a
    child process by ``doctor``, so a hanging driver can be killed)."""
    t0 = time.perf_counter()
    try:
        vmfb = compile_uncached(PROBE_MLIR, flags(backend))
    except Exception as err:
        return f"FAILS to compile: {str(err).splitlines()[0]}"
    took = f"compiles ({time.perf_counter() - t0:.1f} s)"
    try:
        out = device(backend).load(vmfb).invoke("main", [np.arange(4, dtype=np.float32)])
        got = np.asarray(out[0])
    except RuntimeError as err:  # DeviceError: no driver or device
        return f"{took}; does not run here: {err}"
    if not np.array_equal(got, [0, 2, 4, 6]):
        return f"{took}; runs but computed {got} instead of [0 2 4 6]"
    return f"ok: {took} and runs on {next(iter(available_devices(backend)), backend)}"


def probe_all(timeout: float) -> dict:
    """``{backend: probe(backend)}``, each in a child process, all at once."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(Path(staged.__file__).parent.parent), os.environ.get("PYTHONPATH", "")]
        ),
    )
    code = "import sys; from staged.__main__ import probe; print(probe(sys.argv[1]))"
    procs = {
        b: subprocess.Popen(
            [sys.executable, "-c", code, b],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for b in BACKENDS
    }
    deadline, res = time.monotonic() + timeout, {}
    for b, p in procs.items():
        try:
            out, err = p.communicate(timeout=max(0.0, deadline - time.monotonic()))
            lines = (out or err).strip().splitlines() or ["no output"]
            res[b] = (
                lines[-1]
                if p.returncode == 0
                else f"FAILS: the probe exited with status {p.returncode}: {lines[-1]}"
            )
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            res[b] = f"FAILS: no answer within {timeout:g} s (stopped)"
    return res


def version_of(dist: str, missing: str = "not installed") -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return missing


def drivers() -> list:
    icds = sorted(
        glob.glob("/usr/share/vulkan/icd.d/*.json") + glob.glob("/etc/vulkan/icd.d/*.json")
    )
    lavapipe = [p for p in icds if os.path.basename(p).startswith("lvp_icd")]
    libcuda = ctypes.util.find_library("cuda")
    smi, gpus = shutil.which("nvidia-smi"), ""
    if smi:
        try:
            gpus = (
                subprocess.run(
                    [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=20,
                )
                .stdout.strip()
                .replace("\n", "; ")
            )
        except (OSError, subprocess.TimeoutExpired):
            gpus = "does not answer"
    return [
        (
            "lavapipe",
            lavapipe[0]
            if lavapipe
            else "missing (Mesa's software Vulkan: apt-get install mesa-vulkan-drivers)",
        ),
        ("Vulkan ICDs", ", ".join(map(os.path.basename, icds)) or "none"),
        ("VK_ICD_FILENAMES", os.environ.get("VK_ICD_FILENAMES") or "not set (all ICDs)"),
        ("libcuda", libcuda or "missing (no NVIDIA driver: cuda compiles but cannot run)"),
        ("nvidia-smi", f"{smi}: {gpus}" if smi else "missing"),
    ]


def doctor(a) -> int:
    rows = [
        ("staged", __version__),
        ("Python", f"{sys.version.split()[0]} ({sys.executable})"),
        ("NumPy", np.__version__),
        ("eager hot path", _native.summary()),
        ("IREE compiler", version_of("iree-base-compiler")),
        ("IREE runtime", version_of("iree-base-runtime")),
        *(
            (d, version_of(d, "not installed (pip install -e '.[onnx]' in the repository)"))
            for d in ("onnx", "onnxruntime")
        ),
    ]
    print("\n".join(f"{k:<16} {v}" for k, v in rows))
    print("\nbackends (a tiny module compiled and run in a child process):")
    probes = probe_all(a.timeout)
    print("\n".join(f"  {b:<14} {line}" for b, line in probes.items()))
    print("\ndrivers:")
    print("\n".join(f"  {k:<16} {v}" for k, v in drivers()))
    print(f"\ncompile cache    {cache_summary()}")
    return 0 if probes["llvm-cpu"].startswith("ok") else 1


# --- the parser -------------------------------------------------------------------------
def command(sub, name, help, examples, run_):
    p = sub.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog="examples:\n" + textwrap.indent(examples.strip(), "  "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(run=run_)
    return p


def parser() -> Parser:
    p = Parser(
        prog="staged",
        description="staged: PyTorch's autograd in Python, training "
        "steps compiled by IREE. `staged COMMAND --help` shows a command's options "
        "and examples.",
    )
    p.add_argument("--version", action="version", version=f"staged {__version__}")
    p.add_argument(
        "--traceback",
        action="store_true",
        help="show the Python traceback of an error instead of one line",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = command(
        sub,
        "doctor",
        "show versions, the backends that compile and run here, drivers and the compile cache",
        """
staged doctor               # exit status 0 when llvm-cpu compiles and runs
staged doctor --timeout 20  # give up on a backend after 20 s""",
        doctor,
    )
    d.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the backend probes (default 60)",
    )

    e = command(
        sub,
        "export-onnx",
        "export a function or module, with its gradients, as ONNX",
        """
staged export-onnx mystep.py:loss --example-inputs x=float32[32,64] y=int64[32]
staged export-onnx mypkg.train:loss --example-inputs x=batch_x.npy y=batch_y.npy --dynamic x y
staged export-onnx mystep.py:model --example-inputs float32[8,64] --no-gradients
staged export-onnx                  # every model in models/ (run from the repository root)
staged export-onnx mlp --training-step --static --out out/onnx

Your function (or nn.Module) is traced on the example inputs and written to
<out>/<function>.onnx. Its first output must be a scalar loss, unless --no-gradients.
The ONNX inputs are its arguments, then the parameters of the modules it uses; the
outputs are its outputs, then grad.<name> for each parameter (or for exactly the inputs
that --gradients names). See README, "ONNX export".
"""
        + INPUTS_HELP,
        export_onnx,
    )
    e.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="path/to/file.py:function or package.module:function (a function or "
        "nn.Module), or names of models in models/ (default: all of them)",
    )
    e.add_argument(
        "--example-inputs",
        nargs="+",
        metavar="INPUT",
        help="the arguments to trace your function with ([NAME=]VALUE, below)",
    )
    e.add_argument(
        "--dynamic", nargs="+", metavar="NAME", help="inputs whose dim 0 is a dynamic batch"
    )
    e.add_argument(
        "--gradients",
        nargs="+",
        metavar="NAME",
        help="export the gradients with respect to exactly these inputs",
    )
    e.add_argument(
        "--out",
        default="out/onnx",
        help="output directory (default: out/onnx); writes <out>/<function or model>.onnx",
    )
    e.add_argument("--opset", type=int, default=21, help="ai.onnx opset, 18 to 26 (default 21)")
    e.add_argument("--static", action="store_true", help="models: no dynamic batch dimension")
    e.add_argument("--no-gradients", action="store_true", help="the forward (loss) only")
    e.add_argument(
        "--training-step",
        action="store_true",
        help="models: export one optimizer step (updated parameters and state)",
    )

    r = command(
        sub,
        "run",
        "run a deployed step (compiled_step.save(DIR)) without its Python code",
        """
staged run deployed --input x=x.npy --input y=y.npy
staged run deployed --input x=float32[32,64] y=int64[32] --steps 100 --save deployed-later
staged run deployed --input x.npy y.npy --out outputs    # writes outputs/out.npy, ...

Each step prints its outputs (numbers, or dtype[shape] of arrays); the state (parameters,
optimizer buffers) carries over from step to step, as in staged.runtime.load(DIR).
"""
        + INPUTS_HELP,
        run,
    )
    r.add_argument(
        "directory",
        metavar="DEPLOY_DIR",
        help="a directory written by save(): manifest.json, step.vmfb, params.irpa",
    )
    r.add_argument(
        "--input",
        nargs="+",
        action="extend",
        default=[],
        metavar="INPUT",
        help="the step's arguments ([NAME=]VALUE, below)",
    )
    r.add_argument("--steps", type=int, default=1, help="calls to make (default 1)")
    r.add_argument("--out", metavar="DIR", help="save the last step's outputs as DIR/<name>.npy")
    r.add_argument(
        "--save",
        metavar="DIR",
        help="save the step with its state after the run (to continue later)",
    )
    r.add_argument(
        "--device",
        help="the device to run on, e.g. local-sync, vulkan:0, cuda:1 "
        "(default: the backend's default device)",
    )

    c = command(
        sub,
        "cache",
        "show or empty the compile cache ($STAGED_CACHE_DIR, default ~/.cache/staged)",
        """
staged cache info     # where it is, how many compiled modules, their size
staged cache clear    # delete the compiled modules (they are rebuilt when needed)""",
        cache_cmd,
    )
    c.add_argument("action", choices=("info", "clear"))

    x = command(
        sub,
        "explain",
        "call a function compiled with staged.compile and print its explain()",
        """
staged explain mystep.py:step --example-inputs x=float32[32,64] y=int64[32]
staged explain mypkg.train:step --example-inputs x=x.npy y=y.npy --backend vulkan-spirv

TARGET is a staged.compile(...) object or a plain function (compiled here with --backend);
it is called once with the inputs (a training step takes one step), then explained.
"""
        + INPUTS_HELP,
        explain,
    )
    x.add_argument(
        "target", metavar="TARGET", help="path/to/file.py:function or package.module:function"
    )
    x.add_argument(
        "--example-inputs",
        nargs="+",
        metavar="INPUT",
        help="the arguments to call it with ([NAME=]VALUE, below)",
    )
    x.add_argument(
        "--backend",
        choices=tuple(BACKENDS),
        default="llvm-cpu",
        help="for a plain function (default llvm-cpu)",
    )
    x.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="add the dispatch count, the whole graph and its MLIR",
    )
    x.add_argument(
        "--dynamic",
        action="store_true",
        help="for a plain function: compile with a dynamic batch (dim 0)",
    )
    return p


def main(argv=None) -> int:
    p = parser()
    a = p.parse_args(argv)
    try:
        return a.run(a)
    except Exception as err:  # Note [CLI errors]
        if a.traceback:
            raise
        text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        message = str(text).strip() or type(err).__name__
        # the API's errors name their caller's line (at_user): here that is main's caller
        message = message.removeprefix(user_site() + ": ")
        print(f"staged {a.command}: error: {message}", file=sys.stderr)
        return 2 if isinstance(err, UsageError) else 1


if __name__ == "__main__":
    sys.exit(main())
