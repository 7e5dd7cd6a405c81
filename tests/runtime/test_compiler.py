"""Compile cache: hits skip the compiler, damaged entries are rebuilt, errors carry
IREE's diagnostics and the staged op's line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from staged.runtime import cache, compiler
from staged.runtime.compiler import CompileError, compile_mlir
from staged.runtime.device import device, to_host

TEXT = """func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %r = math.exp %a : tensor<3xf32> loc("exp"("model.py":5:0))
  return %r : tensor<3xf32>
}
"""


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("STAGED_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def entry(tmp_path_factory) -> tuple[str, bytes]:
    """TEXT's cache entry (file name, bytes), compiled once for the tests that start from
    it in their own cache (one compile, not one a test)."""
    d = tmp_path_factory.mktemp("entry")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STAGED_CACHE_DIR", str(d))
        compile_mlir(TEXT)
    (path,) = d.iterdir()
    return path.name, path.read_bytes()


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = compiler.compile_subprocess

    def count(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(compiler, "compile_subprocess", count)
    return calls


def test_hit_returns_same_bytes_without_compiling(counted, cache_dir):
    first = compile_mlir(TEXT)
    assert len(counted) == 1 and list(cache_dir.iterdir())
    assert compile_mlir(TEXT) == first and len(counted) == 1
    out = device().load(first).invoke("main", [np.array([0, 1, 2], np.float32)])
    np.testing.assert_allclose(to_host(out[0]), np.exp([0, 1, 2]), rtol=1e-6)


def test_a_key_missed_at_once_by_several_processes_is_built_once(cache_dir):
    """Note [one build per key]: misses of one key wait for the first one's build (ranks
    of a job on one machine compile a module once), then read its entry; the lock file
    goes once the entry is stored. Processes and threads alike: each opens the lock file
    itself, and flock locks belong to the open file."""
    script = (
        "import sys, time\n"
        "from staged.runtime import cache\n"
        "def build():\n"
        "    print('built', flush=True)\n"
        "    time.sleep(0.5)\n"
        "    return b'module'\n"
        "assert cache.cached(sys.argv[1], build) == b'module'\n"
    )
    env = {**os.environ, "STAGED_CACHE_DIR": str(cache_dir)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, "k" * 64], env=env, stdout=subprocess.PIPE)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert sum(o.count(b"built") for o in outs) == 1

    builds = []

    def build():
        builds.append(1)
        time.sleep(0.2)
        return b"module"

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: cache.cached("t" * 64, build), range(4)))
    assert got == [b"module"] * 4 and builds == [1]
    assert sorted(p.name for p in cache_dir.iterdir()) == ["k" * 64, "t" * 64]


def test_results_stay_on_device_and_chain(entry, cache_dir):
    (cache_dir / entry[0]).write_bytes(entry[1])
    m = device().load(compile_mlir(TEXT))
    (r,) = m.invoke("main", [np.zeros(3, np.float32)])
    (r,) = m.invoke("main", [r])  # a DeviceArray goes straight back in
    host = to_host(r)
    host[0] = 5  # a writable copy
    np.testing.assert_allclose(to_host(r), np.full(3, np.e), rtol=1e-6)


def test_key_depends_on_text_and_backend():
    assert cache.cache_key(TEXT, "llvm-cpu") != cache.cache_key(TEXT, "cuda")
    assert cache.cache_key(TEXT, "llvm-cpu") != cache.cache_key(TEXT + " ", "llvm-cpu")
    assert cache.cache_key("ab", "c") != cache.cache_key("a", "bc")


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],
        lambda b: b[:5],
        lambda b: b[:-1] + bytes([b[-1] ^ 1]),
        lambda b: b"",
    ],
)
def test_damaged_entry_is_rebuilt(counted, cache_dir, damage, entry):
    name, good = entry
    (cache_dir / name).write_bytes(damage(good))
    again = compile_mlir(TEXT)
    assert len(counted) == 1 and len(again) == len(good) - cache._HEAD
    assert cache.load(name) == again


def test_unwritable_cache_warns_once_and_falls_back(monkeypatch, tmp_path, counted):
    """It recompiled on every run, silently."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("STAGED_CACHE_DIR", str(blocker / "sub"))
    monkeypatch.setattr(cache, "_FALLBACK", {})
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.warns(
        RuntimeWarning,
        match=r"file/sub cannot be written .*caching in "
        r".*tmp/staged-cache-.* instead",
    ):
        first = compile_mlir(TEXT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compile_mlir(TEXT) == first and compile_mlir(TEXT + " ") and len(counted) == 2
    assert compile_mlir(TEXT) == first and len(counted) == 2  # a hit in the fallback


def test_host_code_is_keyed_on_the_cpu_features(monkeypatch, counted):
    """A cache shared between machines must not serve AVX-512 code to an AVX2 CPU."""
    monkeypatch.setattr(compiler, "host_cpu", lambda: "GenuineIntel | 6 | 85 | avx2 avx512f")
    compile_mlir(TEXT)
    compile_mlir(TEXT)
    assert len(counted) == 1  # same features: one key
    monkeypatch.setattr(compiler, "host_cpu", lambda: "GenuineIntel | 6 | 85 | avx2")
    compile_mlir(TEXT)
    assert len(counted) == 2  # other features: another key


def test_compile_error_carries_diagnostics_and_line():
    bad = TEXT.replace("math.exp %a : tensor<3xf32>", "math.exp %a : tensor<3xi32>")
    with pytest.raises(CompileError, match=r"error: \[exp at model\.py:5\] .*different type"):
        compiler.compile_uncached(bad, compiler.flags("llvm-cpu"))


def test_concurrent_compiles_keep_their_diagnostics_and_stderr():
    """Compiles in threads (the op sweep's, a background compile's) share the redirection
    of file descriptor 2: each gets its result or its own error, and stderr is the
    process's own again afterwards."""

    bad = TEXT.replace("math.exp %a : tensor<3xf32>", "math.exp %a : tensor<3xi32>")
    before = os.fstat(2)

    def build(text):
        try:
            return compiler.compile_uncached(text, compiler.flags("llvm-cpu"))
        except CompileError as err:
            return err

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(build, [TEXT, bad, TEXT, bad]))
    assert [type(g) for g in got] == [bytes, CompileError] * 2
    assert got[0] == got[2] and all("different type" in str(g) for g in got[1::2])
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)


def test_first_compiles_of_a_process_in_threads_at_once():
    """The first compiles of a process, started together in threads (two steps compiled in
    the background): IREE's process-wide options are set up once, not by both (that aborted
    the process)."""

    script = (
        "import threading\nfrom staged.runtime import compiler\n"
        f"TEXT = {TEXT!r}\nstart = threading.Barrier(6)\nout = []\n"
        "def build():\n    start.wait()\n"
        "    out.append(compiler.compile_uncached(TEXT, compiler.flags('llvm-cpu')))\n"
        "ts = [threading.Thread(target=build) for _ in range(6)]\n"
        "[t.start() for t in ts]\n[t.join() for t in ts]\n"
        "print(len(out), len(set(out)))\n"
    )
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert run.returncode == 0 and run.stdout.split() == ["6", "1"], run.stderr[-2000:]


def test_backend_diagnostic_at_user_line_names_the_primitive():
    # past parsing, IREE prints an op's location as the user's file:line alone
    msg = "model.py:5:0: failed to legalize operation 'math.exp'"
    assert compiler._where(msg, TEXT) == "exp at model.py:5"


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown backend"):
        compile_mlir(TEXT, backend="tpu")


def test_a_step_from_the_cache_never_loads_the_compiler(cache_dir):
    """A compiled step whose module is in the cache neither verifies its MLIR nor reads
    IREE's version by importing ``iree.compiler`` (MLIR's libraries: ~60 MB resident)."""

    script = (
        "import sys, staged\nstaged.manual_seed(0)\n"
        "x = staged.randn(4, 3, requires_grad=True)\n"
        "f = staged.compile(lambda x: (x.exp() * 2).sum())\n"
        "print(f(x).item(), 'iree.compiler' in sys.modules)\n"
    )
    env = {**os.environ, "STAGED_CACHE_DIR": str(cache_dir)}
    cold, warm = (
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        for _ in range(2)
    )
    assert cold.returncode == 0 and cold.stdout.split()[1] == "True", cold.stderr
    assert warm.returncode == 0 and warm.stdout.split() == [cold.stdout.split()[0], "False"]
    assert (
        compiler.compiler_version() == __import__("iree.compiler.version").compiler.version.VERSION
    )
