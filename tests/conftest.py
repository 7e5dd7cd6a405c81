"""Shared fixtures: seeded RNGs per test and a private IREE compile cache."""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import glob
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

# Note [torch's kernels per CPU]: torch picks its vectorised kernels (ATen's, and oneDNN's
# for gelu) by the CPU's features, and its AVX-512 ones answer otherwise in places: gelu is
# NaN at +inf and ~2e-3 off in float32's tail, celu/elu/selu's gradient is 2 at NaN. The
# oracle is torch's AVX2 kernels on every machine, the build staged follows (README's
# "Reproducibility"); set before torch is imported, and inherited by the scripts the tests
# run with the real torch. (A CPU without AVX2 keeps torch's default kernels.)
os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import staged


# Note [test overhead]: what runs around each of the suite's ~42k tests is paid 42k times.
# ``torch.manual_seed`` also seeds CUDA's, MTIA's and XPU's generators lazily, each
# recording the caller's stack with ``traceback.format_stack`` (under pytest's deep stack,
# ~1.5 ms a test): the CPU generator, the only one here, is seeded directly. pytest's
# logging plugin attaches its handlers to every non-propagating logger in every phase of
# every test (torch makes 42 at import: ~1.2 ms a test), so it is off (``-p no:logging``
# in pyproject.toml) and ``caplog`` below is the part of it the suite uses.


@pytest.fixture(autouse=True)
def _seed():
    """Every test draws the same numbers each run, torch's oracle samples included (a
    comparison of two unseeded samples' spread is flaky by construction)."""
    staged.manual_seed(0)
    np.random.seed(0)
    torch.default_generator.manual_seed(0)  # torch.manual_seed(0) on a CPU-only build
    yield


class _Records(logging.Handler):
    """``caplog``'s ``at_level`` and ``records``: what is logged through ``logger`` while
    ``at_level`` is open."""

    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    @contextlib.contextmanager
    def at_level(self, level, logger=None):
        log = logging.getLogger(logger)
        old = log.level
        log.setLevel(level)
        log.addHandler(self)
        try:
            yield
        finally:
            log.removeHandler(self)
            log.setLevel(old)


@pytest.fixture
def caplog():
    """pytest's ``caplog``, the part the suite uses (Note [test overhead])."""
    return _Records()


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """Compiled modules go to $STAGED_CACHE_DIR (set by `make test`) or a temp dir."""
    if not os.environ.get("STAGED_CACHE_DIR"):
        os.environ["STAGED_CACHE_DIR"] = str(tmp_path_factory.mktemp("staged-cache"))
    yield


# Under pytest-xdist each worker takes its share of the cores for NumPy's BLAS, IREE's task
# workers, torch's pool and lavapipe, instead of each starting a thread per core: on CI's 2
# cores, two workers with two spinning pools each ran slower than one serial run.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _SHARE = max(1, (os.cpu_count() or 1) // _WORKERS)
    staged.set_num_threads(_SHARE)
    torch.set_num_threads(_SHARE)
    os.environ.setdefault("LP_NUM_THREADS", str(_SHARE))

# The Vulkan tests run on Mesa's lavapipe when it is installed (`make test` installs it):
# pin its ICD so a machine's other Vulkan drivers don't get in the way.
_LAVAPIPE = sorted(glob.glob("/usr/share/vulkan/icd.d/lvp_icd.*.json"))
if _LAVAPIPE and not os.environ.get("VK_ICD_FILENAMES"):
    os.environ["VK_ICD_FILENAMES"] = _LAVAPIPE[0]


# Note [test scheduling]: `make test` runs pytest-xdist with ``--dist loadgroup
# --no-loadscope-reorder``, and this hook makes the groups and their order. A test file is
# one group (its module fixtures and caches are built once, as with ``--dist loadfile``),
# except the long files whose tests are independent: the op sweep's eager, shape and
# capture checks and the fuzzer's properties are scheduled test by test, the models' tests
# one by one, and each compatibility program with its own tests (they share its runs). The
# longest groups start first and the op sweep's many short tests come last, so no worker
# is left alone with a long file at the end (it was 10 minutes of a 43-minute run).
_FIRST = ("tests/fuzz/", "tests/distributed/", "tests/models/", "tests/programs/")
_SWEEP, _SWEEP_COMPILED = "tests/ops/test_sweep.py", ("test_llvm_cpu", "test_vulkan_spirv")


def _group(path: str, item) -> str | None:
    """The xdist group of ``item`` (in file ``path``); None schedules it on its own."""
    if path == _SWEEP:  # the compiled checks share one cache of modules
        return "sweep-compiled" if item.originalname in _SWEEP_COMPILED else None
    if path == "tests/fuzz/test_programs.py" or path.startswith("tests/models/"):
        return None
    if path == "tests/programs/test_programs.py" and "[" in item.name:
        return "program-" + item.name.partition("[")[2].rstrip("]")
    return path


def _rank(group: str | None, path: str) -> int:
    """Where ``path``'s tests go in the queue: the compiled sweep, the long files, the
    rest in collection order, the sweep's short tests last."""
    if path == _SWEEP:
        return 0 if group else len(_FIRST) + 2
    return next(
        (i + 1 for i, first in enumerate(_FIRST) if path.startswith(first)), len(_FIRST) + 1
    )


def pytest_itemcollected(item):
    """Mark the item's group as it is collected (before xdist's workers read the marks)."""
    if getattr(item.config.option, "loadgroup", False):  # set on xdist's workers
        path = item.nodeid.partition("::")[0]
        group = _group(path, item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        item.stash[_RANK] = _rank(group, path)


_RANK = pytest.StashKey[int]()


def pytest_collection_modifyitems(config, items):
    if getattr(config.option, "loadgroup", False):
        items.sort(key=lambda item: item.stash[_RANK])  # stable: files keep their order


# Note [crashed workers]: pytest-xdist 3.8's group scheduling (LoadScopeScheduling) hangs
# the run when a worker dies and is replaced (pytest-xdist#1323, #1327, #1378; fixed
# upstream after 3.8, the newest release): it puts the dead worker's whole workload back in
# the queue, its finished groups too, and assigning one of those sends a worker no tests,
# so that worker, which runs a test only once it has the next one or is told to stop,
# waits forever; a replacement given one group of one test waits the same way. A worker
# that aborted in a test's teardown left a run here with both workers idle at 99 %, as CI
# ended at its limit. This scheduler requeues only the groups with tests left, marks the
# test the worker died in as done (xdist has reported it as crashed: run again, it would
# take the replacement down too), and gives a worker more whenever two tests or fewer are
# left to it (xdist's own rule) until it has more, or tells it to stop when there is none.
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Scheduling(LoadGroupScheduling):
        def remove_node(self, node):
            workload = self.assigned_work.pop(node)
            left = [(unit, i) for unit in workload.values() for i, done in unit.items() if not done]
            if not left:
                return None
            unit, crashed = left[0]
            unit[crashed] = True
            self.workqueue.update((k, u) for k, u in workload.items() if not all(u.values()))
            for other in list(self.assigned_work):
                self._reschedule(other)
            return crashed

        def _reschedule(self, node):
            if node.shutting_down or node not in self.registered_collections:
                return  # (a replacement still collecting: schedule() runs when it is done)
            while self.workqueue and self._pending_of(self.assigned_work[node]) <= 2:
                self._assign_work_unit(node)
            if not self.workqueue:  # (the others: at their next test, or xdist's end)
                node.shutdown()

    return Scheduling(config, log)


# Note [hang watchdog]: pytest-timeout (``timeout`` in pyproject.toml) fails a test that runs
# too long by a signal, whose handler runs only when the main thread returns to Python: a
# test stuck in C (a deadlock holding the GIL, a wait in a native library) outlives it, and
# its xdist worker sits with the tests queued behind it until CI's limit ends the whole run
# with no word of which test it was. Two watchdogs end such a worker, xdist reports the test
# as crashed, starts a new worker and goes on, and the summary prints the stacks (an xdist
# worker's stderr reaches no terminal): a Python thread 30 s past pytest-timeout's limit
# writes every thread's stack, kills the processes the worker started and exits; should the
# GIL never come free, faulthandler's C thread does the same but the killing 90 s past it.
# The processes matter: a child forked by a test holds the worker's pipes to xdist, which
# sees the worker end only when every holder has closed them, so a hung child kept the whole
# run waiting after its worker was gone (a CI run ended by its limit at 99 %). Forked
# children of a worker therefore die with it (PR_SET_PDEATHSIG), and children the tests
# leave running (a failed or timed-out join; not a DataLoader's, which its iterator's
# finalizer ends) are killed when the worker's session ends, and named in the summary.
_WATCHDOG: dict = {}
_PYTHON_GRACE, _C_GRACE = 30, 90  # seconds past the limit for the Python and C watchdogs


def pytest_configure(config):
    try:  # --timeout, else the ini's (pytest-timeout's names; absent under -p no:timeout)
        limit = float(config.getoption("timeout", None) or config.getini("timeout") or 0)
    except ValueError:
        limit = 0.0
    if limit <= 0:
        return
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        os.environ["STAGED_HANG_DIR"] = tempfile.mkdtemp(prefix="staged-hangs-")
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    path = os.path.join(os.environ["STAGED_HANG_DIR"], f"{worker}.txt")
    _WATCHDOG.update(seconds=limit, file=open(path, "a"), deadline=None)  # noqa: SIM115
    threading.Thread(target=_watch, name="hang watchdog", daemon=True).start()
    if hasattr(config, "workerinput") and sys.platform == "linux":
        os.register_at_fork(before=_note_forking_thread, after_in_child=_die_with_parent)


def _watch() -> None:
    while True:
        time.sleep(5)
        deadline = _WATCHDOG["deadline"]
        if deadline is not None and time.monotonic() > deadline:
            faulthandler.dump_traceback(_WATCHDOG["file"], all_threads=True)
            killed = _kill_children()
            _WATCHDOG["file"].write(
                f"ended {_WATCHDOG['seconds'] + _PYTHON_GRACE:.0f} s into the test, killing "
                f"the processes it started: {killed}\n"
            )
            _WATCHDOG["file"].flush()
            os._exit(1)


def _note_forking_thread() -> None:
    _WATCHDOG["main thread forks"] = threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:
    # the signal comes when the forking *thread* ends: a worker's main thread ends with it
    if _WATCHDOG.get("main thread forks"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_children() -> list[str]:
    """Kill every live process this one started (multiprocessing's, forked or spawned, and
    subprocesses) and theirs; their command lines."""
    parents = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError), open(stat) as f:
            pid, rest = f.read().split(" ", 1)
            parents[int(pid)] = int(rest.rsplit(")", 1)[1].split()[1])
    mine, found = [os.getpid()], []
    for parent in mine:  # grows as children are found: the whole tree
        for pid in sorted(p for p, pp in parents.items() if pp == parent):
            mine.append(pid)
            with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
                found.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    return found


def pytest_unconfigure(config):
    if _WATCHDOG:
        _WATCHDOG["file"].close()
    if not hasattr(config, "workerinput") and "STAGED_HANG_DIR" in os.environ:
        shutil.rmtree(os.environ.pop("STAGED_HANG_DIR"), ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _WATCHDOG:
        yield
        return
    limit = _WATCHDOG["seconds"]
    _WATCHDOG["deadline"] = time.monotonic() + limit + _PYTHON_GRACE
    faulthandler.dump_traceback_later(limit + _C_GRACE, exit=True, file=_WATCHDOG["file"])
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        _WATCHDOG["deadline"] = None


def pytest_sessionfinish(session):
    """Kill the processes a worker's tests left running: multiprocessing joins them at exit,
    and a hung one (a failed test's) kept the worker from ending; name the tests that
    failed only by a lost device (Note [lost devices in CI])."""
    _name_lost_device_tests(session)
    mp = sys.modules.get("multiprocessing.process")
    for p in mp.active_children() if _WATCHDOG and mp is not None else ():
        _WATCHDOG["file"].write(f"{p} was left running by a test: killed\n")
        _WATCHDOG["file"].flush()
        p.kill()
        p.join(10)


def _hang_stacks(terminalreporter) -> None:
    folder = os.environ.get("STAGED_HANG_DIR")
    for path in sorted(glob.glob(os.path.join(folder, "*.txt"))) if folder else ():
        with open(path) as f:
            text = f.read()
        if text:
            name = os.path.basename(path)[:-4]
            terminalreporter.section(
                f"hung tests and processes left in {name} (Note [hang watchdog])"
            )
            terminalreporter.write_line(text[-20000:])


@pytest.fixture
def gate(monkeypatch):
    """Hold every background compile (``mode="background"``) until ``gate.set()`` or the
    test's end (a hang guard of 300 s, not a timing)."""
    from staged.runtime import background

    ev = threading.Event()
    real = background.Compiling.compile

    def gated(self, entry):
        ev.wait(300)
        real(self, entry)

    monkeypatch.setattr(background.Compiling, "compile", gated)
    yield ev
    ev.set()


@pytest.fixture
def forced(monkeypatch):
    """State written in place (Note [state in place]) by every llvm-cpu step, however
    small its state."""
    monkeypatch.setattr("staged.runtime.compiler.IN_PLACE_MIN_BYTES", 0)


# Note [time per file]: pytest's ``--durations`` lists single tests, and most of the
# suite's time is spread over files of many short ones; the summary adds up each file's
# test time (setup, call and teardown, in whichever worker ran it) so that the files worth
# making cheaper are named at the end of every run of more than a few files.
_FILE_TIME: dict[str, float] = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.partition("::")[0]
    _FILE_TIME[path] = _FILE_TIME.get(path, 0.0) + report.duration
    if report.failed:
        lost = "DeviceLostError" in str(report.longrepr)
        _FAILED.append((report.nodeid.partition("@")[0], lost))  # "@": an xdist group


# Note [lost devices in CI]: a Vulkan driver that loses its device fails the test that sees
# it (DeviceLostError; steps compiled later get a fresh device: Note [lost devices] in
# staged/runtime/device.py). Lavapipe lost its device twice in CI (2026-12-02, 2026-12-07),
# at tests that pass on their own and in later runs of the suite. When every failure of a
# run is such a loss, the run's end names those tests in LOST_DEVICE_TESTS, and `make
# test` runs them again, in a fresh process, loudly: the suite passes only if they do.
LOST_DEVICE_TESTS = ".cache/lost-device-tests.txt"  # under the rootdir
_FAILED: list[tuple[str, bool]] = []


def _name_lost_device_tests(session) -> None:
    if hasattr(session.config, "workerinput"):
        return
    path = session.config.rootpath / LOST_DEVICE_TESTS
    path.unlink(missing_ok=True)
    if _FAILED and all(lost for _, lost in _FAILED):
        path.parent.mkdir(exist_ok=True)
        with open(path, "w") as f:
            f.writelines(f"{nodeid}\n" for nodeid in dict.fromkeys(n for n, _ in _FAILED))


def pytest_terminal_summary(terminalreporter):
    _hang_stacks(terminalreporter)
    if len(_FILE_TIME) < 20:
        return
    total = sum(_FILE_TIME.values())
    terminalreporter.section(f"time per file: {total:.0f} s of tests in all")
    for path, t in sorted(_FILE_TIME.items(), key=lambda kv: -kv[1])[:40]:
        terminalreporter.write_line(f"{t:8.1f} s {100 * t / total:5.1f} %  {path}")
