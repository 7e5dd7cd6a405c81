"""The declarations type checkers read stay in step with what import time attaches: every
public method of ``staged.Tensor`` and every public name of ``staged`` is declared in its
source (``Tensor``'s ``TYPE_CHECKING`` block, ``staged/__init__.py``) or in the stubs made
from the public-op table (``tests/ops/stubs.py``), nothing is declared that does not exist,
and the committed stubs are the table's."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pathlib
import types

import pytest

import staged
from staged import _native
from tests.ops import stubs

# the module (staged.eager.tensor is also the name of the factory function)
# its source, also where it runs compiled (Note [native modules])
TENSOR_SOURCE = pathlib.Path(_native.source_path("staged.eager.tensor")).read_text()


def _declared(body, package: str = "staged") -> set:
    """Names a class or module body binds, inside ``if`` blocks (TYPE_CHECKING) too; a
    ``from m import *`` binds ``m.__all__`` (as type checkers read it)."""
    names = set()
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.names[0].name == "*":
            names |= _star(node, package)
            continue
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If):
            names |= _declared(node.body, package) | _declared(node.orelse, package)
    return names


def _star(node: ast.ImportFrom, package: str) -> set:
    """What ``from m import *`` binds: ``m.__all__``, read from ``m``'s stub if it has one."""
    name = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
    stub = pathlib.Path(staged.__file__).parent.joinpath(*name.split(".")[1:]).with_suffix(".pyi")
    if stub.exists():
        return set(ast.literal_eval(_stub_node(stub, "__all__").value))
    mod = importlib.import_module(name)
    return set(getattr(mod, "__all__", [n for n in vars(mod) if _public(n)]))


def _stub_node(path: pathlib.Path, name: str):
    """The assignment or class ``name`` at the top of the stub ``path``."""
    for node in ast.parse(path.read_text()).body:
        targets = getattr(node, "targets", [])
        if getattr(node, "name", None) == name or any(
            getattr(t, "id", None) == name for t in targets
        ):
            return node
    raise LookupError(f"{path} has no {name}")


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def test_every_tensor_method_attached_at_import_is_declared():
    tree = ast.parse(TENSOR_SOURCE)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    declared = _declared(cls.body) | _declared(
        _stub_node(stubs.ROOT / "_ops.pyi", "TensorOps").body
    )
    attached = {n for n in vars(staged.Tensor) if _public(n)}
    implicit = {"__annotations__", "__module__", "__weakref__", "__dict__", "__slots__"}
    missing = sorted(n for n in attached - declared - implicit if n not in vars(object))
    assert not missing, f"declare these in Tensor's TYPE_CHECKING block: {missing}"
    stale = sorted(n for n in declared - set(dir(staged.Tensor)) if _public(n))
    assert not stale, f"declared on Tensor but not attached at import: {stale}"


def test_every_public_name_of_staged_is_declared():
    declared = _declared(ast.parse(inspect.getsource(staged)).body)
    public = {
        n
        for n, v in vars(staged).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    missing = sorted(public - declared)
    assert not missing, f"declare these in staged/__init__.py (TYPE_CHECKING): {missing}"


@pytest.mark.parametrize("path", list(stubs.STUBS), ids=lambda p: p.name)
def test_the_committed_stubs_are_made_from_the_table(path):
    assert path.read_text() == stubs.STUBS[path](), (
        f"{path} is stale: run `make generated` and commit it"
    )
