"""On-disk cache of compiled modules: ``$STAGED_CACHE_DIR`` or ``~/.cache/staged``.

An entry is ``MAGIC + sha256(payload) + payload``, written atomically (temp file, then
``os.replace``); an entry that is truncated or corrupted reads as a miss and is rebuilt.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

MAGIC = b"STAGED1\n"
_HEAD = len(MAGIC) + 32


def cache_dir() -> Path:
    return Path(os.environ.get("STAGED_CACHE_DIR") or Path.home() / ".cache" / "staged")


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
    if data[:len(MAGIC)] != MAGIC or hashlib.sha256(payload).digest() != data[len(MAGIC):_HEAD]:
        return None
    return payload


def store(key: str, payload: bytes) -> None:
    """Write an entry atomically; a cache that cannot be written is skipped silently."""
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, d / key)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def cached(key: str, build) -> bytes:
    """``load(key)``, or ``build()`` stored under ``key``."""
    payload = load(key)
    if payload is None:
        payload = build()
        store(key, payload)
    return payload
