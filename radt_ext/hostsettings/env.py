"""`env`: environment variables of a variant's workloads (`OMP_NUM_THREADS`, ...), swept per variable:
`env: {OMP_NUM_THREADS: [1, 4]}`. Always applicable; nothing of the host changes."""
from __future__ import annotations

import re

from radt_ext.hostsettings.base import Applied, Where

KEY = "env"
SCOPE = "process"
PREFIX = "env."
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse(raw) -> str:
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ValueError(f"expected a value (text or a number), got {raw!r}")
    return str(raw)


def check(value: str, where: Where) -> str | None:
    return None


def apply(value: str, where: Where, save, name: str = "") -> Applied:
    return Applied(host=value, env={name: value})


def restore(record: dict) -> str:
    return ""
