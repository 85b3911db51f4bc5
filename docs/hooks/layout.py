"""MkDocs hooks: the API reference finds Keel's packages as they install, and the security
policy and the changelog at the repository's root join the site.

setup.py installs the repository's folders program/, executor/, ... as keel.program,
keel.executor, ...; griffe (mkdocstrings' Python reader) looks for a package's modules in
its folder, where keel/program does not exist. on_config builds the installed layout in a
temporary folder from symbolic links (keel/ beside setup.py's MAPPED folders) and gives it to
the Python handler as its search path, so the reference is read from the sources statically,
without importing anything.
"""
from __future__ import annotations

import ast
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
ROOT_PAGES = {"SECURITY.md": "security.md", "CHANGELOG.md": "changelog.md"}
_layout_dirs: list[str] = []


def mapped_folders() -> dict[str, str]:
    """setup.py's MAPPED (repository folder -> package), read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MAPPED" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("setup.py no longer defines MAPPED: update docs/hooks/layout.py")


def build_layout() -> Path:
    """A folder holding `keel/` as installed: keel/'s own entries, then each mapped folder."""
    top = Path(tempfile.mkdtemp(prefix="keel-api-"))
    _layout_dirs.append(str(top))
    package = top / "keel"
    package.mkdir()
    for entry in (ROOT / "keel").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for folder, name in mapped_folders().items():
        (package / name.split(".", 1)[1]).symlink_to(ROOT / folder)
    return top


@event_priority(100)  # before mkdocstrings' own on_config, which starts the handler
def on_config(config):
    handlers = config.plugins["mkdocstrings"].config.handlers
    python = handlers.setdefault("python", {})
    python["paths"] = [str(build_layout())]
    return config


def on_files(files, config):
    for source, page in ROOT_PAGES.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / source)))
    return files


def on_shutdown():
    while _layout_dirs:
        shutil.rmtree(_layout_dirs.pop(), ignore_errors=True)
