"""The eager hot path compiled by Cython (Note [native modules] in staged/_native.py):
built where a C compiler is, never stale, and the same results as Python."""

import importlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from staged import _native

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_module_is_compiled_where_a_c_compiler_is():
    if set(_native.STATES.values()) == {"off"}:
        pytest.skip("STAGED_NATIVE=0 runs the eager hot path as Python")
    if shutil.which(sysconfig.get_config_var("CC").split()[0]) is None:
        pytest.skip("no C compiler: the install could not build the native modules")
    assert _native.STATES == dict.fromkeys(_native.MODULES, "compiled"), (
        "pip install -e . (or make native) should have built them: " + _native.summary()
    )
    for name in _native.MODULES:
        file = importlib.import_module(name).__file__
        assert file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), (name, file)


def _tree(tmp_path, stamp_of_source):
    """A package folder with one module built (a stand-in extension) from its source."""
    name = "staged.eager.dispatch"
    py = _native.source_path(name, str(tmp_path))
    os.makedirs(os.path.dirname(py))
    with open(py, "w") as f:
        f.write("x = 1\n")
    open(py[:-3] + importlib.machinery.EXTENSION_SUFFIXES[0], "w").close()
    stamp = stamp_of_source(_native.source_hash(py))
    with open(os.path.join(tmp_path, _native.MANIFEST), "w") as f:
        json.dump({"modules": {name: stamp}}, f)
    return name, py


def test_a_module_edited_after_its_build_is_stale(tmp_path, monkeypatch):
    monkeypatch.delenv("STAGED_NATIVE", raising=False)
    name, py = _tree(tmp_path, lambda digest: f"{digest} Cython 3.2 []")
    states = _native.states(str(tmp_path))
    assert states[name] == "compiled"
    assert set(states.values()) == {"compiled", "not built"}  # the others have no build
    with open(py, "a") as f:
        f.write("y = 2\n")
    assert _native.states(str(tmp_path))[name] == "stale"
    os.remove(py[:-3] + importlib.machinery.EXTENSION_SUFFIXES[0])
    assert _native.states(str(tmp_path))[name] == "not built"
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv("STAGED_NATIVE", off)
        assert set(_native.states(str(tmp_path)).values()) == {"off"}
    monkeypatch.setenv("STAGED_NATIVE", "nope")
    with pytest.warns(UserWarning, match="STAGED_NATIVE='nope' is not 0/false/no/off"):
        assert _native.states(str(tmp_path))[name] == "not built"
    monkeypatch.delenv("STAGED_NATIVE")
    with open(os.path.join(tmp_path, _native.MANIFEST), "w") as f:
        f.write("{not json")  # a corrupt manifest: nothing is taken as compiled
    assert set(_native.states(str(tmp_path)).values()) == {"not built"}


def _run(code, cwd=ROOT, **env):
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# a backward whose leaves' gradients depend on refcount-based ownership (Note [gradient
# ownership]), with and without a hook that keeps them: the calibration of each module
# must match how it runs
PROGRAM = """
import importlib, json, staged
from staged import _native
x = staged.ones(3, dtype=staged.float64, requires_grad=True)
b = staged.ones(3, dtype=staged.float64, requires_grad=True)
g = staged.tensor([1.0, 2.0, 3.0], dtype=staged.float64)
kept = []
b.register_hook(kept.append)
for _ in range(2):
    ((x + b) * g).sum().backward()
    (x * b).relu().sum().backward()
python = [m for m in _native.MODULES if importlib.import_module(m).__file__.endswith(".py")]
grads = [t.tolist() for t in (x.grad, b.grad, g, *kept)]
print(json.dumps({"grads": grads, "python": python, "summary": _native.summary(), "file": staged.__file__}))
"""
WANT = [[4.0, 6.0, 8.0]] * 2 + [[1.0, 2.0, 3.0]] + [[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]] * 2


def test_stale_modules_run_as_python_beside_compiled_ones(tmp_path):
    # a copy of the package whose engine was edited after its build
    shutil.copytree(os.path.join(ROOT, "staged"), tmp_path / "staged")
    with open(tmp_path / "staged" / "autograd" / "engine.py", "a") as f:
        f.write("# edited\n")
    out = json.loads(_run(PROGRAM, cwd=tmp_path).splitlines()[-1])
    assert out["grads"] == WANT
    compiled = set(_native.STATES.values()) == {"compiled"}
    assert out["python"] == (["staged.autograd.engine"] if compiled else list(_native.MODULES))
    assert out["file"] == str(tmp_path / "staged" / "__init__.py")


def test_python_and_compiled_modules_give_the_same_gradients():
    off = json.loads(_run(PROGRAM, STAGED_NATIVE="0").splitlines()[-1])
    assert off["summary"] == "Python (STAGED_NATIVE=0)"
    assert off["python"] == list(_native.MODULES)
    here = json.loads(_run(PROGRAM).splitlines()[-1])
    assert off["grads"] == here["grads"] == WANT


def test_doctors_line_names_what_runs_as_python_and_what_to_do(monkeypatch):
    states = dict.fromkeys(_native.MODULES, "compiled")
    monkeypatch.setattr(_native, "STATES", states)
    assert _native.summary() == f"compiled by Cython ({len(_native.MODULES)} modules)"
    states["staged.eager.tensor"] = "stale"
    n = len(_native.MODULES) - 1
    assert _native.summary() == (
        f"{n} compiled; 1 stale (staged.eager.tensor: `make native` rebuilds them)"
    )
    states.update(dict.fromkeys(_native.MODULES, "not built"))
    assert _native.summary().endswith("(installed without a C compiler? `make native` builds them)")
    states.update(dict.fromkeys(_native.MODULES, "off"))
    assert _native.summary() == "Python (STAGED_NATIVE=0)"


def test_compiled_modules_count_no_frames():
    # compiled functions have no frames: a stack walk or a counted stacklevel there names
    # another frame than it does as Python (warn through _where.warn_user)
    for name in _native.MODULES:
        with open(_native.source_path(name)) as f:
            source = f.read()
        for what in ("stacklevel=", "sys._getframe", "inspect.stack", "currentframe"):
            assert what not in source, f"{name} uses {what} (Note [native modules])"


def test_warnings_name_the_users_line_as_python_too():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_warning_sites.py",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "STAGED_NATIVE": "0"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_tracebacks_show_the_lines_of_compiled_frames(tmp_path, monkeypatch):
    import linecache
    import traceback

    import staged

    monkeypatch.chdir(tmp_path)  # where no relative "staged/..." path leads
    linecache.clearcache()
    try:
        staged.ones(2, 3) + staged.ones(4, 5)
    except RuntimeError:
        frames = traceback.extract_tb(sys.exc_info()[2])
    ours = [f for f in frames if f.filename.endswith("_operands.py")]
    assert ours, [f.filename for f in frames]
    for f in ours:  # compiled: "staged/eager/ops/_operands.py", relative, found by its loader
        with open(_native.source_path("staged.eager.ops._operands")) as src:
            assert f.line == src.read().splitlines()[f.lineno - 1].strip()
