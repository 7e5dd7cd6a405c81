"""``Compiled.explain()``: what a compiled step is, on one screen.

The default text fits a terminal (under 60 lines whatever the step's size): lists that grow
with the step (state tensors, guards, re-traces) are wrapped and cut with a count of what
is left out. ``verbose=True`` adds what does not fit: IREE's dispatch count, the whole graph
(one op a line, with the user's ``file:line``) and its MLIR.
"""

from __future__ import annotations

import collections
import inspect
import os
import re
import textwrap

from ..tracing.dynamic import is_static
from .compiler import flags, one_call_in_flight

WIDTH = 100
PHASES = ("forward", "backward", "optimizer")


def explain_text(c, verbose: bool = False) -> str:
    """The text of ``c.explain(verbose)`` for the ``Compiled`` ``c``."""
    e = getattr(c._last, "fwd", c._last)  # a Differentiable's compiled forward
    name = c.name
    device = f" on {e.device.name}" if e is not None else ""
    lines = [f"staged.compile({name}): backend {c.backend}{device}", *_where(c.fn)]
    if not c.history:
        return "\n".join([*lines, "not called yet: nothing traced"])
    lines += _history(c)
    eager = [h["eager"] for h in c.history if h.get("eager")]
    if e is None:
        return "\n".join([*lines, *_segments(eager)])
    g, cap = e.captured.graph, e.captured
    lines.append("")
    lines.append(_wrap(f"last graph: {len(g.ops)} ops; {_by_phase(g)}", 3))
    lines += _segments(eager, getattr(e.module, "plan", None))
    dyn = [i.name for i in g.inputs if not is_static(i.value.aval.shape)]
    if dyn:
        lines.append(f"dynamic batch: dim 0 of {', '.join(dyn)}")
        off = " (specialize=False)" if not c.specialize else ""
        lines += (
            e.specialized.lines()
            if e.specialized is not None
            else [f"static modules for batch sizes: none{off}"]
        )
    args = [f"{i.name} {i.value.aval}" for i in g.inputs if i.kind == "arg"]
    outs = [f"{o.name} {o.value.aval}" for o in g.outputs if o.kind == "out"]
    lines += _listing("arguments", args) + _listing("returns", outs)
    live = {w.name for w in cap.state if any(w.tensor is t for t, _ in cap.live)}
    lines += _listing(
        "state read", [i.name for i in g.inputs if i.kind == "state" and i.name not in live]
    )
    lines += _listing(
        "hyper-parameters read at every call", [i.name for i in g.inputs if i.name in live]
    )
    if cap.rng is not None:  # Note [host draws]
        draws = [i.value.aval for i in g.inputs if i.kind == "draw"]
        lines += _listing(
            "random draws made on the host at every call (torch's stream)",
            [
                f"{what} {aval}" + (f" at {loc}" if loc else "")
                for (what, loc), aval in zip(cap.rng.whats, draws)
            ],
        )
    lines += _listing("state written", [o.name for o in g.outputs if o.kind == "state"])
    lines += _listing(".grad written", [o.name + ".grad" for o in g.outputs if o.kind == "grad"])
    lines += _listing("arguments written in place", [o.name for o in g.outputs if o.kind == "arg"])
    lines += _listing(  # Note [tensor attributes] in tracing/capture.py
        "module attributes set", [o.name for o in g.outputs if o.kind == "attr"]
    )
    lines += _listing(
        "new state (made by this call: traced again next call)",
        [o.name for o in g.outputs if o.kind == "escaped"],
    )
    lines.append("")
    lines += _guards(e)
    lines.append("")
    cache = e.cache.get("cache")
    lines.append(
        f"compile: {_times(e.times)}"
        + (
            f"; IREE module {'from the cache' if cache == 'hit' else 'compiled (not cached)'}"
            f" [{e.cache.get('key')}]"
            if cache
            else ""
        )
        + (f"; with {e.cache['optional']}" if "optional" in e.cache else "")
        + (f"; declined {e.cache['declined']}" if "declined" in e.cache else "")
    )
    if one_call_in_flight(g, c.backend):
        lines.append("one call in flight, not two: a large step (Note [pool growth] in device.py)")
    lines += _listing(  # Note [state in place] in lower/mlir/in_place.py
        "state written into its own buffers (one copy held; a call that fails on the device "
        "loses it)",
        list(getattr(e.mlir, "in_place", ())),
    )
    lines += getattr(c, "calls", None) and c.calls.lines() or []
    lines = [
        w for line in "\n".join(lines).splitlines() for w in (_wrap(line).splitlines() or [""])
    ]
    if not verbose:
        lines.append("explain(verbose=True) adds the dispatch count, the graph and its MLIR")
        return "\n".join(lines)
    if e.mlir is None:  # Note [background compiles]: not lowered yet
        return "\n".join(
            [
                *lines,
                "",
                "graph:",
                str(cap.graph),
                "",
                "MLIR: not lowered yet (compiling in the background)",
            ]
        )
    lines += [
        f"dispatches: {count_dispatches(e.mlir, c.backend)}",
        "",
        "graph:",
        str(cap.graph),
        "",
        "MLIR:",
        e.mlir,
    ]
    return "\n".join(lines)


def _where(fn) -> list:
    """Where a function defined in Python is (a line), else nothing."""
    try:
        fn = inspect.unwrap(getattr(fn, "__func__", fn))
        path, line = inspect.getsourcefile(fn), fn.__code__.co_firstlineno
    except (TypeError, AttributeError):
        return []
    return [f"  defined at {os.path.relpath(path)}:{line}"] if path else []


def _history(c) -> list:
    shown = c.history[-5:]
    lines = [f"traces: {c.traces} (re-traces, newest last; each is a new graph and compile):"]
    if len(c.history) > len(shown):
        lines.append(f"  ... {len(c.history) - len(shown)} earlier")
    first = c.traces - sum(1 for h in shown if not h.get("eager")) + 1
    for h in shown:
        if h.get("eager"):
            lines.append(_wrap(f"  - {h['reason']}: ran eagerly"))
            continue
        one = (
            f"; one-shot: {h['one_shot']}, so the next call traces again"
            if h["one_shot"]
            else "; its results are differentiated outside: its forward (the no-grad trace) "
            "and backward (a recomputation, traced when reached) compile apart"
            if h.get("differentiable")  # Note [autograd boundary]
            else ""
        )
        lines.append(
            _wrap(
                f"  {first}. {h['reason']}{one} [{h['ops']} ops; "
                f"{_times(h['times'])}{', cached' if h['cache'] == 'hit' else ''}]",
                3,
            )
        )
        if h.get("background") is not None:  # Note [background compiles]
            lines.append(_wrap(f"     {h['background']}", 3, indent="     "))
        first += 1
    return lines


def _segments(eager, plan=None) -> list:
    if plan is not None:  # Note [segments]
        host = sum(len(h) for h in plan.host)
        return [
            f"segments: 1 graph, no breaks; run as {len(plan.segments)} compiled segments "
            f"with {host} collective(s) on the host between them"
        ]
    if not eager:
        return ["segments: 1 (staged captures the whole step as one graph: no breaks)"]
    return [
        f"segments: 0 for {len(eager)} call signature(s), which ran eagerly because:",
        *(_wrap("  " + why) for why in eager[-3:]),
    ]


def _by_phase(g) -> str:
    """``forward 68 ops (mlp.py:9), backward 32 (mlp.py:10), optimizer 128 (mlp.py:11)``:
    each phase's op count and the user's lines that issued most of them."""
    ops = collections.defaultdict(list)
    for op in g.ops:
        ops[getattr(op, "phase", "") or "other"].append(op.loc)
    parts = []
    for phase in [*PHASES, *sorted(set(ops) - set(PHASES))]:
        locs = collections.Counter(loc for loc in ops.get(phase, ()) if loc)
        top = ", ".join(loc for loc, _ in locs.most_common(2))
        parts.append(f"{phase} {len(ops.get(phase, ()))}" + (f" ({top})" if top else ""))
    return ", ".join(parts)


def _listing(what: str, items: list) -> list:
    if not items:
        return []
    return [_wrap(f"{what} ({len(items)}): " + ", ".join(items), 3, indent="    ")]


def _guards(e) -> list:
    cap = e.captured
    lines = [
        "guards (a call re-traces when one no longer holds):",
        "  the arguments' structure, shapes, dtypes and requires_grad, and the grad mode",
        (
            f"  {len(e._guards)} state tensors keep their shape, dtype, requires_grad and "
            "whether .grad is set"
        ),
    ]
    same = collections.Counter(f"  {g.name} == {_cut(g.show(g.value))}" for g in cap.guards)
    lines += [line + (f" (x{n})" if n > 1 else "") for line, n in list(same.items())[:8]]
    if len(same) > 8:
        lines.append(f"  ... {len(same) - 8} more")
    return lines


def _times(times: dict) -> str:
    return ", ".join(f"{k} {v:.2f} s" for k, v in times.items())


def _cut(s: str, n: int = 70) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _wrap(s: str, max_lines: int = 2, indent: str = "    ") -> str:
    return "\n".join(
        textwrap.wrap(
            s,
            WIDTH,
            subsequent_indent=indent,
            max_lines=max_lines,
            placeholder=" ...",
            break_on_hyphens=False,
        )
    )


def count_dispatches(mlir: str, backend: str) -> int:
    """How many dispatches IREE's flow stage makes of a module (a debugging figure)."""
    from iree.compiler import compile_str

    flow = compile_str(mlir, extra_args=flags(backend) + ["--compile-to=flow"])
    return len(re.findall(r"flow\.dispatch @", flow.decode() if isinstance(flow, bytes) else flow))
