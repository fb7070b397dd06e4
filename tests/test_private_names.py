"""No module of the library reads another module's private name.

A name starting with one underscore (``_x``, not a dunder) is its module's own: another module
that imports it or reads it ties itself to an implementation detail nobody promised to keep.
What is shared is public (and listed in its module's ``__all__``, tests/public_api.py).

The scan reads every source file of ``agui_engine/`` (the folder is the import path) with
``ast`` and reports, wherever it is written (module level or inside a function):

* ``from m import _x`` (absolute or relative) where ``m`` is a project module;
* ``m._x`` where ``m`` is a project module bound by ``import`` / ``from pkg import m``;
* ``C._x`` where ``C`` is a name imported from another project module (a class, a function);
* ``v._x`` where ``v`` is a parameter or an annotated variable whose annotation is a class
  imported from another project module (``run: Run``, ``flow: Flow | None``), or a variable
  assigned the result of calling such a class or a function of another project module whose
  return annotation names a class (``r = make_renderer(...)`` with ``-> Renderer``);
* ``getattr(v, "_x")`` / ``setattr`` / ``hasattr`` / ``delattr`` on any of those.

A private *module* (``agui_engine._lazy``) is the package's own: importing its public names
from inside the package is fine. ``self._x`` and ``cls._x`` are the module's own objects.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the package; its folders are the import paths
PACKAGE = "agui_engine"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass(frozen=True)
class Finding:
    where: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.what}"


def module_name(path: Path) -> tuple[str, bool]:
    """(installed dotted name of the source file at ``path``, whether it is a package ``__init__``)."""
    rel = path.relative_to(ROOT)
    parts = list(rel.with_suffix("").parts)
    is_init = parts[-1] == "__init__"
    if is_init:
        parts = parts[:-1]
    return ".".join(parts), is_init


def project_modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        found[module_name(path)[0]] = path
    return found


def resolve(current: str, is_init: bool, module: str | None, level: int) -> str | None:
    """The absolute name of ``from <level dots><module> import ...`` written in ``current``."""
    if level == 0:
        return module
    base = current.split(".")
    if not is_init:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def annotation_names(node: ast.expr | None) -> Iterator[str]:
    """The class names an annotation can denote: ``C``, ``C | None``, ``Optional[C]``, ``"C"``."""
    if node is None:
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            parsed = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return
        yield from annotation_names(parsed)
    elif isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        yield from annotation_names(node.left)
        yield from annotation_names(node.right)
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Optional":
        yield from annotation_names(node.slice)


ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


def returned_classes(source: str) -> dict[str, str]:
    """What calling a module-level name of ``source`` gives, where it can be read: a class gives
    itself, a function the class its return annotation names (``-> C``, ``-> C | None``)."""
    tree = ast.parse(source)
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            found[node.name] = node.name
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [name for name in annotation_names(node.returns) if name != "None"]
            if len(names) == 1:
                found[node.name] = names[0]
    return found


def scan(
    source: str, current: str, is_init: bool, modules: set[str], where: str,
    returns: dict[str, dict[str, str]] | None = None,
) -> list[Finding]:
    """Every read of another project module's private name in ``source`` (module ``current``);
    ``returns``: module -> :func:`returned_classes` of it."""
    returns = returns or {}
    tree = ast.parse(source, filename=where)
    findings: list[Finding] = []
    # local name -> (what it is: "module" or "object", the defining module)
    foreign: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source_module = resolve(current, is_init, node.module, node.level)
            if source_module is None or not (source_module in modules or source_module.startswith("agui_engine")):
                continue
            for alias in node.names:
                submodule = f"{source_module}.{alias.name}"
                local = alias.asname or alias.name
                if submodule in modules:
                    if submodule != current:
                        foreign[local] = ("module", submodule)
                    continue
                if source_module == current:
                    continue
                if is_private(alias.name):
                    findings.append(Finding(where, node.lineno, f"imports {source_module}.{alias.name}"))
                foreign[local] = ("object", source_module)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules and alias.name != current:
                    if alias.asname:
                        foreign[alias.asname] = ("module", alias.name)
                    elif "." not in alias.name:
                        foreign[alias.name] = ("module", alias.name)
    foreign_classes = {name for name, (kind, _) in foreign.items() if kind == "object"}

    def typed_variables(scope: ast.AST) -> dict[str, str]:
        """Parameters and annotated names of ``scope`` whose type is a foreign class."""
        typed: dict[str, str] = {}
        for node in ast.walk(scope):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                    for name in annotation_names(arg.annotation):
                        if name in foreign_classes:
                            typed[arg.arg] = f"{foreign[name][1]}.{name}"
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                for name in annotation_names(node.annotation):
                    if name in foreign_classes:
                        typed[node.target.id] = f"{foreign[name][1]}.{name}"
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id in foreign_classes
            ):
                defining = foreign[node.value.func.id][1]
                made = returns.get(defining, {}).get(node.value.func.id)
                if made is not None:
                    typed[node.targets[0].id] = f"{defining}.{made}"
        return typed

    def receiver(node: ast.expr, typed: dict[str, str]) -> str | None:
        if not isinstance(node, ast.Name):
            return None
        if node.id in foreign:
            kind, defining = foreign[node.id]
            return defining if kind == "module" else f"{defining}.{node.id}"
        return typed.get(node.id)

    def check(scope: ast.AST, typed: dict[str, str]) -> None:
        for node in ast.walk(scope):
            if isinstance(node, ast.Attribute) and is_private(node.attr):
                owner = receiver(node.value, typed)
                if owner is not None:
                    findings.append(Finding(where, node.lineno, f"reads {owner}'s {node.attr}"))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ATTRIBUTE_FUNCTIONS
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and is_private(node.args[1].value)
            ):
                owner = receiver(node.args[0], typed)
                if owner is not None:
                    findings.append(Finding(where, node.lineno, f"{node.func.id} {owner}'s {node.args[1].value}"))

    # a typed variable is known inside the function that declares it (and what it nests)
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    seen: set[tuple[int, int, str]] = set()
    module_typed = {
        n.target.id: f"{foreign[name][1]}.{name}"
        for n in tree.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        for name in annotation_names(n.annotation)
        if name in foreign_classes
    }
    check(tree, module_typed)
    for function in functions:
        check(function, {**module_typed, **typed_variables(function)})
    unique = []
    for finding in findings:
        key = (finding.line, hash(finding.where), finding.what)
        if key not in seen:
            seen.add(key)
            unique.append(finding)
    return unique


def library_findings() -> list[Finding]:
    modules = project_modules()
    names = set(modules)
    sources = {name: path.read_text(encoding="utf-8") for name, path in modules.items()}
    returns = {name: returned_classes(source) for name, source in sources.items()}
    findings: list[Finding] = []
    for name, path in modules.items():
        _, is_init = module_name(path)
        findings.extend(scan(sources[name], name, is_init, names, str(path.relative_to(ROOT)), returns))
    return findings


def test_no_module_reads_another_modules_private_name() -> None:
    findings = library_findings()
    assert not findings, "private names cross modules (make them public, in __all__, or keep them home):\n" + "\n".join(
        map(str, findings)
    )


# --- the scanner itself: each form it must catch, and what it must let pass -------------------

MODULES = {"agui_engine", "agui_engine.genui", "agui_engine.genui.components", "agui_engine.loops",
           "agui_engine.loops.decision", "agui_engine.loops.agent_loop", "agui_engine._lazy"}


#: what calling names of agui_engine.loops.decision gives (as returned_classes reads it)
RETURNS = {"agui_engine.loops.decision": returned_classes("class Decision: ...\ndef make() -> Decision | None: ...\n")}


def findings_in(source: str, current: str = "agui_engine.loops.agent_loop") -> list[str]:
    return [f.what for f in scan(textwrap.dedent(source), current, False, MODULES, "x.py", RETURNS)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from .decision import _ToolSpec\n", ["imports agui_engine.loops.decision._ToolSpec"]),
        ("from ..genui.components import _check\n", ["imports agui_engine.genui.components._check"]),
        ("from agui_engine.loops.decision import Decision, _Spec as S\n", ["imports agui_engine.loops.decision._Spec"]),
        ("def f():\n    from .decision import _lazy_one\n", ["imports agui_engine.loops.decision._lazy_one"]),
        ("from . import decision\ndecision._helper()\n", ["reads agui_engine.loops.decision's _helper"]),
        ("import agui_engine.loops.decision as d\nx = d._TABLE\n", ["reads agui_engine.loops.decision's _TABLE"]),
        ("from .decision import Decision\nDecision._cache\n", ["reads agui_engine.loops.decision.Decision's _cache"]),
        (
            "from .decision import Decision\ndef f(d: Decision | None):\n    return d._items\n",
            ["reads agui_engine.loops.decision.Decision's _items"],
        ),
        (
            "from .decision import Decision\ndef f():\n    d: 'Decision' = g()\n    return getattr(d, '_items')\n",
            ["getattr agui_engine.loops.decision.Decision's _items"],
        ),
        (
            "from .decision import Decision\ndef f():\n    d = Decision()\n    d._items\n",
            ["reads agui_engine.loops.decision.Decision's _items"],
        ),
        (
            "from .decision import make\ndef f():\n    d = make()\n    d._items\n",
            ["reads agui_engine.loops.decision.Decision's _items"],
        ),
    ],
)
def test_the_scan_catches(source: str, expected: list[str]) -> None:
    assert findings_in(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "from agui_engine._lazy import export_names\n",  # a private module's public name
        "from .decision import Decision\nclass A:\n    def f(self):\n        return self._x\n",
        "import json\njson._default_encoder\n",  # not a project module
        "from .decision import Decision\nDecision.__name__\n",  # dunders are public
        "_mine = 1\ndef f(x):\n    return x._anything\n",  # an untyped receiver cannot be read statically
        "from .agent_loop import _own\n",  # the module's own name
    ],
)
def test_the_scan_lets_pass(source: str) -> None:
    assert findings_in(source) == []
