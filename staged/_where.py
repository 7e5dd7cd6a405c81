"""Where in the user's code an error happened: ``file:line`` of the innermost frame outside
the staged package (docs/errors.md). A leaf module (standard library and ``_torch_function`` only),
so every layer can name the user's line in its messages."""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings
from typing import TYPE_CHECKING

from . import _torch_function as _tf

if TYPE_CHECKING:
    from types import FrameType

STAGED_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # staged's own files
_SKIP = (STAGED_DIR, os.path.dirname(os.__file__) + os.sep)  # staged, the standard library


@functools.lru_cache(maxsize=4096)
def _internal(filename: str) -> bool:
    """Whether code from ``filename`` is staged's or the standard library's (asked for every
    frame of every traced op: cached per file)."""
    return os.path.abspath(filename).startswith(_SKIP)


def user_site() -> str:
    """``file:line`` of the innermost frame outside staged and the standard library (its
    path relative to the working directory when it lies below it), or ""."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and _internal(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return ""
    return f"{_shown(f.f_code.co_filename, os.getcwd())}:{f.f_lineno}"


@functools.lru_cache(maxsize=4096)
def _shown(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it lies below it (cached: a trace asks per op),
    remembered in ``_SHOWN``."""
    rel = os.path.relpath(path, cwd) if os.path.isabs(path) else path
    name = path if rel.startswith("..") else rel
    _SHOWN.add(name)
    return name


# Note [An error is sited once]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# An error may pass several sites on its way out: the op that raised it siting it, then
# nn.functional's wrapper, then the Module call around that, each calling ``at_user``. The
# first (innermost) site wins, so each later one must recognise a message that already
# starts with a site. Matching a site by its look (``\S+\.py:\d+: ``) missed every user
# file that is not a ``name.py`` without spaces: ``<string>`` (``python -c``, ``exec``),
# ``<stdin>``, an extensionless script, a path with a space; their errors carried the
# prefix twice. A site is recognised instead by its file being one ``user_site`` has named.
_SHOWN: set[str] = set()
_SITE = re.compile(r"(.*?):\d+: ")


def _sited_already(message: str) -> bool:
    """Whether ``message`` starts with a ``file:line: `` that ``user_site`` produced."""
    m = _SITE.match(message)
    return m is not None and m[1] in _SHOWN


def warn_user(message, category=UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the user's line: the innermost
    frame outside staged and the standard library, however many wrappers (autocast's,
    ``sited``'s) lie between it and the caller."""
    level = 2
    f: FrameType | None = sys._getframe(1)
    while f is not None and _internal(f.f_code.co_filename):
        f = f.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level if f is not None else 2)


# what torch warns once a process (TORCH_WARN_ONCE) and has warned; ``set_warn_always``
# (staged/_utilities.py) sets ``warn_always``: then every time, as torch's
_WARNED_ONCE: set[str] = set()
warn_always = False


def warn_once(message: str, category=UserWarning) -> None:
    """``warn_user`` the first time this process gives ``message`` (every time under
    ``set_warn_always(True)``), as torch's ``TORCH_WARN_ONCE``."""
    if warn_always or message not in _WARNED_ONCE:
        _WARNED_ONCE.add(message)
        warn_user(message, category)


def at_user(message: str) -> str:
    """``message`` prefixed with the user's ``file:line`` (unchanged where none is found or
    the message already names one: the innermost user line, a Module's ``forward`` within
    the Module call, say)."""
    if _sited_already(message):
        return message  # Note [An error is sited once]
    site = user_site()
    return f"{site}: {message}" if site else message


# exceptions whose message is their one string argument (custom ones build their own)
PLAIN = (RuntimeError, ValueError, IndexError, TypeError, NotImplementedError)


def sited(fn, retry=None, moded=True):
    """``fn``, whose plain errors name the user's ``file:line``: the message is prefixed in
    place, so the exception keeps its type and traceback (the public ops, ``nn.functional``
    and ``Module`` calls go through it; an error already naming the site is left alone).
    ``retry(args, kwargs)``: the arguments to call again with after a TypeError (torch's
    keyword names for staged's), or None; it costs the calls that succeed nothing.
    ``moded``: a public function, whose calls the torch function protocol hands to modes
    and to arguments that take part (``_torch_function``)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if moded and _tf.entered[0]:
            out = _tf.dispatch(call, args, kwargs, True)
            if out is not _tf.NOT_HANDLED:
                return out
        try:
            return fn(*args, **kwargs)
        except PLAIN as e:
            fixed = again(e, args, kwargs, retry, moded)
            if fixed is None:
                name_site(e)
                raise
        if fixed is OVERRIDDEN:
            return _tf.overridden(call, args, kwargs)
        return call(*fixed[0], **fixed[1])

    call.sited = True  # type: ignore[attr-defined]
    return call


OVERRIDDEN = ("overridden",)  # ``again``'s answer when an argument's class takes the call


def again(e: BaseException, args, kwargs, retry, moded):
    """What a sited call does after its function raised the plain error ``e``: None (the
    error stands), ``OVERRIDDEN`` (an argument whose class defines ``__torch_function__``
    takes the call: classes that are not Tensor subclasses are found only here, Note [the
    torch function protocol]) or the ``(args, kwargs)`` to call it again with (``retry``'s:
    torch's keyword names for staged's)."""
    if type(e) is not TypeError:
        return None
    if moded and _tf.enabled() and _tf.overloaded(args, kwargs):
        return OVERRIDDEN
    return retry(args, kwargs) if retry is not None else None


def name_site(e: BaseException) -> None:
    """Prefix ``e``'s message with the user's ``file:line`` where it is a plain one."""
    if type(e) in PLAIN and len(e.args) == 1 and isinstance(e.args[0], str):
        e.args = (at_user(e.args[0]),)
