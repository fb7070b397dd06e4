"""Checks shared by the per-package public-API tests (``tests/*/test_package.py``).

A public module's ``__all__`` is ONE literal, sorted list of strings, every name in it
resolves, and ``from module import *`` gives exactly those names; every public-looking name
the module defines at module level (no leading underscore) is in it: a name is the module's
API or it is private, never something in between. A package's
``__all__`` equals the literal list written in its test (so adding or removing a
public name is a deliberate edit of the test), and every name it exports is the
object its defining module exports.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def literal_all(path: Path) -> list[str]:
    """The ``__all__`` of the source file at ``path``, which must be assigned exactly once,
    at module level, as a literal list of string constants. AssertionError otherwise."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assignments = [
        node
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        and any(
            isinstance(t, ast.Name) and t.id == "__all__"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    assert len(assignments) == 1, f"{path}: __all__ is assigned {len(assignments)} times (want once)"
    value = assignments[0].value
    assert isinstance(value, ast.List), f"{path}: __all__ is not a literal list"
    names = []
    for element in value.elts:
        assert isinstance(element, ast.Constant) and isinstance(element.value, str), (
            f"{path}:{element.lineno}: __all__ holds a non-literal"
        )
        names.append(element.value)
    augmented = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__"
    ]
    assert not augmented, f"{path}: __all__ is extended after its literal"
    return names


def _defined(body: list[ast.stmt]) -> Iterator[tuple[str, int]]:
    """(name, line) of what the statements bind at module level: def, class, assignment
    targets, annotated names, type aliases, also inside module-level ``if`` / ``try``. Imports
    are not definitions (a module re-exports a name by listing it in ``__all__``)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node.lineno
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        yield name.id, node.lineno
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node.lineno
        elif isinstance(node, getattr(ast, "TypeAlias", ())):
            yield node.name.id, node.lineno  # type: ignore[attr-defined]
        elif isinstance(node, ast.If):
            yield from _defined(node.body)
            yield from _defined(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _defined(block)


def public_names_outside_all(path: Path) -> list[str]:
    """``name (line n)`` of every public-looking name the module at ``path`` defines at module
    level but leaves out of its ``__all__`` (a name ``del``-ed at module level is gone)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    deleted = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Delete)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    exported = set(literal_all(path))
    found: dict[str, int] = {}
    for name, line in _defined(tree.body):
        if not name.startswith("_") and name not in exported and name not in deleted:
            found.setdefault(name, line)
    return [f"{name} (line {line})" for name, line in sorted(found.items(), key=lambda item: item[1])]


def check_every_public_name_is_in_all(module_name: str, path: Path) -> None:
    """Every public-looking module-level name of ``module_name`` is in its ``__all__``."""
    outside = public_names_outside_all(path)
    assert not outside, (
        f"{module_name} defines public-looking names outside its __all__ (list them in __all__, "
        f"or rename them with a leading underscore): {', '.join(outside)}"
    )


def star_import(module_name: str) -> set[str]:
    namespace: dict[str, object] = {}
    exec(f"from {module_name} import *", namespace)
    return set(namespace) - {"__builtins__"}


def check_module(module_name: str, path: Path) -> None:
    """``module_name`` (source at ``path``) has a literal, sorted, duplicate-free
    ``__all__`` whose names all resolve and which a star import reproduces."""
    names = literal_all(path)
    assert names == sorted(names), f"{module_name}.__all__ is not sorted"
    assert len(names) == len(set(names)), f"{module_name}.__all__ repeats a name"
    module = importlib.import_module(module_name)
    assert module.__all__ == names
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ names what the module does not have: {missing}"
    assert star_import(module_name) == set(names)


def check_package(package: ModuleType, expected: list[str], path: Path, modules: list[str]) -> None:
    """The package's ``__all__`` is the literal ``expected``; every name resolves to the
    object of the same name that one of the public ``modules`` exports; a star import
    gives exactly ``__all__``."""
    names = literal_all(path)
    assert names == sorted(names), f"{package.__name__}.__all__ is not sorted"
    assert names == expected, (
        f"{package.__name__}.__all__ changed: added {sorted(set(names) - set(expected))}, "
        f"removed {sorted(set(expected) - set(names))}; update the expected list in the test on purpose"
    )
    submodules = [importlib.import_module(name) for name in modules]
    for name in names:
        value = getattr(package, name)
        if name.startswith("__"):
            continue
        exported_by = [sub.__name__ for sub in submodules if name in sub.__all__ and getattr(sub, name) is value]
        assert exported_by, f"{package.__name__}.{name} is not what a public module of the package exports"
    assert star_import(package.__name__) == set(names)


def check_subpackage(package_name: str) -> None:
    """The ``__all__`` of the package ``package_name`` is the literal, sorted list of its public
    modules (the files of its folder not starting with ``_``): each keeps its names in its own
    ``__all__``, and ``from package import *`` gives the modules."""
    package = importlib.import_module(package_name)
    path = Path(package.__file__ or "")
    names = literal_all(path)
    modules = sorted(p.stem for p in path.parent.glob("*.py") if not p.stem.startswith("_"))
    assert names == modules, f"{package_name}.__all__ is not its public modules: {names} != {modules}"
    namespace: dict[str, object] = {}
    exec(f"from {package_name} import *", namespace)
    assert all(isinstance(namespace[name], ModuleType) for name in names)


def public_modules(package: str, exclude: set[str], subpackages: tuple[str, ...] = ()) -> list[tuple[str, Path]]:
    """``(module name, path)`` of every public module of ``package`` (its folder is its import
    path) and of its ``subpackages`` (names starting with ``_`` and ``exclude`` are not public)."""
    folder = package.replace(".", "/")
    found = []
    for sub in ("", *subpackages):
        prefix = f"{package}.{sub}." if sub else f"{package}."
        for path in sorted((ROOT / folder / sub).glob("*.py")):
            if not path.stem.startswith("_") and path.stem not in exclude:
                found.append((prefix + path.stem, path))
    return found
