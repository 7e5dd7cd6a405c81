"""The registry walk: every primitive has an impl, a shape rule, a VJP (or is deliberately
non-differentiable), a JVP and an MLIR lowering (or a recorded reason); and the package
import arrows point one way (DESIGN.md)."""
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
        assert prim.jvp in (ELEMENTWISE, LINEAR) or callable(prim.jvp), \
            f"{name}: no JVP rule or tag ({prim.jvp!r})"
    assert callable(jvp_rule(prim))


@pytest.mark.parametrize("table", [mlir.TABLE, onnx_lowering.TABLE], ids=lambda t: t.target)
def test_lowering(table):
    """Every primitive has a lowering for the target, or reasons it has none."""
    bad = []
    for name, entry in table.walk(NAMES).items():
        if entry is None or not (entry["lowered"] or entry["unsupported"]):
            bad.append(f"{name}: no {table.target} lowering and no reason it is unsupported")
            continue
        bad += [f"{name}/{key}: empty reason" for key, reason in entry["unsupported"].items()
                if not (isinstance(reason, str) and reason.strip())]
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
                base = list(pkg[:-1])[:len(pkg) - node.level]
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


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for target, lazy in _imports(path):
            if target in FORBIDDEN[package]:  # lazy imports inside functions count too
                bad.append(f"{path.relative_to(ROOT.parent)} imports staged.{target}"
                           + (" (inside a function)" if lazy else ""))
    assert not bad, "\n".join(bad)
