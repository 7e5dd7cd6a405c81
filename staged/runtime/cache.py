"""On-disk cache of compiled modules: ``$STAGED_CACHE_DIR`` or ``~/.cache/staged``.

An entry is ``MAGIC + sha256(payload) + payload``, written atomically (temp file, then
``os.replace``); an entry that is truncated or corrupted reads as a miss and is rebuilt.
A directory that cannot be written is replaced, with one warning, by one under the
system's temporary directory (else every run would recompile everything).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
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
    """``load(key)``, or ``build()`` stored under ``key``."""
    payload = load(key)
    if payload is None:
        payload = build()
        store(key, payload)
    return payload
