"""torch's ``__torch_function__`` protocol: the function modes (``TorchFunctionMode``)
entered on each thread, and the arguments whose types define ``__torch_function__``
(Tensor subclasses, and other classes as torch's docs' ``ScalarTensor``), which a call of a
public function, or of a method of such a subclass, is handed to. A leaf module (standard
library only): the public functions' wrappers (``_where.sited``, autocast's) ask it on
every call, at the cost of one list lookup while no thread has a mode and no class that
takes part has been defined.

Note [the torch function protocol]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
As torch's ``handle_torch_function``: the innermost mode first (off while it runs, so its
own calls reach the modes below it); else the overriding arguments, subclasses before
their superclasses and otherwise left to right, each asked in turn until one returns
something other than ``NotImplemented``. A Tensor subclass takes part unless its
``__torch_function__`` is ``_disabled_torch_function_impl`` (``nn.Parameter``'s);
Tensor's own default runs the function with subclasses off and makes its tensor results
instances of the subclass (``staged/eager/subclasses.py``). Plain tensors never pay:
subclasses get the protocol through wrappers installed on the subclass, and the public
functions look at their arguments only once such a class exists (``entered``). A class that
is not a Tensor subclass is looked for when a public function refuses an argument with a
TypeError, so it costs the calls that succeed nothing."""

from __future__ import annotations

import sys
import threading


class _State(threading.local):
    def __init__(self) -> None:
        self.modes: list = []
        self.subclasses_off = 0  # DisableTorchFunctionSubclass depth
        self.all_off = 0  # DisableTorchFunction depth: modes too


_state = _State()
# modes entered on any thread plus the classes defined that take part: calls look at their
# own thread's modes and their arguments only while it is nonzero
entered = [0]
modes_entered = [0]  # of which modes
_count = threading.Lock()
NOT_HANDLED = object()  # what ``dispatch`` returns when the function is to run itself


def _disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """What a Tensor subclass sets as ``__torch_function__`` to opt out of the protocol
    (``nn.Parameter`` does): its instances are plain tensors to every function."""
    return func(*args, **(kwargs or {}))


# --- modes --------------------------------------------------------------------------------
def push(mode) -> None:
    """Make ``mode`` this thread's innermost mode."""
    _state.modes.append(mode)
    with _count:
        entered[0] += 1
        modes_entered[0] += 1


def pop(mode) -> None:
    """Leave ``mode``, which must be this thread's innermost."""
    modes = _state.modes
    if not modes or modes[-1] is not mode:
        raise RuntimeError(
            f"exiting {type(mode).__name__}, which is not the innermost TorchFunctionMode "
            "of this thread: modes must be exited in the reverse order of entering them"
        )
    modes.pop()
    with _count:
        entered[0] -= 1
        modes_entered[0] -= 1


def current():
    """This thread's innermost mode, or None."""
    return _state.modes[-1] if _state.modes else None


def take_part(cls) -> None:
    """Note that ``cls``, a class taking part in the protocol, now exists: from here on
    the public functions look at their arguments."""
    with _count:
        entered[0] += 1


# --- the overriding arguments -------------------------------------------------------------
# type -> whether its instances take part: True or False, or SEQUENCE for lists and tuples
# (whose members are looked at); the public ops read it inline, a type not False sending
# them to ``dispatch``
SEQUENCE = "sequence"
KIND: dict = {list: SEQUENCE, tuple: SEQUENCE}
for _t in (int, float, bool, complex, str, type(None), slice, type(...)):
    KIND[_t] = False


def _own(c) -> bool:
    """Whether class ``c`` is staged's, torch's (a real torch tensor given to staged is data
    to read) or ``object``."""
    return c.__module__.split(".", 1)[0] in ("staged", "torch") or c is object


def takes_part(t) -> bool:
    """Whether arguments of type ``t`` take part: in this protocol (``functions``) or in
    ``__torch_dispatch__``'s (``dispatches``)."""
    k = KIND.get(t)
    if k is None:
        k = KIND[t] = functions(t) or dispatches(t)
    return k is True


_FUNCTIONS: dict = {}  # type -> whether ``functions``
_DISPATCHES: dict = {}  # type -> whether ``dispatches``


def functions(t) -> bool:
    """Whether ``t`` defines ``__torch_function__``, not as ``_disabled_torch_function_impl``,
    and is a user's class (not the plain Tensor or staged's internal subclasses, which
    torch does not have, such as ``nn.Parameter``'s; not real torch tensors)."""
    k = _FUNCTIONS.get(t)
    if k is None:
        k = _FUNCTIONS[t] = _defines(t, "__torch_function__", _disabled_torch_function_impl)
    return k


def _disabled_torch_dispatch_impl(func, types, args=(), kwargs=None):
    """Tensor's own ``__torch_dispatch__``: a class that keeps it does not take part."""
    return NotImplemented


def dispatches(t) -> bool:
    """Whether ``t`` is a user's Tensor subclass defining ``__torch_dispatch__`` (Note [torch
    dispatch] in ``staged/_torch_dispatch.py``)."""
    k = _DISPATCHES.get(t)
    if k is None:
        k = _DISPATCHES[t] = _defines(t, "__torch_dispatch__", _disabled_torch_dispatch_impl)
    return k


def _defines(t, name: str, disabled) -> bool:
    """Whether the user's class ``t`` defines the method ``name`` other than as ``disabled``."""
    f = getattr(t, name, None)
    return (
        f is not None
        and getattr(f, "__func__", f) is not disabled
        and not all(_own(c) for c in t.__mro__)
    )


def _add(found: list, a) -> None:
    """Put ``a`` among ``found`` as torch orders them: a type once, before the first
    argument of a superclass of it."""
    t = type(a)
    for i, b in enumerate(found):
        if type(b) is t:
            return
        if issubclass(t, type(b)):
            found.insert(i, a)
            return
    found.append(a)


def overloaded(args, kwargs=None, part=functions) -> list:
    """The arguments (and the members of list and tuple arguments) whose types take part
    (``part``: in this protocol, or ``dispatches``), in the order they are asked."""
    found: list = []
    for a in (*args, *kwargs.values()) if kwargs else args:
        t = type(a)
        if t is list or t is tuple:
            for b in a:
                if takes_part(type(b)) and part(type(b)):
                    _add(found, b)
        elif takes_part(t) and part(t):
            _add(found, a)
    return found


def run(func, found: list, args, kwargs):
    """``func(*args, **kwargs)`` as the ``__torch_function__`` of the arguments ``found``
    runs it: the first result that is not ``NotImplemented``."""
    types = tuple(type(a) for a in found)
    for a in found:
        out = a.__torch_function__(func, types, args, kwargs or {})
        if out is not NotImplemented:
            return out
    name = getattr(func, "__qualname__", None) or repr(func)
    raise TypeError(
        f"Multiple dispatch failed for '{name}'; all __torch_function__ handlers returned "
        f"NotImplemented: {[t.__qualname__ for t in types]}"
    )


def dispatch(func, args, kwargs, named=False):
    """``func(*args, **kwargs)`` as the protocol has it run (Note [the torch function
    protocol]), or ``NOT_HANDLED`` when neither a mode nor an argument takes it: then the
    caller runs the function itself. ``named``: ``func`` is handed over as the public
    function it serves (``public``); a Tensor method is handed over as itself."""
    if not modes_entered[0]:  # the common case first: no argument of a type that takes part
        kind = KIND
        for a in args:
            if kind.get(type(a)) is not False:
                break
        else:
            if not kwargs:
                return NOT_HANDLED
    state = _state
    if not state.all_off and (state.modes or not state.subclasses_off):
        found = overloaded(args, kwargs)
        if found or state.modes:
            return handle(public(func) if named else func, found, args, kwargs)
    if DISPATCH:  # below this protocol, as torch's dispatcher is
        wrappers = overloaded(args, kwargs, dispatches)
        if wrappers:
            return DISPATCH[0](public(func) if named else func, wrappers, args, kwargs)
    return NOT_HANDLED


# ``__torch_dispatch__``'s handler, ``(func, arguments, args, kwargs) -> result`` or
# NOT_HANDLED (``staged/_torch_dispatch.py`` puts it in)
DISPATCH: list = []


def handle(func, found: list, args, kwargs):
    """``func(*args, **kwargs)`` handed to this thread's innermost mode (off while it runs),
    else to the arguments ``found`` (``run``): torch's ``handle_torch_function``."""
    modes = _state.modes
    if modes and not _state.all_off:
        mode = modes.pop()
        try:
            types = tuple(type(a) for a in found)
            return mode.__torch_function__(func, types, args, kwargs or {})
        finally:
            modes.append(mode)
    return run(func, found, args, kwargs)


def overridden(func, args, kwargs):
    """``func(*args, **kwargs)`` as its arguments that take part run it: a public function
    that refused them with a TypeError (``_where.again``)."""
    return run(public(func), overloaded(args, kwargs), args, kwargs)


class DisableTorchFunctionSubclass:
    """``torch._C.DisableTorchFunctionSubclass``: within it, arguments' ``__torch_function__``
    is not called (modes still are); what a subclass's ``__torch_function__`` runs the
    function in."""

    def __enter__(self):
        _state.subclasses_off += 1
        return self

    def __exit__(self, *exc) -> None:
        _state.subclasses_off -= 1


class DisableTorchFunction:
    """``torch._C.DisableTorchFunction``: within it, neither modes nor arguments are handed
    calls."""

    def __enter__(self):
        _state.all_off += 1
        return self

    def __exit__(self, *exc) -> None:
        _state.all_off -= 1


def enabled() -> bool:
    """``torch._C._is_torch_function_enabled()``: whether arguments are handed calls here."""
    return not (_state.all_off or _state.subclasses_off)


# --- the public name of a function --------------------------------------------------------
# the namespaces whose functions the protocol hands over, as the public objects found there:
# a call is handed over by the innermost wrapper that asks (``_where.sited``), inside others
# (``out=``, autocast), so that wrapper is mapped to the public function around it
NAMESPACES = (
    "staged",
    "staged.nn.functional",
    "staged.linalg",
    "staged.fft",
    "staged.special",
    "staged.sparse",
    "staged.signal.windows",
)
_public: dict = {}  # a wrapper inside a public function -> that function
_indexed: list = [()]  # the namespaces loaded when _public was built


def public(func):
    """The public function ``func`` is (a wrapper of), as users name it."""
    loaded = tuple(n for n in NAMESPACES if n in sys.modules)
    if loaded != _indexed[0]:
        for name in loaded:
            for obj in list(vars(sys.modules[name]).values()):
                inner = getattr(obj, "__wrapped__", None) if callable(obj) else None
                while inner is not None:
                    _public.setdefault(inner, obj)
                    inner = getattr(inner, "__wrapped__", None)
        _indexed[0] = loaded
    return _public.get(func, func)
