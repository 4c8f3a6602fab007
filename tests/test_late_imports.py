"""No function-local import dodges a cycle (docs/ARCHITECTURE.md, Layers): the domain and the
worker import a module inside a function only to keep it out of a process that never uses it.

Every function-local import of a project module (broadside, jobs) or a third-party one, in
every module under broadside/ and jobs/, must be in ALLOWED with the memory it saves. One that
is not fails here: move it to the top of its module (a cycle it dodged means the layers are
wrong), or, if it truly keeps a large module out of a process, add it with its reason. An entry
whose import is gone fails too, so the list stays exactly what the code does. The standard
library is not checked. A provider's module, loaded by name (`importlib`) in
broadside/delivery/providers/factory.py, is no import statement and is not listed.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("broadside", "jobs")

# (module file, imported module) -> why it is imported where it is used.
ALLOWED: dict[tuple[str, str], str] = {
    ("broadside/core/accounts.py", "werkzeug.security"):
        "Werkzeug (~2.6 MB) only when a password is hashed or checked; the worker never does",
    ("broadside/core/addresses.py", "email_validator"):
        "email_validator and idna (~0.5 MB) only when an address is validated; the worker never does",
    ("broadside/core/addresses.py", "idna"):
        "idna (~0.3 MB of tables) in the worker only when a domain outside ASCII is sent to",
    ("broadside/mail/sanitise.py", "markdown_it"):
        "the rendering libraries (~8 MB) only when content is frozen, never per recipient",
    ("broadside/mail/rendering.py", "css_inline"):
        "the rendering libraries (~8 MB) only when content is frozen, never per recipient",
    ("broadside/mail/sanitise.py", "nh3"):
        "the rendering libraries (~8 MB) only when content is frozen, never per recipient",
    ("jobs/stream.py", "jobs.imports"):
        "the CSV importer (~1.3 MB with the bulk actions) only when an import was left unfinished",
    ("jobs/stream.py", "jobs.bulk"):
        "the bulk actions (~1.3 MB with the importer) only when one was left unfinished",
}


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The absolute names of the modules an import statement loads."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    if node.module is None:  # `from . import x`: each name is a module of the package
        return [f"{stem}.{alias.name}" for alias in node.names]
    # `from package import module` names a module, which is what is loaded.
    names = [f"{stem}.{alias.name}" for alias in node.names]
    return [name for name in names if _is_project_module(name)] or [stem]


def _is_project_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _checked(name: str) -> bool:
    top = name.split(".")[0]
    return top not in sys.stdlib_module_names and top != "__future__"


def function_local_imports() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for top in CHECKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            module = relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            tree = ast.parse(path.read_text(), relative)
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        found.update((relative, name) for name in _imported(node, package)
                                     if _checked(name))
    return found


def test_every_function_local_import_saves_memory_and_says_so():
    unexplained = sorted(function_local_imports() - set(ALLOWED))
    assert not unexplained, (
        "function-local imports that are not in ALLOWED (move each to the top of its module, "
        f"or add it with the memory it keeps out of a process): {unexplained}")


def test_the_allow_list_names_only_imports_that_exist():
    gone = sorted(set(ALLOWED) - function_local_imports())
    assert not gone, f"ALLOWED lists imports the code no longer makes: {gone}"
