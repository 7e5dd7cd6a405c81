"""On-disk cache of compiled modules: ``$STAGED_CACHE_DIR`` or ``~/.cache/staged``.

An entry is ``MAGIC + sha256(payload) + payload``, written atomically (temp file, then
``os.replace``); an entry that is truncated or corrupted reads as a miss and is rebuilt.
A directory that cannot be written is replaced, with one warning, by one under the
system's temporary directory (else every run would recompile everything).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
import warnings
from pathlib import Path

MAGIC = b"STAGED1\n"
_HEAD = len(MAGIC) + 32


_FALLBACK: dict[Path, Path] = {}  # unwritable directory -> the writable one used instead


def cache_dir() -> Path:
    d = Path(os.environ.get("STAGED_CACHE_DIR") or Path.home() / ".cache" / "staged")
    return _FALLBACK.get(d, d)


def cache_key(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        b = p if isinstance(p, bytes) else str(p).encode()
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def load(key: str) -> bytes | None:
    """The cached payload for ``key``, or None when absent or damaged."""
    try:
        data = (cache_dir() / key).read_bytes()
    except OSError:
        return None
    payload = data[_HEAD:]
    if data[: len(MAGIC)] != MAGIC or hashlib.sha256(payload).digest() != data[len(MAGIC) : _HEAD]:
        return None
    return payload


def store(key: str, payload: bytes) -> None:
    """Write an entry atomically; when the cache directory cannot be written, warn once and
    use a fallback under the temporary directory (skipped if that fails too)."""
    d = cache_dir()
    try:
        _write(d, key, payload)
    except OSError as err:
        if d in _FALLBACK.values():
            return
        fallback = Path(tempfile.gettempdir()) / f"staged-cache-{_user()}"
        warnings.warn(
            f"staged: the compile cache directory {d} cannot be written ({err}); "
            f"caching in {fallback} instead. Set STAGED_CACHE_DIR to a writable "
            "directory",
            RuntimeWarning,
            stacklevel=2,
        )
        _FALLBACK[d] = fallback
        try:
            _write(fallback, key, payload)
        except OSError:
            pass


def _write(d: Path, key: str, payload: bytes) -> None:
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key[:16]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, d / key)
    except BaseException:
        os.unlink(tmp)
        raise


def _user() -> str:
    return str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")


def cached(key: str, build) -> bytes:
    """``load(key)``, or ``build()`` stored under ``key``: built once while other processes
    and threads that miss the same key wait for it (Note [one build per key])."""
    payload = load(key)
    if payload is not None:
        return payload
    with _building(key) as lock:
        payload = load(key)  # built while this one waited
        if payload is None:
            payload = build()
            store(key, payload)
            lock.done()
    return payload


# Note [one build per key]: ranks of one job on a machine (mpiexec -n 8), test workers
# and threads often miss the same module at once; each compiling it would multiply the
# CPU (and IREE's own threads) by their number for one result. The first to miss holds
# an flock on ``.<key>.lock`` in the cache directory while it builds; the others wait
# for it, then read the entry. The builder removes the lock file once the entry is
# stored (a waiter still holding the old file finds the entry; one that arrives later
# finds it too). The OS releases the lock of a process that dies; a build that outlasts
# LOCK_WAIT_S is not waited for (whoever waits builds too). Where the directory cannot
# be written, or fcntl is missing, nothing waits.
LOCK_WAIT_S = 900.0


class _Lock:
    def __init__(self, path: Path | None):
        self.path = path

    def done(self) -> None:
        """The entry is stored: the lock file is no longer needed."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


@contextlib.contextmanager
def _building(key: str):
    path = cache_dir() / f".{key}.lock"
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except (ImportError, OSError):
        yield _Lock(None)
        return
    try:
        deadline, pause, held = time.monotonic() + LOCK_WAIT_S, 0.005, None
        while held is None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = path
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(pause)
                pause = min(pause * 2, 0.2)
        yield _Lock(held)
    finally:
        os.close(fd)  # releases the lock
