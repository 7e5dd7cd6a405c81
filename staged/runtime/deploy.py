"""Deployable training steps: ``compiled.save(dir)`` and ``staged.runtime.load(dir)``.

A saved step is three files: ``step.vmfb`` (the IREE module: state as mutable
``util.global``s initialised from named parameters, ``main`` taking only the call's
arguments), ``params.irpa`` (IREE's parameter archive with the state at save time) and
``manifest.json`` (arguments, outputs, state, backend, versions, the sha256 of the two
other files, and the ``iree-run-module`` command that runs it). Loading needs
``iree.runtime`` only: neither the compiler nor the model's Python code.

A step with collectives on a backend without IREE collectives (Note [segments]) is saved
as the live step runs: ``step.vmfb`` holds its segments as functions taking the state as
arguments, the manifest's ``program`` (``runtime/segmented.py``) the split (each segment's
function, the values it reads and returns, the host collectives after it with their
params), and ``function`` is null (no ``iree-run-module`` command: the collectives need
MPI between the segments). ``load`` gives a ``DeployedSegments``
(below), which runs it under ``mpiexec`` with
``staged.distributed``'s process group, or alone as a world of one.

Note [trusting a saved step]: a flipped byte in ``step.vmfb`` crashed the process (SIGSEGV,
SIGILL) or changed the losses; one in ``params.irpa`` silently changed a weight (to
2.5e35). ``load`` therefore checks both files against the manifest's sha256 and the IREE
version that compiled the module against the runtime's before anything is loaded, and the
manifest against its own sha256 (``manifest_sha256``, of its canonical JSON without that
field): an edited state shape loaded without complaint. The hashes find damage, not
intent (anyone editing a manifest can hash it again), so a manifest without its own (saved
before this check, in the same format) still loads: refusing it would lose the steps
users saved. A call
checks its arguments (names, shapes, dtypes: only lossless widening is done, float labels
are refused rather than truncated) before anything runs. A loaded step holds none of the
caller's tensors and its results depend on none: they are values, ``requires_grad=False``,
where the live compiled step's loss requires grad (Note [graphless results]).

Note [one call at a time]: the module reads its state globals, computes and stores them
back within one synchronous invoke, with no lock of IREE's around the three: two threads
calling one loaded step lost updates (2 threads x 50 SGD calls applied 50 to 99 of the
100, 3 x 50: 58 of 150). Calls, ``state_dict`` and ``load_state_dict`` of a step
therefore take its lock, so each call applies its update once, as the live step's do.
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import json
import os
import shutil
import warnings
from typing import Any
from pathlib import Path

import numpy as np

from .._interrupts import deferred_interrupts
from .._locks import fork_safe
from .._version import __version__
from .._where import at_user, warn_user
from ..eager.tensor import Tensor
from ..lower.mlir import to_mlir
from ..tracing.ir import Graph, Input, Output
from ..tracing.pytree import flatten, unflatten
from ..tracing.scalars import relabel, results
from .checks import Checks
from . import cpu
from .compiler import (
    BOUNDARY,
    compile_mlir,
    lowering_options,
    narrowing,
    to_boundary,
    tuning_flags,
)
from .device import DRIVERS
from .device import device as get_device
from .logs import Phases
from .segmented import Segments, check_segmentable, program, segmented_mlir

FORMAT = "staged-step/2"
SCOPE = "model"


class IntegrityError(ValueError):
    """A saved step's files do not match its manifest, or need another IREE version."""


def save(entry, directory, names=None, fn=None, target_cpu="host") -> Path:
    """Write the compiled ``entry`` (a CompiledGraph) with its state's current values.
    ``names`` maps state tensors to archive keys; by default a tensor keeps the name its
    trace gave it (``0.weight``, ``opt.state[0.weight].momentum_buffer``: Note [state names]
    in ``staged/tracing/names.py``); ``fn``
    (the traced function) gives the parameter names keyword arguments bind to;
    ``target_cpu`` the CPU llvm-cpu code is compiled for (Note [code for another CPU])."""
    from iree.compiler.version import VERSION as compiler_version

    cpu.check_target(target_cpu, entry.backend)
    c = entry.captured
    if c.arg_updates:
        written = ", ".join(c.graph.outputs[k].name for _, k in c.arg_updates)
        raise ValueError(
            at_user(
                f"the step writes its argument {written} in place, which a saved step "
                "cannot do to its caller's arrays: return the new value instead"
            )
        )
    by_tensor = {id(t): n for t, n in (names or {}).items()}
    renamed = {w.name: by_tensor.get(id(w.tensor), w.name) for w in c.state}
    g = c.graph
    graph = Graph(
        [Input(i.value, i.kind, renamed.get(i.name, i.name)) for i in g.inputs],
        g.consts,
        g.ops,
        [Output(o.value, o.kind, renamed.get(o.name, o.name)) for o in g.outputs],
        sym_consts=g.sym_consts,
    )
    if len(set(renamed.values())) != len(renamed):
        raise ValueError(at_user(f"state names must be unique, got {sorted(renamed.values())}"))
    options = lowering_options(entry.backend, graph)
    plan = None
    if check_segmentable(graph, entry.backend):  # the state stays an argument
        plan, text = segmented_mlir(graph, options)
    else:
        text = to_mlir(graph, state_as_globals=True, scope=SCOPE, **options)
    with Phases(f"saving a step to {directory}") as p, p("IREE compile"):  # slow: say so
        vmfb = compile_mlir(
            text,
            entry.backend,
            optional=tuning_flags(graph, entry.backend),
            target_cpu=target_cpu,
        )

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "step.vmfb").write_bytes(vmfb)
    narrow = BOUNDARY.get(entry.backend, {})
    # hyper-parameters as they are now: a scheduler may have set another lr since the
    # last call, which uploaded the one it read (Note [live inputs])
    now = {id(t): np.asarray(get(), t.dtype.np) for t, get in c.live}
    _write_archive(
        out / "params.irpa",
        {
            renamed[w.name]: _narrowed(
                now[id(w.tensor)] if id(w.tensor) in now else w.tensor._host(),
                narrow,
                f"state {renamed[w.name]}",
            )
            for w in c.state
        },
    )
    args = [i for i in graph.inputs if i.kind == "arg"]
    outs = [o for o in graph.outputs if o.kind == "out"]
    manifest = {
        "format": FORMAT,
        "backend": entry.backend,
        "function": None if plan else "main",
        "state_function": None if plan else "main_state",
        "scope": SCOPE,
        "module": "step.vmfb",
        "parameters": "params.irpa",
        "args": [_spec(i.name, i.value.aval, narrow) for i in args],
        "outputs": [_spec(o.name, o.value.aval, narrow) for o in outs],
        "out_tree": _jsonable(c.out_tree),
        "out_leaves": _output_leaves(c),
        "state": [_spec(renamed[w.name], w.aval, narrow) for w in c.state],
        "signature": _signature(fn),
        "checks": c.checks,  # (error, message, lo, hi) per row of the last result (Note [index checks])
        "batch_one": getattr(entry, "batch_one", None),  # a dynamic step's (Note [batch size 1])
        "batch_differs": sorted(
            n for n, ok in (getattr(entry, "fitted", None) or {}).items() if not ok and n != 1
        ),
        "hyper": _hyper(c, renamed),
        "constants": _constants(c, fn, [i.name for i in args]),
        "versions": {"staged": __version__, "iree-compiler": compiler_version},
        "cpu": {"target": target_cpu, "requires": cpu.required(target_cpu)}
        if entry.backend == "llvm-cpu"
        else None,
        "sha256": {},
        "iree_run_module": None if plan else _command(entry.backend, args, narrow),
    }
    if plan is not None:
        manifest["program"] = program(graph, plan)
    return _write_manifest(out, manifest)


def _write_manifest(out: Path, manifest: dict) -> Path:
    """Write ``manifest.json`` with the sha256 of the module and the archive now in ``out``,
    and its own (``manifest_sha256``)."""
    manifest["sha256"] = {manifest[k]: _sha256(out / manifest[k]) for k in ("module", "parameters")}
    manifest["manifest_sha256"] = manifest_sha256(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def manifest_sha256(manifest: dict) -> str:
    """The sha256 of ``manifest`` without its ``manifest_sha256``, as canonical JSON (sorted
    keys, no spaces): what ``load`` checks that field against (Note [trusting a saved
    step]). A manifest edited on purpose needs it recomputed."""
    body = json.loads(json.dumps({k: v for k, v in manifest.items() if k != "manifest_sha256"}))
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))  # as read back: str keys
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _signature(fn) -> list:
    """``[name, kind]`` of ``fn``'s parameters (kind: ``inspect.Parameter`` kind name)."""
    try:
        params = inspect.signature(fn).parameters.values() if fn is not None else ()
    except (TypeError, ValueError):
        params = ()
    return [[p.name, p.kind.name] for p in params]


def _constants(c, fn, arg_names) -> dict:
    """The Python values built into the step: the arguments the trace was given, and the
    defaults of those it was not (a call passing another value must raise, not run with
    the built-in one)."""
    out = {k: v for k, v in c.constants.items() if _is_json_scalar(v)}
    try:
        params = inspect.signature(fn).parameters.values() if fn is not None else ()
    except (TypeError, ValueError):
        params = ()
    for p in params:
        given = p.name in c.constants or any(
            a == p.name or a.startswith(p.name + ".") for a in arg_names
        )
        if not given and p.default is not p.empty and _is_json_scalar(p.default):
            out[p.name] = p.default
    return out


def _output_leaves(c) -> list:
    """Output leaves with their indices renumbered over the ``out`` outputs only."""
    index = {
        k: n for n, k in enumerate(k for k, o in enumerate(c.graph.outputs) if o.kind == "out")
    }
    return [
        [kind, index[x] if kind == "value" else relabel(x, lambda o: ("out", index[o[1]]))]
        if kind in ("value", "item")
        else [kind, x]
        for kind, x in c.out_leaves
    ]


def _is_json_scalar(v) -> bool:
    return v is None or type(v) in (bool, int, float, str)


def _same(a, b) -> bool:
    return a == b or (a != a and b != b)  # NaN is NaN


def _narrowed(a: np.ndarray, narrow: dict, what: str) -> np.ndarray:
    d = narrow.get(a.dtype.name)
    return to_boundary(a, d, what) if d else a


def _spec(name, aval, narrow) -> dict:
    d = aval.dtype.name
    shape = [s if isinstance(s, int) else str(s) for s in aval.shape]  # "batch": dynamic
    return {"name": name, "shape": shape, "dtype": d, "device_dtype": narrow.get(d, d)}


def _jsonable(tree):
    """The tree as JSON holds it: lists for tuples, a tuple subclass's tag "tuple" (a
    deployed step returns a named tuple as a plain one)."""
    if isinstance(tree, type):
        return "list" if issubclass(tree, list) else "tuple"
    return list(map(_jsonable, tree)) if isinstance(tree, tuple) else tree


def _tuplify(tree):
    return tuple(map(_tuplify, tree)) if isinstance(tree, list) else tree


def _command(backend, args, narrow) -> str:
    inputs = " ".join(f"--input=@{i.name}.npy" for i in args)
    return (
        f"iree-run-module --device={DRIVERS[backend]} --module=step.vmfb "
        f"--parameters={SCOPE}=params.irpa --function=main {inputs}"
    ).strip()


def _write_archive(path: Path, arrays: dict) -> None:
    import iree.runtime as rt

    index = rt.ParameterIndex()
    for name, a in arrays.items():
        index.add_buffer(name, np.ascontiguousarray(a).tobytes())
    tmp = path.with_suffix(".irpa.tmp")
    index.create_archive_file(str(tmp))
    os.replace(tmp, path)


class Deployed:
    """A saved step loaded for running: call it like the compiled step it came from
    (NumPy arrays, staged tensors or anything with ``__array__``, by position or name)."""

    def __init__(self, directory, manifest, device=None):
        """``manifest``: the directory's, as ``_read_manifest`` checked it."""
        self.directory = Path(directory)
        self.manifest = m = manifest
        self.device = get_device(m["backend"], device)
        self._vm_module = self._vm = None
        self._lock = fork_safe()  # Note [one call at a time]
        self._load(str(self.directory / m["parameters"]))
        self._arg_dtypes = [np.dtype(a["device_dtype"]) for a in m["args"]]
        self._out_dtypes = [np.dtype(o["dtype"]) for o in m["outputs"]]
        self._checks = Checks(m["checks"]) if m.get("checks") else None
        if self._checks is not None:
            self._out_dtypes.append(np.dtype(np.int64))
        self._state_dtypes = [np.dtype(s["dtype"]) for s in m["state"]]

    def _load(self, archive=None, arrays=None) -> None:
        """(Re)create the VM context, its state initialised from the parameter archive file
        ``archive`` or from ``arrays`` (name -> array at the module's edge)."""
        import iree.runtime as rt

        m, instance = self.manifest, self.device.config.vm_instance
        index = rt.ParameterIndex()
        if archive is not None:
            index.load(archive)
        else:
            self._buffers = {k: np.ascontiguousarray(a).tobytes() for k, a in arrays.items()}
            for k, b in self._buffers.items():
                index.add_buffer(k, b)
        params = rt.create_io_parameters_module(instance, index.create_provider(scope=m["scope"]))
        if self._vm_module is None:
            self._vm_module = rt.VmModule.copy_buffer(
                instance, (self.directory / m["module"]).read_bytes()
            )
        old, self._vm = self._vm, self.device.load_with(self._vm_module, [params])
        if old is not None:
            old.close()

    def __call__(self, *args, **kwargs):
        arrays = [
            _checked(spec, a) for spec, a in zip(self.manifest["args"], self._bind(args, kwargs))
        ]
        batch = _same_dims(self.manifest["args"], arrays).get("batch")
        if batch == 1:
            _at_one(self.manifest.get("batch_one"))
        elif batch in self.manifest.get("batch_differs", ()):
            raise ValueError(
                at_user(
                    f"this saved step's dynamic batch does not serve batch size {batch}: its "
                    "code did something else at that size than the compiled graph when the "
                    "step was compiled (a branch on the size); save a step compiled at "
                    f"batch size {batch} for it"
                )
            )
        arrays = [
            to_boundary(a, d, f"argument {spec['name']}")
            for a, d, spec in zip(arrays, self._arg_dtypes, self.manifest["args"])
        ]
        with self._lock:
            if self._checks is not None:  # the state is on the device: raise before changing it
                self._checks.raise_pending(wait=True)
            res = self._invoke(arrays)
        outs = results(self.manifest["out_leaves"], res)
        return unflatten(_tuplify(self.manifest["out_tree"]), outs)

    def _invoke(self, arrays) -> list:
        """The step's results (and check report) on the call's arguments at the edge, its
        state updated and its check tracked, both or neither (Note [interrupts])."""
        with deferred_interrupts():
            res = self._vm.invoke(self.manifest["function"], arrays, self._out_dtypes)
            self._track(res)
        return res

    def _track(self, res) -> None:
        if self._checks is not None:
            self._checks.track(res[-1], res[:-1])

    def _bind(self, args, kwargs) -> list:
        """The call's tensor arguments in manifest order, matched by name (as the trace
        named them: ``x``, ``batch.0``); raise TypeError for unknown, repeated or missing
        ones."""
        specs = self.manifest["args"]
        wanted = [a["name"] for a in specs]
        names = {n for n, _ in self.manifest["signature"]}
        sig = [
            n
            for n, kind in self.manifest["signature"]
            if kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
        ]
        if not sig:  # no signature known: positional leaves in trace order
            sig = list(dict.fromkeys(n.split(".")[0] for n in wanted))
        if len(args) > len(sig):
            raise TypeError(
                at_user(
                    f"this step takes {len(sig)} positional arguments "
                    f"({', '.join(sig)}), got {len(args)}"
                )
            )
        bound = dict(zip(sig, args))
        for k, v in kwargs.items():
            if k in bound:
                raise TypeError(at_user(f"this step got multiple values for argument {k!r}"))
            if k not in names and not any(n == k or n.startswith(k + ".") for n in wanted):
                raise TypeError(
                    at_user(
                        f"this step got an unexpected keyword argument {k!r}; its "
                        f"arguments are {', '.join(sig)}"
                    )
                )
            bound[k] = v
        leaves = {}
        for name, value in bound.items():
            flat, _ = flatten(value, lambda o: False)
            single = len(flat) == 1 and not isinstance(value, (tuple, list, dict))
            leaves.update(
                {name: flat[0]} if single else {f"{name}.{j}": x for j, x in enumerate(flat)}
            )
        for name, traced in self.manifest.get("constants", {}).items():
            if name in leaves and not _same(leaves[name], traced):
                raise ValueError(
                    at_user(
                        f"argument {name}={leaves[name]!r}: this step was traced with "
                        f"{name}={traced!r} and has that value built in; pass "
                        f"{traced!r}, or compile and save a step traced with the new "
                        "value"
                    )
                )
        missing = [n for n in wanted if n not in leaves]
        if missing:
            raise TypeError(
                at_user(
                    f"this step is missing the argument{'s' * (len(missing) > 1)} "
                    f"{', '.join(missing)} (it takes {', '.join(wanted)})"
                )
            )
        return [leaves[n] for n in wanted]

    def state_dict(self) -> dict:
        """The current values of the step's state, by name (NumPy copies)."""
        with self._lock:
            res = self._vm.invoke(self.manifest["state_function"], [], self._state_dtypes)
        return {s["name"]: np.asarray(r) for s, r in zip(self.manifest["state"], res)}

    def load_state_dict(self, state: dict) -> None:
        """Replace the step's state by ``state`` (e.g. an earlier ``state_dict()``, to undo
        a step that made it NaN): the same names and shapes; dtypes widen only losslessly."""
        specs = {s["name"]: s for s in self.manifest["state"]}
        unknown, missing = set(state) - set(specs), set(specs) - set(state)
        if unknown or missing:
            raise KeyError(
                at_user(
                    f"load_state_dict: unexpected keys {sorted(unknown)}, missing keys "
                    f"{sorted(missing)}"
                )
            )
        arrays = {
            k: to_boundary(_checked(s, state[k], "state"), s["device_dtype"], f"state {k}")
            for k, s in specs.items()
        }
        hyper = self.manifest.get("hyper")
        if hyper:  # Note [hyper-parameters of a saved step]
            why = _stale_hyper(hyper, self.state_dict(), state)
            if why is not None:
                warn_user(why)
        with self._lock:
            self._load(arrays=arrays)

    def save(self, directory) -> Path:
        """Write this step with its current state as a saved step in ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        m = dict(self.manifest)
        if out.resolve() != self.directory.resolve():
            shutil.copyfile(self.directory / m["module"], out / m["module"])
        _write_archive(
            out / m["parameters"],
            {
                k: _narrowed(a, {s["dtype"]: s["device_dtype"] for s in m["state"]}, f"state {k}")
                for k, a in self.state_dict().items()
            },
        )
        return _write_manifest(out, m)


def _read_manifest(directory: Path) -> dict:
    """The manifest of a saved step, after checking its format, the IREE version and the
    sha256 of its files (Note [trusting a saved step])."""
    from iree.runtime.version import VERSION as runtime_version

    if not (directory / "manifest.json").is_file():
        raise FileNotFoundError(
            at_user(
                f"no saved step in {str(directory)!r}: it has no manifest.json. Save one with "
                "compiled_step.save(directory) (after calling the step once), or pass the "
                "directory that save() wrote"
            )
        )
    try:
        m = json.loads((directory / "manifest.json").read_text())
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise IntegrityError(
            at_user(
                f"{directory / 'manifest.json'}: not readable as JSON ({err}): the file was "
                "damaged or cut short; restore it or save the step again"
            )
        ) from None
    fmt = m.get("format") if isinstance(m, dict) else None
    if fmt != FORMAT:
        old = isinstance(fmt, str) and fmt.startswith("staged-step/")
        raise ValueError(
            at_user(
                f"{directory}: "
                + (
                    f"saved in format {fmt!r}; this staged {__version__} reads {FORMAT!r}: save the "
                    "step again with this version"
                    if old
                    else f"not a saved staged step (format {fmt!r}, expected {FORMAT!r})"
                )
            )
        )
    versions = m.get("versions", {})
    if versions.get("iree-compiler") != runtime_version:
        raise IntegrityError(
            at_user(
                f"{directory}: step.vmfb was compiled by IREE {versions.get('iree-compiler')}, this "
                f"runtime is IREE {runtime_version}; IREE modules only run on the release that "
                "compiled them: install that iree-base-runtime, or save the step again here"
            )
        )
    lacks = cpu.missing((m.get("cpu") or {}).get("requires"))
    if lacks:
        raise IntegrityError(
            at_user(
                f"{directory}: step.vmfb was compiled for a CPU ({m['cpu']['target']} where it "
                f"was saved) with {', '.join(lacks)}, which this CPU lacks: its code would stop "
                "the process at its first call (SIGILL). Save the step on this machine, or "
                "save it with target_cpu='x86-64-v3' (or another x86-64 level this CPU has) "
                "to run it on any such machine"
            )
        )
    got, want = manifest_sha256(m), m.get("manifest_sha256")
    if want is not None and got != want:
        raise IntegrityError(
            at_user(
                f"{directory / 'manifest.json'}: sha256 {got} does not match its recorded "
                f"{want}: the file was damaged or changed after saving; restore it or save "
                "the step again"
            )
        )
    if versions.get("staged") != __version__:
        warnings.warn(
            f"{directory}: saved by staged {versions.get('staged')}, loaded by "
            f"staged {__version__}",
            RuntimeWarning,
            stacklevel=3,
        )
    for key in ("module", "parameters"):
        name = m[key]
        got, want = _sha256(directory / name), m.get("sha256", {}).get(name)
        if got != want:
            raise IntegrityError(
                at_user(
                    f"{directory / name}: sha256 {got} does not match the manifest's {want}: the "
                    "file was damaged or changed after saving; restore it or save the step again"
                )
            )
    return m


def _checked(spec: dict, x, what="argument") -> np.ndarray:
    """``x`` as an array of ``spec``'s shape and dtype: dtypes widen only losslessly."""
    a = np.asarray(x._host() if isinstance(x, Tensor) else x)
    name, shape, dtype = spec["name"], spec["shape"], np.dtype(spec["dtype"])
    if a.ndim != len(shape) or any(s != t for s, t in zip(a.shape, shape) if isinstance(t, int)):
        raise ValueError(
            at_user(
                f"{what} {name}: expected shape {shape}, got {list(a.shape)} (a saved "
                "step has the shapes it was traced with; named dims are dynamic)"
            )
        )
    if a.dtype != dtype and not np.can_cast(a.dtype, dtype, "safe"):
        raise TypeError(
            at_user(
                f"{what} {name}: expected {dtype}, got {a.dtype}, which does not "
                f"convert to {dtype} without loss; convert it explicitly "
                f"(e.g. .astype({dtype.name!r})) if that is what you mean"
            )
        )
    return a.astype(dtype, copy=False)


# Note [hyper-parameters of a saved step]: an optimizer's hyper-parameters are state of a
# saved step, each the value its update uses (``AdamW.param_groups[0].lr`` and
# ``AdamW.param_groups[0].1 - lr * weight_decay``), computed in Python by the optimizer,
# which a deployed step does not have. A user who continues an lr schedule there sets them
# with ``load_state_dict``, and one set without the others computed from the same group
# keys would train with both values at once. So the manifest names the keys each is
# computed from (``hyper``: ``["0:lr", "0:weight_decay"]``, ``0`` a param group of the
# step), and ``load_state_dict`` warns of a change of one that leaves another of the same
# key as it was: a warning, not an error, since a value computed from a changed key can
# round to the one it had (``1 - lr * weight_decay`` in float32 for a small lr).
def _hyper(c, renamed) -> dict:
    """{state name: the param-group keys its value is computed from} for the live inputs
    of ``c`` (Note [hyper-parameters of a saved step])."""
    reads = {id(t): getattr(get, "reads", ()) for t, get in c.live}
    groups: dict = {}  # (id(optimizer), group index) -> its number in the manifest
    return {
        renamed[w.name]: [
            f"{groups.setdefault(r[:2], len(groups))}:{r[2]}" for r in reads[id(w.tensor)]
        ]
        for w in c.state
        if reads.get(id(w.tensor))
    }


def _stale_hyper(hyper: dict, now: dict, new: dict) -> str | None:
    """Why ``new`` state changes a hyper-parameter of ``now`` and leaves one computed from
    the same param-group key as it was; None where it does not."""
    changed = {n for n in hyper if not np.array_equal(now[n], new[n])}
    for n in sorted(changed):
        for other in sorted(hyper.keys() - changed):
            shared = sorted(set(hyper[n]) & set(hyper[other]))
            if shared:
                keys = ", ".join(k.split(":", 1)[1] for k in shared)
                return (
                    f"load_state_dict changes {n!r} but not {other!r}, which is computed from "
                    f"the same {keys}: the step would update with both values. Set every "
                    "hyper-parameter computed from it (each is named for the value its update "
                    "uses), or ignore this where the other's value is right as it is"
                )
    return None


def _at_one(verdict) -> None:
    """Raise what the step raises at batch size 1, or that it computes something else
    there, unless its trace at 1 was the dynamic graph (``Compiled._at_one``): eager code
    can do otherwise at 1 (BatchNorm raises in training, a size-1 dim broadcasts), which
    the in-process step checks by a trace and a saved step cannot."""
    if verdict is None or verdict == "same":
        return
    if verdict == "differs":
        raise ValueError(
            at_user(
                "this saved step's dynamic batch does not serve batch size 1: its code does "
                "something else at 1 than the compiled graph (traced at larger sizes) does; "
                "pass batches of 2 or more, or save a step compiled at batch size 1"
            )
        )
    name, message = verdict
    error = getattr(builtins, name, None)
    raise (error if isinstance(error, type) and issubclass(error, Exception) else RuntimeError)(
        message
    )


def _same_dims(specs, arrays) -> dict:
    """Raise ValueError where a named (dynamic) dim has another size in one argument than
    in an earlier one: the module takes each dim's size from one argument, and would read
    past the end of the others (x of batch 5 with y of batch 4). Returns each named dim's
    size."""
    seen: dict = {}
    for spec, a in zip(specs, arrays):
        for axis, t in enumerate(spec["shape"]):
            if not isinstance(t, str):
                continue
            k, _, dim = t.rpartition("*")
            n, rest = divmod(a.shape[axis], int(k or 1))
            first = seen.setdefault(dim, (n, spec["name"], axis, a.shape[axis]))
            if rest or n != first[0]:
                raise ValueError(
                    at_user(
                        f"argument {spec['name']}: dim {axis} ({t}) has size {a.shape[axis]}, "
                        f"but argument {first[1]} has {first[3]} at dim {first[2]}, so "
                        f"{dim} = {first[0]}: the arguments' {dim} must agree"
                    )
                )
    return {dim: first[0] for dim, first in seen.items()}


def load(directory, device=None) -> Deployed:
    """Load a step saved by ``compiled.save(directory)``; continues from the saved state.
    ``device`` picks the device that runs it, as in ``staged.compile``. Raises
    ``IntegrityError`` when a file does not match the manifest (Note [trusting a saved
    step])."""
    m = _read_manifest(Path(directory))
    if "program" in m:  # a step with collectives (Note [segments])
        return DeployedSegments(directory, m, device)
    return Deployed(directory, m, device)


# --- a saved step with collectives (Note [segments]) ---------------------------------------
# loaded: its segments run as the live step's do (``Segments``), the collectives on the
# host through ``staged.distributed``'s process group (a world of one without it); the
# state lives on the device here, between calls, instead of in the module's globals.
class DeployedSegments(Deployed):
    """``Deployed`` for a manifest with a ``program``."""

    _segments: Any = None  # a Segments, made on the first load

    def _load(self, archive=None, arrays=None) -> None:
        """(Re)set the state from the parameter archive file ``archive`` or from ``arrays``
        (name -> array at the module's edge)."""
        import iree.runtime as rt

        m = self.manifest
        if self._segments is None:
            module = self.device.load((self.directory / m["module"]).read_bytes())
            self._segments = Segments(m["program"], module, narrowing(m["backend"]))
        if archive is not None:
            index = rt.ParameterIndex()
            index.load(archive)
            views = dict(index.items())
            arrays = {
                s["name"]: np.frombuffer(views[s["name"]].file_view, s["device_dtype"]).reshape(
                    s["shape"]
                )
                for s in m["state"]
            }
        self._state = {
            s["name"]: self._segments.to_device(arrays[s["name"]].astype(s["dtype"]), s["dtype"])
            for s in m["state"]
        }

    def _invoke(self, arrays) -> list:
        args, program = iter(arrays), self.manifest["program"]
        res = self._segments.run(
            [
                next(args) if kind == "arg" else self._state[name]
                for _, kind, name in program["inputs"]
            ]
        )
        out = []
        with deferred_interrupts():  # the collectives above stay interruptible
            for r, (_, _, kind, name) in zip(res, program["outputs"]):
                if kind == "state":
                    self._state[name] = r
                elif kind in ("out", "check"):
                    out.append(r)
            self._track(out)
        return out

    def state_dict(self) -> dict:
        with self._lock:
            return {k: np.asarray(v) for k, v in self._state.items()}
