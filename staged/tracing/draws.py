"""Random draws of a traced step made on the host, from torch's stream, at every call.

Note [host draws]: a compiled step gives eager's numbers only if its random draws are
eager's: torch's mt19937 stream (``staged/eager/random``), advanced exactly as eager code
advances it. That stream is serial (each draw starts where the last one left the
generator) and its normals need exact fused multiply-adds, so it is not replayed in the
graph. Instead, while tracing (``rng="host"``, the default), each draw from a
``Generator`` (``staged.rand``/``randn``/``randint``/``randperm``, the ``_like`` forms,
``Tensor.uniform_/normal_/random_/bernoulli_/exponential_...``, ``nn.init``, dropout's
keep mask) becomes an input of the graph (kind ``"draw"``, after the arguments and the
state) and a step of a ``Program``; the trace itself draws nothing. What the traced code
does to a generator's state (``get_rng_state``/``set_rng_state``, ``fork_rng``,
checkpointing's replay of the forward's RNG state, ``manual_seed``) is recorded in the
same program, in order, and undone when the trace ends. Each compiled call runs the
program on the host (``Program.run``): it makes the draws with the call's shapes (a
dynamic batch's draws follow the batch) from the generators themselves, exactly as the
eager step would, and passes them in. So the step's losses are eager's (torch's) call
for call, and ``get_rng_state()`` after ``n`` compiled calls equals eager's after ``n``
steps. A dropout mask crosses as a bool array; the cost is the NumPy draw plus an
upload (bench/rng.py).

Note [deferred calls]: Python that a step runs only for its effect on Python state that
the step reads at every call, an lr scheduler's ``step()`` (it sets
``param_groups[i]["lr"]``, a live input: Note [live inputs]), would run once, at the
trace: the schedule would stop there, and the traced call itself would read the lr the
scheduler had just set. So the trace does not run it (``Tracer.defer``): it is a call of
the program, which each call of the step makes on the host after reading its live
inputs, as eager code makes it after ``optimizer.step()``. A live input read after such a
call in the same step (``scheduler.step()`` before ``optimizer.step()``) raises
``CaptureError``, as do deferred calls under ``rng="counter"``, which runs no host code.

What cannot run host Python at each call, a deployed step (``save``) and an ONNX export,
uses ``rng="counter"`` instead: the counter-based stream computed in the graph (Note
[counter-based RNG] in ``autodiff/random.py``), new numbers at every call but not torch's;
so does ``staged.compile(fn, rng="counter")``. A state tensor read by ``get_rng_state``
inside a step holds the trace's state, not the call's: only passing it back to
``set_rng_state`` is replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..autodiff.avals import Sym


@dataclass(eq=False)
class Program:
    """The host's part of a traced step: its draws and generator state changes, in the
    order the trace made them. Steps: ``("draw", gen, fill, k)`` (``fill(gen, shape)`` ->
    the array of draw input ``k``), ``("get", gen, slot)``, ``("set", gen, slot)``,
    ``("load", gen, state bytes)``, ``("seed", gen, seed)`` (``None``: from the OS's
    entropy, as ``Generator.seed()``). ``calls``: the deferred calls, ``(call, what, user
    line, sets)``, made after the steps (Note [deferred calls])."""

    steps: list = field(default_factory=list)
    whats: list = field(default_factory=list)  # per draw: (what, user line)
    calls: list = field(default_factory=list)

    @property
    def draws(self) -> int:
        return len(self.whats)

    def run(self, shapes) -> list:
        """Run the steps; the draws' arrays, ``shapes[k]`` the shape of draw ``k``."""
        out, slots = [None] * len(self.whats), {}
        for step in self.steps:
            kind, gen = step[0], step[1]
            if kind == "draw":
                with gen.lock:  # Note [one draw at a time] in eager/random/generator.py
                    out[step[3]] = step[2](gen, shapes[step[3]])
            elif kind == "get":
                slots[step[2]] = gen.host_state()
            elif kind == "set":
                gen.load_host_state(slots[step[2]])
            elif kind == "load":
                gen.set_state(step[2])
            elif step[2] is None:  # Generator.seed(): new entropy at every call
                gen.seed()
            else:
                gen.manual_seed(step[2])
        for call, *_ in self.calls:
            call()
        return out


def draw_shapes(graph, n_fixed: int):
    """A function of a call's payloads for the graph's first ``n_fixed`` inputs (its
    arguments and state, in graph input order) returning the shapes of its draw inputs:
    static ones as traced, dynamic ones (``Sym``) from the argument dims sharing the Sym."""
    avals = [i.value.aval for i in graph.inputs if i.kind == "draw"]
    if all(not isinstance(s, Sym) for a in avals for s in a.shape):
        shapes = [tuple(a.shape) for a in avals]
        return lambda payloads: shapes
    sources = {}
    for j, i in enumerate(graph.inputs[:n_fixed]):
        for axis, s in enumerate(i.value.aval.shape):
            if isinstance(s, Sym) and s.name not in sources:
                sources[s.name] = (j, axis, s.k)

    def shapes(payloads):  # type: ignore[no-redef]  # the other branch returned
        dims = {n: payloads[j].shape[axis] // k for n, (j, axis, k) in sources.items()}
        return [
            tuple(dims[s.name] * s.k if isinstance(s, Sym) else s for s in a.shape) for a in avals
        ]

    return shapes


def state_bytes(state) -> np.ndarray:
    """A generator state tensor's bytes, held by a program (``set_rng_state`` of a state
    made outside the trace)."""
    return np.array(state._host() if hasattr(state, "_host") else state, np.uint8)
