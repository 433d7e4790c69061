"""The type stub of the extension module (maskpar/_core.pyi) against the module
itself, and the public API's documentation.

PyO3 gives every Rust function and method a text signature, so
``inspect.signature`` reads the real parameter names, kinds and defaults; the
stub's are read from its syntax tree. Names missing on either side, a
parameter renamed, reordered, made keyword-only or given another default, a
property that is a method (or the reverse), or a public function without a
docstring fail here.
"""

from __future__ import annotations

import ast
import inspect
import os
import types
from typing import Any

import pytest

import maskpar
from maskpar import _core

STUB = os.path.join(os.path.dirname(_core.__file__), "_core.pyi")
# Module attributes every extension module has; not part of the API.
MODULE_DUNDERS = {"__doc__", "__file__", "__loader__", "__name__", "__package__", "__spec__"}


def stub_tree() -> ast.Module:
    with open(STUB, encoding="utf-8") as f:
        return ast.parse(f.read())


def is_property(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)


def is_classmethod(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in node.decorator_list)


def stub_parameters(node: ast.FunctionDef, method: bool) -> list[tuple[str, str, Any]]:
    """(name, kind, default) per parameter, as inspect.Parameter would say;
    ``self``/``cls`` dropped for methods."""
    args = node.args
    positional = args.posonlyargs + args.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(args.defaults)) + [
        ast.literal_eval(d) for d in args.defaults
    ]
    out = []
    for i, (a, d) in enumerate(zip(positional, defaults)):
        if method and i == 0:
            continue
        kind = "POSITIONAL_ONLY" if a in args.posonlyargs else "POSITIONAL_OR_KEYWORD"
        out.append((a.arg, kind, d))
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", inspect.Parameter.empty))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        default = inspect.Parameter.empty if d is None else ast.literal_eval(d)
        out.append((a.arg, "KEYWORD_ONLY", default))
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", inspect.Parameter.empty))
    return out


def runtime_parameters(obj: Any, method: bool) -> list[tuple[str, str, Any]]:
    params = list(inspect.signature(obj).parameters.values())
    if method:
        params = params[1:]  # self / cls (positional-only in PyO3's text signatures)
    return [(p.name, p.kind.name, p.default) for p in params]


def stub_names() -> dict[str, ast.AST]:
    """Top-level names the stub declares (type aliases such as Bitmask excluded:
    they exist for annotations only)."""
    out: dict[str, ast.AST] = {}
    for node in stub_tree().body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def runtime_names() -> set[str]:
    return {n for n in dir(_core) if n not in MODULE_DUNDERS and n != "__all__"}


def test_the_stub_declares_exactly_the_module_names():
    declared, present = set(stub_names()), runtime_names()
    assert declared - present == set(), f"in the stub, not in the module: {declared - present}"
    assert present - declared == set(), f"in the module, not in the stub: {present - declared}"


def function_nodes() -> list[ast.FunctionDef]:
    return [n for n in stub_names().values() if isinstance(n, ast.FunctionDef)]


@pytest.mark.parametrize("node", function_nodes(), ids=lambda n: n.name)
def test_function_signatures_match(node):
    obj = getattr(_core, node.name)
    assert runtime_parameters(obj, method=False) == stub_parameters(node, method=False)


def class_members() -> list[tuple[str, ast.FunctionDef]]:
    out = []
    for node in stub_names().values():
        if isinstance(node, ast.ClassDef):
            out += [(node.name, m) for m in node.body if isinstance(m, ast.FunctionDef)]
    return out


@pytest.mark.parametrize("cls, node", class_members(), ids=lambda x: getattr(x, "name", x))
def test_class_members_match(cls, node):
    runtime_cls = getattr(_core, cls)
    if node.name == "__init__":
        # The constructor's text signature is the class's (self excluded).
        assert runtime_parameters(runtime_cls, method=False) == stub_parameters(node, True)
        return
    member = inspect.getattr_static(runtime_cls, node.name)
    if is_property(node):
        assert inspect.isdatadescriptor(member), f"{cls}.{node.name} is not a property"
        return
    assert not inspect.isdatadescriptor(member), f"{cls}.{node.name} is a property"
    bound = getattr(runtime_cls, node.name)
    if is_classmethod(node):
        assert isinstance(member, (classmethod, types.ClassMethodDescriptorType))
        # Bound to the class: its signature no longer has cls.
        assert runtime_parameters(bound, method=False) == stub_parameters(node, method=True)
        return
    assert runtime_parameters(bound, method=True) == stub_parameters(node, method=True)


@pytest.mark.parametrize("cls", ["Tokenizer", "Grammar", "Matcher"])
def test_the_stub_declares_every_public_member(cls):
    node = stub_names()[cls]
    declared = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
    public = {n for n in vars(getattr(_core, cls)) if not n.startswith("_")}
    assert public - declared == set(), f"{cls} members missing from the stub"
    constructible = "__init__" in declared
    try:
        inspect.signature(getattr(_core, cls))
        has_constructor = True
    except ValueError:  # PyO3 classes without #[new] cannot be constructed
        has_constructor = False
    assert constructible == has_constructor, f"{cls}: the stub's __init__ and the module disagree"


def documented(obj: Any) -> bool:
    return bool((getattr(obj, "__doc__", None) or "").strip())


def public_api() -> list[tuple[str, Any]]:
    """Every public callable and property reachable from ``maskpar.__all__``,
    and the public functions of ``maskpar.sampling`` and ``maskpar.demo``."""
    from maskpar import demo, sampling

    out: list[tuple[str, Any]] = []
    for name in maskpar.__all__:
        obj = getattr(maskpar, name)
        if inspect.isclass(obj):
            out.append((name, obj))
            for m, member in inspect.getmembers(obj):
                if not m.startswith("_"):
                    out.append((f"{name}.{m}", member))
        elif callable(obj):
            out.append((name, obj))
    for mod in (sampling, demo):
        for name, obj in vars(mod).items():
            if inspect.isfunction(obj) and obj.__module__ == mod.__name__:
                if not name.startswith("_"):
                    out.append((f"{mod.__name__}.{name}", obj))
    return out


def test_every_public_function_has_a_docstring():
    missing = [name for name, obj in public_api() if not documented(obj)]
    assert not missing, f"no docstring: {missing}"


def test_every_stub_entry_has_a_docstring():
    """The stub is what editors show: its public entries carry the docs too."""
    missing = []
    for node in stub_names().values():
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            if not ast.get_docstring(node):
                missing.append(node.name)
        elif isinstance(node, ast.ClassDef):
            if not ast.get_docstring(node):
                missing.append(node.name)
            for m in node.body:
                if isinstance(m, ast.FunctionDef) and m.name != "__init__":
                    if not ast.get_docstring(m):
                        missing.append(f"{node.name}.{m.name}")
    assert not missing, f"stub entries without a docstring: {missing}"


def test_python_functions_are_fully_annotated():
    """Python-level functions are typed in their own source (the package is
    py.typed): every parameter and the return value carry an annotation."""
    unannotated = []
    for name, obj in public_api():
        func = obj.__func__ if isinstance(obj, types.MethodType) else obj
        if not inspect.isfunction(func):
            continue  # Rust functions: checked against the stub above
        sig = inspect.signature(func)
        params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
        if sig.return_annotation is inspect.Signature.empty:
            unannotated.append(f"{name} -> ?")
        unannotated += [f"{name}({p.name})" for p in params if p.annotation is p.empty]
    assert not unannotated, unannotated


def test_version_is_the_crates():
    """One version, in Cargo.toml: the module reports it, and the changelog has
    an entry for it."""
    import importlib.metadata
    import re

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with open(os.path.join(root, "Cargo.toml"), encoding="utf-8") as f:
        version = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert maskpar.__version__ == version
    assert importlib.metadata.version("maskpar") == version
    with open(os.path.join(root, "CHANGELOG.md"), encoding="utf-8") as f:
        assert f"## [{version}]" in f.read()
