"""The package as built: its version (ferryd's and ferryctl's too), the
typed package's files, and the extension's stub (ferry/_ferry.pyi) against
the extension itself -- every name, parameter and property the C++ bindings
export, read from pybind11's signatures. (mypy_test checks the types
themselves.)"""

import ast
import os
import re
import subprocess
import tomllib
import types

import pytest

import ferry
from ferry import _errors, _ferry, _version

PACKAGE = os.path.dirname(ferry.__file__)
STUB = os.path.join(PACKAGE, "_ferry.pyi")
# Stub-only names: a shared base and a namespace class that type what the
# extension has no class for (see _ferry.pyi).
STUB_ONLY = {"_Calls", "_Bench"}


def test_version_has_one_source():
    assert ferry.__version__ == _version.__version__
    assert re.fullmatch(r"\d+(\.\d+)+", ferry.__version__)
    with open(os.path.join(PACKAGE, "..", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "ferry._version.__version__"}
    assert set(project["tool"]["setuptools"]["package-data"]["ferry"]) == {
        "_ferry.so", "_ferry.pyi", "py.typed"}


@pytest.mark.parametrize("binary", ["ferryd", "ferryctl"])
def test_commands_print_the_package_version(binary, request):
    # ferryd and ferryctl read it at build time from ferry/_version.py.
    path = request.getfixturevalue(binary)
    r = subprocess.run([path, "--version"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{binary} {ferry.__version__}\n"


def test_typed_package_files_are_beside_the_extension():
    for name in ("_ferry.so", "_ferry.pyi", "py.typed"):
        assert os.path.isfile(os.path.join(PACKAGE, name)), name


def test_errors_all_names_every_error_class():
    assert _errors.__all__ == ["Error"] + [
        cls.__name__ for cls in _errors.BY_CODE.values()]
    for name in _errors.__all__:
        assert getattr(ferry, name) is getattr(_errors, name)


# ---- the stub against the extension ----

def _split_top_level(text):
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:])
    return [p.strip() for p in parts]


def _runtime_signatures(obj, name):
    """[(params, returns_none)] of a pybind11 function or method, from its
    docstring's signature lines (one per overload); params are (name, has a
    default), without self."""
    out = []
    for line in (obj.__doc__ or "").splitlines():
        m = re.fullmatch(r"(?:\d+\. )?" + re.escape(name) +
                         r"\((.*)\) -> (.+)", line.strip())
        if not m or m.group(1) == "*args, **kwargs":
            continue
        params = []
        for p in _split_top_level(m.group(1)):
            pname = p.split(":")[0].split("=")[0].strip()
            if pname != "self":
                params.append((pname, "=" in p))
        out.append((params, m.group(2) == "None"))
    assert out, f"{name}: no signature in {obj.__doc__!r}"
    return out


class _StubFunction:
    def __init__(self, node, method):
        a = node.args
        positional = a.posonlyargs + a.args
        if method and not any(_decorator(d) == "staticmethod"
                              for d in node.decorator_list):
            positional = positional[1:]  # self
        defaults = [False] * (len(a.args) + len(a.posonlyargs) -
                              len(a.defaults)) + [True] * len(a.defaults)
        defaults = defaults[len(defaults) - len(positional):]
        self.params = [(p.arg, d) for p, d in zip(positional, defaults)]
        self.params += [(p.arg, d is not None)
                        for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        self.positional_only = len(a.posonlyargs) >= len(positional)
        self.returns_none = (isinstance(node.returns, ast.Constant) and
                             node.returns.value is None)


def _decorator(d):
    if isinstance(d, ast.Name):
        return d.id
    if isinstance(d, ast.Attribute):
        return d.attr
    return ""


class _StubClass:
    def __init__(self, node, classes):
        self.methods, self.static, self.properties = {}, set(), {}
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                inherited = classes[base.id]
                self.methods.update(inherited.methods)
                self.static |= inherited.static
                self.properties.update(inherited.properties)
        for item in node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            kinds = {_decorator(d) for d in item.decorator_list}
            if "property" in kinds:
                self.properties[item.name] = False
            elif "setter" in kinds:
                self.properties[item.name] = True
            else:
                self.methods.setdefault(item.name, []).append(
                    _StubFunction(item, method=True))
                if "staticmethod" in kinds:
                    self.static.add(item.name)


def _stub():
    with open(STUB) as f:
        tree = ast.parse(f.read())
    functions, classes, attributes = {}, {}, set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions.setdefault(node.name, []).append(
                _StubFunction(node, method=False))
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = _StubClass(node, classes)
        elif isinstance(node, ast.AnnAssign):
            attributes.add(node.target.id)
    return functions, classes, attributes


def _check_function(where, runtime, stub_overloads, name):
    signatures = _runtime_signatures(runtime, name)
    assert len(signatures) == len(stub_overloads), \
        f"{where}: {len(signatures)} overloads in C++, " \
        f"{len(stub_overloads)} in the stub"
    for (params, returns_none), stub in zip(signatures, stub_overloads):
        if all(re.fullmatch(r"arg\d+", p) for p, _ in params) and params:
            # Unnamed in the bindings: positional only in the stub.
            assert stub.positional_only, f"{where}: positional only"
            assert [d for _, d in params] == [d for _, d in stub.params], \
                where
        else:
            assert params == stub.params, f"{where}: C++ {params}, " \
                f"stub {stub.params}"
        assert returns_none == stub.returns_none, \
            f"{where}: returns None in C++: {returns_none}"


def _public(namespace):
    return {n for n in vars(namespace)
            if not (n.startswith("__") and n.endswith("__"))}


def test_stub_describes_every_export_of_the_extension():
    functions, classes, attributes = _stub()
    runtime = _public(_ferry)
    stub_names = (set(functions) | set(classes) | attributes) - STUB_ONLY
    assert runtime == stub_names

    for name in sorted(functions):
        _check_function(name, getattr(_ferry, name), functions[name], name)

    bench = _ferry.bench
    assert isinstance(bench, types.ModuleType)
    assert _public(bench) == set(classes["_Bench"].methods)
    for name, overloads in classes["_Bench"].methods.items():
        _check_function(f"bench.{name}", getattr(bench, name), overloads,
                        name)

    for cls_name in sorted(set(classes) - STUB_ONLY):
        cls, stub = getattr(_ferry, cls_name), classes[cls_name]
        members = _public(cls)
        # A constructor in the bindings (py::init); without one pybind11
        # leaves a slot wrapper that raises.
        if not isinstance(vars(cls).get("__init__"),
                          types.WrapperDescriptorType):
            members.add("__init__")
        assert members == set(stub.methods) | set(stub.properties), cls_name
        for name in sorted(members):
            where = f"{cls_name}.{name}"
            value = vars(cls)[name]
            if isinstance(value, property):
                assert name in stub.properties, f"{where}: a property"
                assert stub.properties[name] == (value.fset is not None), \
                    f"{where}: settable in C++: {value.fset is not None}"
                continue
            assert (name in stub.static) == isinstance(value, staticmethod), \
                f"{where}: static in C++: {isinstance(value, staticmethod)}"
            _check_function(where, getattr(cls, name), stub.methods[name],
                            name)


def test_the_stub_check_sees_a_wrong_stub(monkeypatch, tmp_path):
    """The check above fails on a stub missing a parameter."""
    with open(STUB) as f:
        text = f.read()
    wrong = text.replace("def wait_stopped(self, timeout: float)",
                         "def wait_stopped(self)")
    assert wrong != text
    path = tmp_path / "_ferry.pyi"
    path.write_text(wrong)
    monkeypatch.setitem(globals(), "STUB", str(path))
    with pytest.raises(AssertionError, match="wait_stopped"):
        test_stub_describes_every_export_of_the_extension()
