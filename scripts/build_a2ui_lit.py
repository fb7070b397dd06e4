"""Rebuild ``agui_engine/static/a2ui-lit.js``: the official A2UI v0.9 Lit renderer as one ES module.

Run: ``.venv/bin/python scripts/build_a2ui_lit.py`` (build time only: it installs the pinned npm
packages of ``scripts/a2ui_lit/`` with ``npm ci`` from their lock file, then bundles them with the
pinned esbuild); ``--check`` writes nothing and exits 1 when the committed files are not what the
build gives. Nothing at run time reads npm or the network: the gateway serves the committed bundle.

What it writes (package data of ``agui_engine``, served by ``transports/inspector.py``):

* ``agui_engine/static/a2ui-lit.js`` -- ``scripts/a2ui_lit/entry.js`` (``A2uiSurface``,
  ``basicCatalog`` from ``@a2ui/lit/v0_9``; ``Catalog`` and ``MessageProcessor`` from ``@a2ui/web_core/v0_9``)
  with everything it imports (``lit``, ``@lit/context``, ``@preact/signals-core``, ``zod``,
  ``date-fns``, ...), minified, ES2022, with a banner naming the versions;
* ``agui_engine/static/a2ui-lit.LICENSES.txt`` -- the licence text of every npm package that has
  code in the bundle (read from esbuild's metafile, so a package added by an upgrade is never left
  out), each under its name and version.

It refuses any ``@a2ui/lit`` other than :data:`PINNED_VERSION` (the lock file pins the rest).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "scripts" / "a2ui_lit"
STATIC = ROOT / "agui_engine" / "static"
BUNDLE = STATIC / "a2ui-lit.js"
LICENSES = STATIC / "a2ui-lit.LICENSES.txt"
PINNED_VERSION = "0.11.0"
LICENSE_NAMES = ("LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE", "license", "license.md")


def _npm_ci() -> None:
    lit = BUILD / "node_modules" / "@a2ui" / "lit" / "package.json"
    if lit.exists() and json.loads(lit.read_text())["version"] == PINNED_VERSION:
        return  # already installed from the lock file
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=BUILD, check=True)


def _package_dir(input_path: str) -> Path | None:
    """The npm package folder an esbuild input lies in (None for the entry file)."""
    parts = Path(input_path).parts
    if "node_modules" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("node_modules")
    depth = 2 if parts[i + 1].startswith("@") else 1
    return BUILD.joinpath(*parts[: i + 1 + depth])


def _licenses(metafile: dict[str, object]) -> str:
    inputs = metafile["inputs"]
    assert isinstance(inputs, dict)
    packages = sorted({p for p in map(_package_dir, inputs) if p is not None})
    sections = []
    for folder in packages:
        meta = json.loads((folder / "package.json").read_text())
        text = next(((folder / n).read_text() for n in LICENSE_NAMES if (folder / n).exists()), None)
        if text is None:
            raise SystemExit(f"{meta['name']} {meta['version']} ships no licence file: refusing to bundle it")
        sections.append(f"{'=' * 78}\n{meta['name']} {meta['version']} ({meta.get('license', '?')})\n"
                        f"{'=' * 78}\n\n{text.strip()}\n")
    head = (f"Licences of the npm packages bundled into a2ui-lit.js (@a2ui/lit {PINNED_VERSION} and its\n"
            "dependencies), by scripts/build_a2ui_lit.py.\n\n")
    return head + "\n".join(sections)


def build() -> tuple[bytes, bytes]:
    """Install (if needed) and bundle; the bundle's bytes and the licences' bytes."""
    _npm_ci()
    version = json.loads((BUILD / "node_modules" / "@a2ui" / "lit" / "package.json").read_text())["version"]
    if version != PINNED_VERSION:
        raise SystemExit(f"@a2ui/lit {version} is installed; this build is pinned to {PINNED_VERSION}")
    banner = (f"/* @a2ui/lit {PINNED_VERSION} (Apache-2.0) with @a2ui/web_core and their dependencies, bundled by "
              "agui-engine's scripts/build_a2ui_lit.py; licences: a2ui-lit.LICENSES.txt */")
    with tempfile.TemporaryDirectory() as tmp:
        out, meta = Path(tmp) / "a2ui-lit.js", Path(tmp) / "meta.json"
        subprocess.run(
            [str(BUILD / "node_modules" / ".bin" / "esbuild"), "entry.js", "--bundle", "--format=esm", "--minify",
             "--target=es2022", "--legal-comments=none", "--charset=utf8", f"--banner:js={banner}",
             f"--metafile={meta}", f"--outfile={out}", "--log-level=warning"],
            cwd=BUILD, check=True)
        metafile = json.loads(meta.read_text())
        return out.read_bytes(), _licenses(metafile).encode()


def main(argv: list[str]) -> int:
    bundle, licenses = build()
    targets = {BUNDLE: bundle, LICENSES: licenses}
    if "--check" in argv:
        stale = [p.name for p, data in targets.items() if not p.exists() or p.read_bytes() != data]
        if stale:
            print(f"out of date: {', '.join(stale)} (run scripts/build_a2ui_lit.py)")
            return 1
        print(f"up to date: a2ui-lit.js {len(bundle)} bytes")
        return 0
    for path, data in targets.items():
        path.write_bytes(data)
    print(f"wrote {BUNDLE.relative_to(ROOT)} ({len(bundle)} bytes) and {LICENSES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
