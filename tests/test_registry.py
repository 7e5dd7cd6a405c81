"""The registry walk: every primitive has an impl, a shape rule, a VJP (or is deliberately
non-differentiable), a JVP and an MLIR lowering (or a recorded reason); the package import
arrows point one way, with no import circle and no import inside a function hiding one
(DESIGN.md)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from staged.autodiff import ELEMENTWISE, LINEAR, REGISTRY, ZERO, Primitive, jvp_rule
from staged.autodiff.primitive import Rule
from staged.lower import mlir, onnx_lowering

NAMES = sorted(REGISTRY)
ROOT = pathlib.Path(__file__).resolve().parents[1] / "staged"


def test_registry_is_not_empty():
    assert len(REGISTRY) > 30 and all(isinstance(p, Primitive) for p in REGISTRY.values())


@pytest.mark.parametrize("name", NAMES)
def test_impl_and_shape_rule(name):
    prim = REGISTRY[name]
    assert prim.name == name
    assert callable(prim.impl) and callable(prim.shape_rule)
    assert prim.inputs, f"{name}: no tensor inputs"


@pytest.mark.parametrize("name", NAMES)
def test_vjp_and_jvp(name):
    prim = REGISTRY[name]
    if prim.vjp is None:
        # deliberately non-differentiable: comparisons, logical ops, argmax/argmin
        assert prim.jvp == ZERO, f"{name} has no VJP but a JVP ({prim.jvp!r})"
    else:
        assert prim.variadic or len(prim.vjp) == len(prim.inputs)
        assert any(isinstance(r, Rule) for r in prim.vjp), f"{name}: every VJP rule is None"
        assert prim.jvp in (ELEMENTWISE, LINEAR) or callable(prim.jvp), (
            f"{name}: no JVP rule or tag ({prim.jvp!r})"
        )
    assert callable(jvp_rule(prim))


@pytest.mark.parametrize("table", [mlir.TABLE, onnx_lowering.TABLE], ids=lambda t: t.target)
def test_lowering(table):
    """Every primitive has a lowering for the target, or reasons it has none."""
    bad = []
    for name, entry in table.walk(NAMES).items():
        if entry is None or not (entry["lowered"] or entry["unsupported"]):
            bad.append(f"{name}: no {table.target} lowering and no reason it is unsupported")
            continue
        bad += [
            f"{name}/{key}: empty reason"
            for key, reason in entry["unsupported"].items()
            if not (isinstance(reason, str) and reason.strip())
        ]
    assert not bad, "\n".join(bad)


def test_jvp_rule_rejects_missing_rule():
    prim = object.__new__(Primitive)
    prim.name, prim.jvp = "fake", None
    with pytest.raises(NotImplementedError, match="fake"):
        jvp_rule(prim)


# --- import direction --------------------------------------------------------------------
FORBIDDEN = {
    "autodiff": ("eager", "autograd", "tracing", "lower", "runtime", "nn", "optim"),
    "eager": ("autograd", "tracing", "lower", "runtime", "nn", "optim"),
    "autograd": ("tracing", "lower", "runtime", "nn", "optim"),
    "tracing": ("lower", "runtime", "nn", "optim"),
    "lower": ("runtime", "nn", "optim"),
    "nn": ("tracing", "lower", "runtime", "optim"),
    "optim": ("tracing", "lower", "runtime", "nn"),
}


def _imports(path: pathlib.Path):
    """``(staged subpackage imported, inside a function?)`` for each import in ``path``."""
    pkg = path.relative_to(ROOT).parts
    tree = ast.parse(path.read_text())
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    nested = {id(n) for f in funcs for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this file's package
                base = list(pkg[:-1])[: len(pkg) - node.level]
                mod = ".".join(["staged", *base] + ([node.module] if node.module else []))
                mods = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
            else:
                mods = [node.module]
        else:
            continue
        for m in mods:
            parts = m.split(".")
            if parts[0] == "staged" and len(parts) > 1:
                yield parts[1], id(node) in nested


# modules that stand on both siblings, with why
BOTH_SIBLINGS = {
    # torch.optim.swa_utils: AveragedModel is an nn.Module, update_bn finds BatchNorm layers
    ("optim/swa_utils.py", "nn"),
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for target, lazy in _imports(path):
            if (str(path.relative_to(ROOT)), target) in BOTH_SIBLINGS:
                continue
            if target in FORBIDDEN[package]:  # lazy imports inside functions count too
                bad.append(
                    f"{path.relative_to(ROOT.parent)} imports staged.{target}"
                    + (" (inside a function)" if lazy else "")
                )
    assert not bad, "\n".join(bad)


def test_readme_layers_match_the_table():
    """README's "How it is built" names the layers lowest first; each may not import any
    layer after it, and each layer after it may import it."""
    readme = (ROOT.parent / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.strip().startswith("autodiff <- "))
    layers = [x.strip() for x in line.split("<-")]
    assert set(layers[:-1]) <= set(FORBIDDEN) and len(layers) == 6, layers
    for i, low in enumerate(layers):
        for high in layers[i + 1 :]:
            assert high in FORBIDDEN[low] and low not in FORBIDDEN.get(high, ()), (low, high)


# --- import circles -----------------------------------------------------------------------
# Imports of staged modules inside functions, each with why it cannot be at the top. Any
# other one fails test_no_function_level_imports: a late import usually hides a circle.
LATE_IMPORTS = {
    ("staged.__main__", "staged.onnx"): "the CLI's export command: staged.onnx needs the onnx "
    "extra, which other commands do without",
    ("staged.runtime.compiled", "staged.onnx"): "Traced.export_onnx: the onnx extra is "
    "optional (staged.onnx is loaded lazily too)",
}


def import_graph(root: pathlib.Path, name: str) -> dict:
    """``{module: {imported module: [(line, inside a function?, named?)]}}`` over the package
    ``name`` whose directory is ``root``, counting imports inside functions. Importing
    ``a.b.c`` also runs the ``__init__`` of ``a.b`` where the importer is not inside it
    (the root's only when it is imported itself)."""
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = (name, *path.relative_to(root).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for mod, path in files.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        funcs = [
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        ]
        nested = {id(n) for f in funcs for n in ast.walk(f) if n is not f}
        edges = graph[mod] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names
                ]
            else:
                continue
            for target in targets:
                chain = target.split(".")
                for i in range(1, len(chain) + 1):  # the target, and the packages it is in
                    t = ".".join(chain[:i])
                    if (
                        t in files
                        and t != mod
                        and (t == target or i > 1 and not mod.startswith(t + "."))
                    ):
                        edges.setdefault(t, []).append(
                            (node.lineno, id(node) in nested, t == target)
                        )
    return graph


def import_cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                cycles.append(sorted(scc))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def late_imports(graph: dict) -> set:
    """``(module, imported module)`` for each import of the package inside a function."""
    return {
        (m, t)
        for m, edges in graph.items()
        for t, sites in edges.items()
        if any(lazy and direct for _, lazy, direct in sites)
    }


GRAPH = import_graph(ROOT, "staged")


def test_no_import_cycles():
    cycles = import_cycles(GRAPH)
    assert not cycles, "import circles (imports inside functions count):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_no_function_level_imports():
    unexplained = sorted(late_imports(GRAPH) - set(LATE_IMPORTS))
    assert not unexplained, (
        "imports inside functions (move them to the top, or add them to "
        "LATE_IMPORTS with a reason):\n" + "\n".join(f"{m} imports {t}" for m, t in unexplained)
    )
    stale = sorted(set(LATE_IMPORTS) - late_imports(GRAPH))
    assert not stale, f"LATE_IMPORTS entries with no such import: {stale}"
    assert all(reason.strip() for reason in LATE_IMPORTS.values())


def test_a_circle_fails_the_layering_test(tmp_path):
    """A synthetic package: ``a`` imports ``b``, and ``b`` imports ``a`` inside a function
    to dodge the circle; both checks catch it, and without the late import it is clean."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n\n\ndef f():\n    return b.g()\n")
    (pkg / "sub" / "b.py").write_text("def g():\n    from ..a import f\n    return f\n")
    graph = import_graph(pkg, "pkg")
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b"]]
    assert late_imports(graph) == {("pkg.sub.b", "pkg.a")}
    (pkg / "sub" / "b.py").write_text("def g():\n    return 1\n")
    graph = import_graph(pkg, "pkg")
    assert import_cycles(graph) == [] and late_imports(graph) == set()


def test_one_meaning_per_name():
    """``staged.capture`` is the user's function and nothing else; the package that does
    the capturing is ``staged.tracing`` (``import staged.capture.ir`` used to raise)."""
    import staged
    import staged.tracing.ir as ir

    assert (
        callable(staged.capture)
        and ir.Graph is staged.capture(lambda x: x * 2, staged.ones(2)).graph.__class__
    )
