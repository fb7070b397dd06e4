"""Packages are found, not listed.

The repository keeps the three layers as top-level folders (``agui_engine/``, ``adapters/``,
``transports/``); installed, everything lives under the ``agui_engine`` namespace (top-level
``adapters`` and ``transports`` would collide with other distributions and with a user's own
modules). ``pyproject.toml``'s static ``packages`` list cannot express "every subpackage of a
folder mapped to another name", so it is computed here: each root and every package below it.
A package listed by hand is the one a new subpackage forgets (``agui_engine.cli`` once was), and
``tests/test_install.py`` builds the wheel and runs the command from it to prove none is missing.
"""

from setuptools import find_packages, setup

#: installed package name -> folder in the repository
ROOTS = {"agui_engine": "agui_engine", "agui_engine.adapters": "adapters", "agui_engine.transports": "transports"}

packages = []
for name, folder in ROOTS.items():
    packages.append(name)
    packages.extend(f"{name}.{sub}" for sub in find_packages(folder) if f"{name}.{sub}" not in ROOTS)

setup(packages=packages, package_dir=ROOTS)
