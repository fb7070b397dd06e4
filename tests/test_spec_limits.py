"""spec/limits.md and spec/errors.md say what the code does.

The documents are the source of truth for readers; these tests make them fail loudly
when the code moves away from them:

* every row of a ``| Constant | Value | ...`` table names a constant that exists
  (``module.NAME`` or ``module.Class.NAME``) and equals the first backticked value;
* every row of the ``| Class | Bases | ...`` table names an error class that exists,
  subclasses every base listed, and has the documented ``http_status``,
  ``ws_close_code`` and ``default_code``;
* every module-level constant in ``agui_engine/`` (adapters and transports included)
  whose name looks like a limit appears in spec/limits.md, so a new limit cannot be
  added without documenting what happens when it is hit and why that number.

The documents are read from the project's own ``spec/`` directory.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import operator
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
PACKAGES = ("agui_engine",)

_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_BACKTICKED = re.compile(r"`([^`]+)`")

#: Names that look like a limit: a MAX / MIN / LIMIT / TIMEOUT / RETRIES word, or a unit
#: suffix. Matched after stripping leading underscores (private limits count too).
LIMIT_NAME = re.compile(
    r"(?:^|_)(?:MAX|MIN|LIMITS?|TIMEOUT|RETRIES)(?:_|$)|_(?:SECONDS|BYTES|CHARS|LENGTH|INTERVAL)$"
)


# --------------------------------------------------------------------------- parsing


def _tables(path: Path) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table in ``path``: (header cells, body rows as cell lists)."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    header: list[str] | None = None
    rows: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|"):
            cells = [c.strip() for c in _CELL_SPLIT.split(stripped[1:-1])]
            if header is None:
                header = cells
            elif not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
            continue
        if header is not None:
            tables.append((header, rows))
        header, rows = None, []
    return tables


def _first_code(cell: str) -> str | None:
    m = _BACKTICKED.search(cell)
    return m.group(1) if m else None


def _rows(path: Path, first_header: str) -> list[list[str]]:
    """Body rows (with a backticked first cell) of every table whose first header is ``first_header``."""
    out = []
    for header, rows in _tables(path):
        if header and header[0] == first_header:
            out += [r for r in rows if _first_code(r[0])]
    return out


_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}


def _evaluate(text: str) -> Any:
    """A documented value: a literal, arithmetic on literals, or a dict/tuple/list of them."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bytes)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = ev(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Dict):
            return {ev(k): ev(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [ev(e) for e in node.elts]
            return tuple(items) if isinstance(node, ast.Tuple) else items
        raise ValueError(f"unsupported value in the spec: {ast.dump(node)}")

    return ev(ast.parse(text, mode="eval").body)


def _resolve(qualified: str) -> Any:
    """``pkg.module.NAME`` or ``pkg.module.Class.NAME``; a bare name is a builtin."""
    parts = qualified.split(".")
    if len(parts) == 1:
        return getattr(builtins, qualified)
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(f"no module in {qualified!r}")


# --------------------------------------------------------------------------- constants

_CONSTANT_ROWS = [
    (path.name, row) for path in (SPEC / "limits.md", SPEC / "errors.md") for row in _rows(path, "Constant")
]


def test_the_documents_have_tables() -> None:
    # guards against a format change that would make the tests below check nothing
    assert len(_rows(SPEC / "limits.md", "Constant")) >= 40
    assert len(_rows(SPEC / "errors.md", "Constant")) >= 4
    assert len(_rows(SPEC / "errors.md", "Class")) >= 20


@pytest.mark.parametrize(
    ("doc", "row"), _CONSTANT_ROWS, ids=[f"{d}:{_first_code(r[0])}" for d, r in _CONSTANT_ROWS]
)
def test_documented_constant_has_documented_value(doc: str, row: list[str]) -> None:
    name = _first_code(row[0])
    value_text = _first_code(row[1])
    assert name and value_text, f"{doc}: row {row[0]!r} needs a backticked name and value"
    try:
        actual = _resolve(name)
    except (AttributeError, LookupError) as exc:
        pytest.fail(f"{doc} documents {name}, which does not exist ({exc})")
    expected = _evaluate(value_text)
    assert actual == expected, f"{doc}: {name} is {actual!r} in the code, {value_text} in the document"


# --------------------------------------------------------------------------- errors

_CLASS_ROWS = _rows(SPEC / "errors.md", "Class")


@pytest.mark.parametrize("row", _CLASS_ROWS, ids=[str(_first_code(r[0])) for r in _CLASS_ROWS])
def test_documented_error_class(row: list[str]) -> None:
    from agui_engine.protocol.errors import AguiEngineError

    name = _first_code(row[0])
    assert name is not None
    try:
        cls = _resolve(name)
    except (AttributeError, LookupError) as exc:
        pytest.fail(f"errors.md documents {name}, which does not exist ({exc})")
    assert isinstance(cls, type) and issubclass(cls, AguiEngineError), f"{name} is not an AguiEngineError"
    bases = _BACKTICKED.findall(row[1])
    assert bases, f"errors.md: {name} lists no base"
    for base in bases:
        assert issubclass(cls, _resolve(base)), f"errors.md says {name} subclasses {base}; it does not"
    http_status, ws_close_code, code = (_first_code(row[i]) for i in (3, 4, 5))
    assert http_status and ws_close_code and code, f"errors.md: {name} needs status, close code and code"
    assert cls.http_status == int(http_status), f"{name}.http_status is {cls.http_status}, documented {http_status}"
    assert cls.ws_close_code == int(ws_close_code), (
        f"{name}.ws_close_code is {cls.ws_close_code}, documented {ws_close_code}"
    )
    assert cls.default_code == code, f"{name}.default_code is {cls.default_code!r}, documented {code!r}"


def _project_error_classes() -> dict[str, type]:
    from agui_engine.protocol.errors import AguiEngineError

    found: dict[str, type] = {}
    for module_name in _modules():
        if module_name.endswith(".__main__"):
            continue  # importing it runs the CLI
        module = importlib.import_module(module_name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, AguiEngineError) and obj.__module__ == module_name:
                found[f"{module_name}.{obj.__qualname__}"] = obj
    return found


def test_every_error_class_is_documented() -> None:
    documented = {_first_code(r[0]) for r in _CLASS_ROWS}
    missing = sorted(set(_project_error_classes()) - documented)
    assert not missing, f"error classes not in spec/errors.md: {missing}"


# --------------------------------------------------------------------------- coverage


def _module_files() -> dict[str, Path]:
    """Module name -> source file (the folder is the import path)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found[".".join(parts)] = path
    return found


def _modules() -> list[str]:
    return list(_module_files())


def _limit_like_constants() -> dict[str, str]:
    """``module.NAME`` -> ``file:line`` of every module-level assignment whose name looks
    like a limit. WebSocket close codes (``WS_CLOSE_*``) are codes, not limits: they are
    in spec/errors.md."""
    found: dict[str, str] = {}
    for module_name, path in _module_files().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Name)
                    and target.id.isupper()
                    and not target.id.startswith("WS_CLOSE_")
                    and LIMIT_NAME.search(target.id.lstrip("_"))
                ):
                    found[f"{module_name}.{target.id}"] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return found


def test_every_limit_constant_is_in_limits_md() -> None:
    documented = {_first_code(r[0]) for r in _rows(SPEC / "limits.md", "Constant")}
    missing = [
        f"{name} ({where})"
        for name, where in sorted(_limit_like_constants().items())
        if name not in documented
    ]
    assert not missing, "limit constants not in spec/limits.md (add a row: value, unit, what happens, why): " + ", ".join(
        missing
    )
