"""Callables by reference, never by pickle.

The caller sends a callable's name, never its code: ``"MODULE:QUALNAME"``
(``"__main__:my_script_add"``, ``"torch:add"``). The callee finds the
object of that name and runs it only if it is allowed there:

1. a function registered with ferry (``ferry.register``): called by its
   registered name, without a reference;
2. a function, class (its constructor) or TorchScript function *defined* in
   the callee's ``__main__`` -- the program every worker runs, torch RPC's
   usual case. The object found there must say it was defined there
   (``__module__ == "__main__"`` and that ``__qualname__``; a TorchScript
   function's ``qualified_name``): a name merely imported into
   ``__main__`` (``from os import system``) is not;
3. the same in a module the callee allowed (``allow_module(mod)``, or
   ``allow=[...]`` in the backend options);
4. a fixed allowlist of pure torch tensor builtins (``TORCH_BUILTINS``),
   run in the callee's torch, and of pure Python builtins
   (``PYTHON_BUILTINS``: min, max, sum, ...).

A function or class passed as an argument (at the top level of ``args``
or ``kwargs``) travels the same way and is resolved under the same rules.

Nested names walk classes only (``Class.method``); names with ``<locals>``
or ``<lambda>`` (code that exists only in the caller's memory) and dunder
attributes are refused. Anything else is refused with ``PermissionError``
naming the function and how to allow it.
"""

from __future__ import annotations

import builtins
import importlib
import sys
import threading
import types
from typing import Any, Callable

__all__ = ["FUNCTION_KEY", "PYTHON_BUILTINS", "TORCH_BUILTINS",
           "allow_module", "allowed_modules", "class_allowed",
           "decode_callables", "encode_callable_kwargs", "encode_callables",
           "reference", "resolve"]

# Pure tensor functions of torch: they compute tensors from tensors and
# numbers, and touch no file, process, module or interpreter state. (Not
# torch.empty: its bytes are whatever the callee's memory held.)
TORCH_BUILTINS = frozenset("""
abs absolute acos add addcdiv addcmul addmm addmv all allclose amax amin
any arange argmax argmin argsort asin atan atan2 baddbmm bernoulli bmm
broadcast_tensors cat ceil chunk clamp clamp_max clamp_min clip clone
cos cosh cross cumprod cumsum diag diagonal div divide dot einsum eq
equal erf exp expm1 eye flatten flip floor floor_divide fmod full
full_like gather ge gt hstack index_select isclose isfinite isinf isnan
kron le lerp linspace log log10 log1p log2 log_softmax logical_and
logical_not logical_or logical_xor logsumexp lt masked_fill
masked_select matmul max maximum mean median min minimum mm mul multiply
mv nan_to_num narrow ne neg negative nonzero norm normal numel ones
ones_like outer permute pow prod rand rand_like randint randn randn_like
randperm reciprocal relu remainder repeat_interleave reshape roll round
rsqrt select sigmoid sign sin sinh softmax sort split sqrt square
squeeze stack std sub subtract sum t take tanh tensor tensordot tile
topk transpose tril triu true_divide trunc unbind unique unsqueeze var
vstack where zeros zeros_like
""".split())

# Pure functions of Python's builtins (torch's tests call min and max by
# reference): they compute from their arguments, which are values.
PYTHON_BUILTINS = frozenset("abs all any len max min sorted sum".split())

_lock = threading.Lock()
# Module names whose own functions and classes callers may run here.
_allowed: set[str] = set()
# The caller's side: callable -> reference (computed once per callable).
_references: dict[Any, str] = {}
# The callee's side: reference -> callable (allowed ones only).
_resolved: dict[str, Callable[..., Any]] = {}


def allow_module(module: types.ModuleType | str) -> None:
    """Lets callers run the functions and classes *defined in* ``module``
    (a module or its name) on this worker."""
    name = module if isinstance(module, str) else module.__name__
    if not name or name == "__main__":
        return  # __main__ is allowed already.
    with _lock:
        _allowed.add(name)


def allowed_modules() -> list[str]:
    """The modules allowed here besides ``__main__``, sorted."""
    with _lock:
        return sorted(_allowed)


def _main_names() -> tuple[str, ...]:
    """What the program's own module is called: "__main__", and
    "__mp_main__" in a process multiprocessing spawned (which imports the
    program under that name)."""
    main = sys.modules.get("__main__")
    name = getattr(main, "__name__", "__main__")
    return ("__main__", name) if name != "__main__" else ("__main__",)


def _module_of(obj: Any) -> Any:
    """``obj.__module__``, the program's own module called "__main__"."""
    module = getattr(obj, "__module__", None)
    return "__main__" if module in _main_names() else module


def _torch() -> types.ModuleType | None:
    return sys.modules.get("torch")


_script_type: type | None = None  # torch.jit.ScriptFunction, once seen.


def _script_function_type() -> type | None:
    global _script_type
    if _script_type is None:
        torch = _torch()
        jit = getattr(torch, "jit", None) if torch is not None else None
        _script_type = getattr(jit, "ScriptFunction", None)
    return _script_type


def _async_script_wrapped(obj: Any) -> Any:
    """The TorchScript function ``obj`` is torch's async_execution wrapper
    of, which gave the wrapper no name of its own (torch 1.13: its
    "<locals>" one; 2.x's functools.wraps copies ScriptFunction's class
    name, "torch.jit.ScriptFunction"); None for anything else."""
    wrapped = getattr(obj, "_wrapped_async_rpc_function", None)
    if not isinstance(obj, types.FunctionType) or wrapped is None or \
            wrapped is obj:
        return None
    script = _script_function_type()
    if "<" in obj.__qualname__ or (script is not None
                                   and isinstance(wrapped, script)):
        return wrapped
    return None


_BASE_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType,
                        types.MethodType, type)
_function_types: tuple[type, ...] | None = None


def function_types() -> tuple[type, ...]:
    """What travels by reference as an argument: functions, builtins,
    methods, classes, TorchScript functions (once torch is imported)."""
    global _function_types
    if _function_types is None:
        script = _script_function_type()
        if script is None:
            return _BASE_FUNCTION_TYPES
        _function_types = _BASE_FUNCTION_TYPES + (script,)
    return _function_types


def _refused_on_caller(func: Any, why: str) -> PermissionError:
    return PermissionError(
        f"{func!r}: {why}; ferry.rpc sends a function's name, never its "
        "code: call a function defined at the top level of the program "
        "(or of a module the callee allows), registered with ferry, or a "
        "torch builtin")


def reference(func: Any) -> str:
    """The reference ``"MODULE:QUALNAME"`` the callee resolves ``func``
    by. PermissionError for what has no name a callee could find (a
    lambda, a locally defined function, a bound method of an object)."""
    try:
        return _references[func]
    except (KeyError, TypeError):  # TypeError: unhashable.
        pass
    ref = _compute_reference(func)
    try:
        _references[func] = ref
    except TypeError:
        pass
    return ref


def _compute_reference(func: Any) -> str:
    name = getattr(func, "__name__", None)
    if name in PYTHON_BUILTINS and getattr(builtins, name) is func:
        return f"builtins:{name}"
    # torch's async_execution around a TorchScript function: the module's
    # name is the wrapper's, which the callee finds by the wrapped name.
    wrapped = _async_script_wrapped(func)
    if wrapped is not None:
        return reference(wrapped)
    torch = _torch()
    if torch is not None:
        name = getattr(func, "__name__", None)
        if (name in TORCH_BUILTINS
                and getattr(torch, name, None) is func):
            return f"torch:{name}"
    script = _script_function_type()
    if script is not None and isinstance(func, script):
        qualified = getattr(func, "qualified_name", "")
        prefix = "__torch__."
        if not qualified.startswith(prefix):
            raise _refused_on_caller(func, "a TorchScript function without "
                                     "a module-level name")
        module, _, name = qualified[len(prefix):].rpartition(".")
        if not module or module in _main_names():
            module = "__main__"
        return f"{module}:{name}"
    if isinstance(func, types.MethodType) and not isinstance(
            func.__self__, type):
        raise _refused_on_caller(
            func, f"a method bound to a {type(func.__self__).__name__} "
            "object (sending it would pickle the object); use an RRef to "
            "the object and rref.rpc_sync().method(...)")
    module = _module_of(func)
    qualname = getattr(func, "__qualname__", None)
    if not callable(func) or not isinstance(module, str) or not isinstance(
            qualname, str):
        raise _refused_on_caller(func, "not a function or class with a name")
    if "<" in qualname:
        raise _refused_on_caller(
            func, "a lambda or a function defined inside another function "
            "exists only in the caller's memory")
    return f"{module}:{qualname}"


# ---- The callee's side ----

def _permission(ref: str, why: str) -> PermissionError:
    module = ref.partition(":")[0]
    return PermissionError(
        f"{ref} is not allowed here ({why}); this worker runs functions "
        "registered with ferry, functions and classes defined in its "
        "__main__, those of modules it allows (ferry.rpc.allow_module("
        f"{module!r}) or allow=[...] in the backend options) and torch "
        "builtins (ferry.rpc.TORCH_BUILTINS)")


def _defined_as(obj: Any, module: str, qualname: str) -> bool:
    """Whether ``obj`` says it was defined as ``module``.``qualname``."""
    return (_module_of(obj) == module
            and getattr(obj, "__qualname__", None) == qualname)


def _allowed_object(obj: Any, module: str, qualname: str) -> bool:
    wrapped = _async_script_wrapped(obj)
    if wrapped is not None:
        return _allowed_object(wrapped, module, qualname)
    if isinstance(obj, (types.FunctionType, type)):
        return _defined_as(obj, module, qualname)
    if isinstance(obj, types.MethodType):
        # A classmethod, reached through its (allowed) class.
        return isinstance(obj.__self__, type) and _defined_as(
            obj.__func__, module, qualname)
    script = _script_function_type()
    if script is not None and isinstance(obj, script):
        names = _main_names() if module == "__main__" else (module,)
        expected = {f"__torch__.{m}.{qualname}" for m in names}
        if module == "__main__":
            expected.add(f"__torch__.{qualname}")
        return getattr(obj, "qualified_name", None) in expected
    return False


def _find(ref: str) -> Any:
    module, sep, qualname = ref.partition(":")
    if not sep or not module or not qualname:
        raise _permission(ref, "not a reference MODULE:QUALNAME")
    if module == "torch":
        torch = _torch()
        if qualname in TORCH_BUILTINS and torch is not None:
            return getattr(torch, qualname)
    if module == "builtins" and qualname in PYTHON_BUILTINS:
        return getattr(builtins, qualname)
    with _lock:
        allowed = module == "__main__" or module in _allowed
    if not allowed:
        raise _permission(ref, f"module {module} is not allowed")
    parts = qualname.split(".")
    if any(not p.isidentifier() or p.startswith("__") for p in parts):
        raise _permission(ref, "not a name defined at a module's top level "
                          "or in its classes")
    mod = sys.modules.get(module)
    if mod is None:
        if module == "__main__":
            raise _permission(ref, "no __main__")
        mod = importlib.import_module(module)  # Allowed: it may be imported.
    obj: Any = mod
    for i, part in enumerate(parts):
        # Past the first name, only a class defined there is walked into.
        if i > 0 and not (isinstance(obj, type)
                          and _module_of(obj) == module):
            raise _permission(ref, f"{'.'.join(parts[:i])} is not a class "
                              f"defined in {module}")
        obj = getattr(obj, part, None)
        if obj is None:
            raise _permission(ref, f"{module} has no {'.'.join(parts[:i + 1])}")
    if not _allowed_object(obj, module, qualname):
        raise _permission(ref, f"the {type(obj).__name__} named so in "
                          f"{module} was not defined there")
    return obj


def resolve(ref: str) -> Callable[..., Any]:
    """The callable ``ref`` names, if allowed here; else PermissionError
    (nothing is run, and an allowed module is at most imported)."""
    fn = _resolved.get(ref)
    if fn is None:
        fn = _find(ref)
        _resolved[ref] = fn
    return fn


# A callable passed as an argument (torch programs pass methods to a
# helper that calls them on the owner: _call_method(method, rref, ...)):
# it travels as {FUNCTION_KEY: reference}, resolved by the callee under the
# rules above.
FUNCTION_KEY = "ferry.rpc.function"


def encode_callables(items: tuple[Any, ...]) -> tuple[Any, ...]:
    """``items`` (a call's arguments) with each function or class among
    them -- at the top level -- as its reference (PermissionError for one
    that has none: a lambda, a local function)."""
    kinds = function_types()
    out: list[Any] | None = None
    for i, item in enumerate(items):
        if isinstance(item, kinds):
            if out is None:
                out = list(items)
            out[i] = {FUNCTION_KEY: reference(item)}
    return items if out is None else tuple(out)


def encode_callable_kwargs(kwargs: dict[str, Any] | None
                           ) -> dict[str, Any] | None:
    """The same for keyword arguments' values."""
    if not kwargs:
        return kwargs
    kinds = function_types()
    if not any(isinstance(v, kinds) for v in kwargs.values()):
        return kwargs
    return {k: {FUNCTION_KEY: reference(v)} if isinstance(v, kinds) else v
            for k, v in kwargs.items()}


def _decoded(item: Any) -> Any:
    if type(item) is dict and len(item) == 1 and FUNCTION_KEY in item:
        ref = item[FUNCTION_KEY]
        if not isinstance(ref, str):
            raise _permission(repr(ref), "not a reference MODULE:QUALNAME")
        return resolve(ref)
    return item


def decode_callables(args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The callee's side: each reference in ``args`` and ``kwargs`` (top
    level) as the callable it names, if allowed here (PermissionError
    otherwise, before anything runs)."""
    for a in args:
        if type(a) is dict:
            args = tuple(_decoded(a) for a in args)
            break
    if kwargs and any(type(v) is dict for v in kwargs.values()):
        kwargs = {k: _decoded(v) for k, v in kwargs.items()}
    return args, kwargs


def class_allowed(cls: type) -> bool:
    """Whether methods of ``cls``'s objects may be called here: the class
    is defined in ``__main__`` or an allowed module, and is the class of
    that name there."""
    module = _module_of(cls)
    qualname = getattr(cls, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return False
    torch = _torch()
    if torch is not None and issubclass(cls, torch.Tensor):
        # Tensors' methods compute tensors; their arguments are values, so
        # none takes code (hooks, apply_) from the caller.
        return True
    try:
        return resolve(f"{module}:{qualname}") is cls
    except PermissionError:
        return False
