"""Shared memory for ``share_memory_``: tensors whose writes other processes see, whichever
way those processes start (Note [shared memory]).

Note [shared memory]: ``share_memory_`` moved a tensor into an anonymous shared mapping,
which only processes forked afterwards could see: a tensor sent to a process started by
``spawn`` or ``forkserver`` (the default start methods of macOS and Windows, and of
Linux from Python 3.14; many programs set ``spawn``) was pickled as its values, so the
child trained a copy and its updates were lost, silently. Now the mapping is of a file with no name (Linux's
``memfd_create``, elsewhere a deleted temporary file) whose descriptor the mapping keeps,
and ``multiprocessing``'s pickler (``ForkingPickler``: a process's arguments, a queue's
items) sends a tensor as torch's ``reduce_tensor`` does: moved into shared memory first
(``_sent`` in ops/metadata.py), then as that descriptor (``DupFd``) and where in the file
it lies; the other process maps the same pages (torch's ``file_descriptor`` strategy, with
its rule: the sender lives until the tensor is received). Small tensors share a file of
``_CHUNK`` bytes, so a model's parameters hold a few descriptors, not one each (a process
may open 1024); a forked child starts a chunk of its own, since the parent's is shared.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import weakref
from multiprocessing import context, reduction

import numpy as np

from .._locks import fork_safe

_CHUNK = 1 << 22  # bytes of a file that small tensors share
_ALIGN = 64


class Pages(mmap.mmap):
    """A shared mapping of a whole file with no name, its descriptor (``fd``) kept open
    while the mapping lives, for other processes to map."""

    fd: int
    address: int


# the pages of each file mapped here (made or received), by the file's identity: a file
# is mapped once, however many tensors lie in it and descriptors of it arrive (a queue
# sends one per tensor; a tensor sent back comes to the pages it left)
_mappings: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _mapped(fd: int, size: int) -> Pages:
    """The pages of the file ``fd`` is open on: mapped before (``fd`` then closed, unless
    the mapping's own), or now, keeping ``fd`` open while they live."""
    st = os.fstat(fd)
    pages = _mappings.get((st.st_dev, st.st_ino))
    if pages is not None:
        if pages.fd != fd:  # (a started process gets one number for each file)
            os.close(fd)
        return pages
    pages = _mappings[st.st_dev, st.st_ino] = Pages(fd, size)
    pages.fd = fd
    pages.address = np.frombuffer(pages, np.uint8).__array_interface__["data"][0]
    weakref.finalize(pages, os.close, fd)
    return pages


def _new_pages(size: int) -> Pages:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("staged-shared-memory", os.MFD_CLOEXEC)
    else:
        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
    os.ftruncate(fd, size)
    return _mapped(fd, size)


_lock = fork_safe()
_current: list = [None, 0]  # the chunk small tensors go into, and its first free byte


def _after_fork_in_child() -> None:
    """A forked child allocates in chunks of its own: the parent's current chunk is
    shared, and both allocating its free bytes would give two tensors the same entries."""
    _current[:] = None, 0


os.register_at_fork(after_in_child=_after_fork_in_child)


def allocate(nbytes: int, dtype: np.dtype, shape) -> np.ndarray:
    """A new array of ``shape`` in shared memory: in a chunk shared with other small
    arrays, or in pages of its own."""
    nbytes = max(nbytes, 1)
    if nbytes > _CHUNK // 4:
        pages, offset = _new_pages(nbytes), 0
    else:
        with _lock:
            pages, offset = _current
            if pages is None or offset + nbytes > _CHUNK:
                pages, offset = _new_pages(_CHUNK), 0
            _current[:] = pages, -(-(offset + nbytes) // _ALIGN) * _ALIGN
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(pages, dtype, count, offset).reshape(shape)


def pages_of(p: np.ndarray) -> Pages | None:
    """The shared pages array ``p`` lies in, if any."""
    while type(p.base) is np.ndarray:
        p = p.base
    pages = getattr(p.base, "obj", None)
    return pages if type(pages) is Pages else None


class _ByDescriptor:
    """A contiguous array in shared pages, pickled for another process as the pages'
    descriptor and where in them it lies."""

    def __init__(self, a: np.ndarray, pages: Pages):
        self.a, self.pages = a, pages

    def __reduce__(self):
        a = self.a
        offset = a.__array_interface__["data"][0] - self.pages.address
        return (_attach, (_dup(self.pages.fd), len(self.pages), offset, a.dtype, a.shape))


# the descriptors a process being started is given: each once (it refuses a descriptor
# given twice), however many tensors lie in its pages
_given: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _dup(fd: int):
    popen = context.get_spawning_popen()
    if popen is None:  # a queue's item: each descriptor sent on its own
        return reduction.DupFd(fd)
    given = _given.setdefault(popen, {})
    if fd not in given:
        given[fd] = reduction.DupFd(fd)
    return given[fd]


def _attach(dup, size, offset, dtype, shape) -> np.ndarray:
    pages = _mapped(dup.detach(), size)
    return np.frombuffer(pages, dtype, int(np.prod(shape, dtype=np.int64)), offset).reshape(shape)


def by_descriptor(args: tuple) -> tuple:
    """A tensor's pickled arguments, with its storage sent as its pages' descriptor where
    it lies in shared pages."""
    sent = []
    for a in args:
        if isinstance(a, np.ndarray) and a.flags.c_contiguous:
            pages = pages_of(a)
            if pages is not None:
                a = _ByDescriptor(a, pages)
        sent.append(a)
    return tuple(sent)
