"""The README's set-up commands are what CI runs."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [c.strip() for c in re.findall(r"```bash\n(.+?)\n\s*```", section, flags=re.S)]


def test_readme_holds_exactly_two_setup_commands():
    commands = _setup_commands()
    assert len(commands) == 2, commands
    assert commands[0].strip().startswith("pip install -e .") and "radt-ext run" in commands[0]


def test_ci_runs_the_readme_test_command():
    test_command = _setup_commands()[1].strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines
