"""Deployable training steps: ``compiled.save(dir)`` and ``staged.runtime.load(dir)``.

A saved step is three files: ``step.vmfb`` (the IREE module: state as mutable
``util.global``s initialised from named parameters, ``main`` taking only the call's
arguments), ``params.irpa`` (IREE's parameter archive with the state at save time) and
``manifest.json`` (arguments, outputs, state, backend, versions, and the
``iree-run-module`` command that runs it). Loading needs ``iree.runtime`` only: neither
the compiler nor the model's Python code.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .checks import Checks

FORMAT = "staged-step/1"
SCOPE = "model"


def save(entry, directory, names=None) -> Path:
    """Write the compiled ``entry`` (a CompiledGraph) with its state's current values.
    ``names`` maps state tensors to archive keys (e.g. a module's state_dict keys)."""
    from iree.compiler.version import VERSION as compiler_version

    from .. import __version__
    from ..capture.ir import Graph, Input, Output
    from ..lower.mlir import to_mlir
    from .compiler import BOUNDARY, compile_mlir

    c = entry.captured
    by_tensor = {id(t): n for t, n in (names or {}).items()}
    renamed = {w.name: by_tensor.get(id(w.tensor), w.name) for w in c.state}
    g = c.graph
    graph = Graph([Input(i.value, i.kind, renamed.get(i.name, i.name)) for i in g.inputs],
                  g.consts, g.ops,
                  [Output(o.value, o.kind, renamed.get(o.name, o.name)) for o in g.outputs],
                  sym_consts=g.sym_consts)
    if len(set(renamed.values())) != len(renamed):
        raise ValueError(f"state names must be unique, got {sorted(renamed.values())}")
    text = to_mlir(graph, state_as_globals=True, scope=SCOPE,
                   boundary=BOUNDARY.get(entry.backend))
    vmfb = compile_mlir(text, entry.backend)

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "step.vmfb").write_bytes(vmfb)
    narrow = BOUNDARY.get(entry.backend, {})
    _write_archive(out / "params.irpa",
                   {renamed[w.name]: _narrowed(w.tensor._host(), narrow) for w in c.state})
    args = [i for i in graph.inputs if i.kind == "arg"]
    outs = [o for o in graph.outputs if o.kind == "out"]
    manifest = {
        "format": FORMAT,
        "backend": entry.backend,
        "function": "main",
        "state_function": "main_state",
        "scope": SCOPE,
        "module": "step.vmfb",
        "parameters": "params.irpa",
        "args": [_spec(i.name, i.value.aval, narrow) for i in args],
        "outputs": [_spec(o.name, o.value.aval, narrow) for o in outs],
        "out_tree": _jsonable(c.out_tree),
        "out_leaves": _output_leaves(c),
        "state": [_spec(renamed[w.name], w.aval, narrow) for w in c.state],
        "checks": c.checks,  # (error, message) per row of the last result (Note [index checks])
        "versions": {"staged": __version__, "iree-compiler": compiler_version},
        "iree_run_module": _command(entry.backend, args, narrow),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def _output_leaves(c) -> list:
    """Output leaves with their indices renumbered over the ``out`` outputs only."""
    index = {k: n for n, k in enumerate(
        k for k, o in enumerate(c.graph.outputs) if o.kind == "out")}
    return [[kind, index[x] if kind == "value" else x] for kind, x in c.out_leaves]


def _narrowed(a: np.ndarray, narrow: dict) -> np.ndarray:
    d = narrow.get(a.dtype.name)
    return a.astype(d) if d else a


def _spec(name, aval, narrow) -> dict:
    d = aval.dtype.name
    shape = [s if isinstance(s, int) else str(s) for s in aval.shape]  # "batch": dynamic
    return {"name": name, "shape": shape, "dtype": d, "device_dtype": narrow.get(d, d)}


def _jsonable(tree):
    return list(map(_jsonable, tree)) if isinstance(tree, tuple) else tree


def _tuplify(tree):
    return tuple(map(_tuplify, tree)) if isinstance(tree, list) else tree


def _command(backend, args, narrow) -> str:
    from .device import DRIVERS
    inputs = " ".join(f"--input=@{i.name}.npy" for i in args)
    return (f"iree-run-module --device={DRIVERS[backend]} --module=step.vmfb "
            f"--parameters={SCOPE}=params.irpa --function=main {inputs}").strip()


def _write_archive(path: Path, arrays: dict) -> None:
    import iree.runtime as rt
    index = rt.ParameterIndex()
    for name, a in arrays.items():
        index.add_buffer(name, np.ascontiguousarray(a).tobytes())
    tmp = path.with_suffix(".irpa.tmp")
    index.create_archive_file(str(tmp))
    os.replace(tmp, path)


class Deployed:
    """A saved step loaded for running: call it like the compiled step it came from."""

    def __init__(self, directory, device=None):
        import iree.runtime as rt

        from .device import device as get_device

        self.directory = Path(directory)
        m = json.loads((self.directory / "manifest.json").read_text())
        if m.get("format") != FORMAT:
            raise ValueError(f"{directory}: not a saved staged step (format "
                             f"{m.get('format')!r}, expected {FORMAT!r})")
        self.manifest = m
        self.device = get_device(m["backend"], device)
        instance = self.device.config.vm_instance
        index = rt.ParameterIndex()
        index.load(str(self.directory / m["parameters"]))
        params = rt.create_io_parameters_module(instance, index.create_provider(scope=m["scope"]))
        module = rt.VmModule.copy_buffer(instance, (self.directory / m["module"]).read_bytes())
        self._vm = self.device.load_with(module, [params])
        self._arg_dtypes = [np.dtype(a["device_dtype"]) for a in m["args"]]
        self._out_dtypes = [np.dtype(o["dtype"]) for o in m["outputs"]]
        self._checks = Checks(m["checks"]) if m.get("checks") else None
        if self._checks is not None:
            self._out_dtypes.append(np.dtype(np.int64))
        self._state_dtypes = [np.dtype(s["dtype"]) for s in m["state"]]

    def __call__(self, *args, **kwargs):
        from ..capture.pytree import flatten, unflatten
        from ..eager.tensor import Tensor

        leaves, _ = flatten((args, kwargs), lambda o: False)
        arrays = [np.asarray(x._host() if isinstance(x, Tensor) else x) for x in leaves
                  if isinstance(x, (Tensor, np.ndarray))]
        if len(arrays) != len(self._arg_dtypes):
            raise TypeError(f"this step takes {len(self._arg_dtypes)} tensor arguments, got "
                            f"{len(arrays)}")
        for a, spec in zip(arrays, self.manifest["args"]):
            if len(a.shape) != len(spec["shape"]) or any(
                    s != t for s, t in zip(a.shape, spec["shape"]) if isinstance(t, int)):
                raise ValueError(f"argument {spec['name']}: expected shape {spec['shape']}, got "
                                 f"{list(a.shape)} (a saved step has the shapes it was traced "
                                 "with; named dims are dynamic)")
        arrays = [a.astype(d, copy=False) for a, d in zip(arrays, self._arg_dtypes)]
        if self._checks is not None:  # the state is on the device: raise before changing it
            self._checks.raise_pending(wait=True)
        res = self._vm.invoke(self.manifest["function"], arrays, self._out_dtypes)
        if self._checks is not None:
            self._checks.track(res[-1], res[:-1])
        outs = [Tensor._wrap(res[x]) if kind == "value" else x
                for kind, x in self.manifest["out_leaves"]]
        return unflatten(_tuplify(self.manifest["out_tree"]), outs)

    def state_dict(self) -> dict:
        """The current values of the step's state, by name."""
        res = self._vm.invoke(self.manifest["state_function"], [], self._state_dtypes)
        return {s["name"]: np.asarray(r) for s, r in zip(self.manifest["state"], res)}


def load(directory, device=None) -> Deployed:
    """Load a step saved by ``compiled.save(directory)``; continues from the saved state.
    ``device`` picks the device that runs it, as in ``staged.compile``."""
    return Deployed(directory, device)
