"""A recipe name → its command line and parameter defaults, read from recipes/NAME/MLproject.

The MLproject command is `radt-ext run -- python -m ...`; the sweep runs the part after
`--` inside its own sessions, with the recipe's defaults overridden by the sweep's params.
"""
from __future__ import annotations

import os
import shlex
import string
from pathlib import Path

import yaml

REPO_RECIPES = Path(__file__).resolve().parents[2] / "recipes"


class RecipeError(ValueError):
    pass


def find(name: str, base: Path | None = None) -> Path:
    for root in ([base / "recipes", base] if base else []) + [Path.cwd() / "recipes", REPO_RECIPES]:
        path = root / name / "MLproject"
        if path.is_file():
            return path
    raise RecipeError(f"no recipe {name!r} (looked for recipes/{name}/MLproject next to the spec, in the "
                      f"current directory and in {REPO_RECIPES})")


def load(name: str, base: Path | None = None) -> tuple[str, dict[str, str]]:
    """(command template, {param: default}) of the recipe's main entry point."""
    path = find(name, base)
    with open(path) as fh:
        project = yaml.safe_load(fh)
    entry = project["entry_points"]["main"]
    defaults = {}
    for key, decl in (entry.get("parameters") or {}).items():
        default = decl.get("default") if isinstance(decl, dict) else decl
        if isinstance(default, float) and default.is_integer():
            default = int(default)
        defaults[key] = "" if default is None else str(default)
    command = entry["command"]
    prefix = "radt-ext run -- "
    if command.startswith(prefix):
        command = command[len(prefix):]
    return command, defaults


def placeholders(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def render(template: str, params: dict[str, str]) -> list[str]:
    """The command as argv; each {param} filled in (quoted, so values with spaces stay one word)."""
    values = {k: shlex.quote(str(v)) if str(v) else "''" for k, v in params.items()}
    return shlex.split(template.format(**values))


def render_argv(argv: list[str], params: dict[str, str]) -> list[str]:
    """A command given as a list: each item stays one word, its {param}s filled in verbatim."""
    values = {k: str(v) for k, v in params.items()}
    return [item.format(**values) for item in argv]


def recipes_dir_of(spec_path: str | os.PathLike | None) -> Path | None:
    return Path(spec_path).resolve().parent if spec_path else None
