"""The lazy packages' one table (agui_engine/_lazy.py): the ``if TYPE_CHECKING:`` imports are
what mypy sees and what ``__getattr__`` loads; the literal ``__all__`` equals them (the packages'
tests); the reader refuses a block that is not plain ``from .module import name`` lines."""

from __future__ import annotations

import importlib

import pytest

from agui_engine._lazy import exports_in, exports_of

LAZY_PACKAGES = ("agui_engine.adapters", "agui_engine.transports")


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_each_name_loads_from_the_module_its_type_checking_import_names(name: str) -> None:
    package = importlib.import_module(name)
    table = exports_of(name)
    assert sorted(table) == package.__all__
    assert set(table) <= set(dir(package))
    for export, module in table.items():
        assert getattr(package, export) is getattr(importlib.import_module(f"{name}.{module}"), export)


def test_the_table_reader_refuses_what_is_not_a_plain_relative_import() -> None:
    for body, complaint in (
        ("x = 1\n", "found 0"),
        ("if TYPE_CHECKING:\n    import os\n", "only 'from .module import name'"),
        ("if TYPE_CHECKING:\n    from .a import b as c\n", "under its own name"),
        ("if TYPE_CHECKING:\n    from .a.b import c\n", "only 'from .module import name'"),
    ):
        with pytest.raises(ValueError, match=complaint):
            exports_in(body, "pkg")
    assert exports_in("if TYPE_CHECKING:\n    from .a import B, c\n", "pkg") == {"B": "a", "c": "a"}
