"""Which listeners a run gets: the `--listeners` spec checked against what works on this machine.

Kept apart from the recorder (and what it imports) so that `radt-ext run` refuses bad input and starts
the workload having imported little.
"""
from __future__ import annotations

from listeners import registry
from listeners.base import Listener, ListenerError, Target
from radt_ext.errors import UsageError


def check_input(spec: str | None, interval: float | None, target: Target) -> list[registry.Selection] | None:
    """What `select_listeners` refuses as bad input, without probing any listener: a malformed spec or
    interval, a GPU that does not exist. Returns the parsed spec (None: every available listener)."""
    try:
        selections = registry.parse_spec(spec)
        if interval is not None:
            registry.parse_interval(str(interval), where="--interval")
    except registry.SpecError as exc:
        raise UsageError(str(exc)) from None
    try:
        registry.check_target(target)
    except ListenerError as exc:
        raise UsageError(str(exc)) from None
    return selections


def select_listeners(spec: str | None, interval: float | None, target: Target) -> tuple[list[Listener], dict[str, str]]:
    """Listeners to run, and {name: reason} for those skipped.

    With no spec every available listener runs; a listener named explicitly that
    cannot run here is an error, raised before anything starts.
    """
    return choose(check_input(spec, interval, target), interval, target)


def choose(selections: list[registry.Selection] | None, interval: float | None,
           target: Target) -> tuple[list[Listener], dict[str, str]]:
    """`select_listeners` for a spec `check_input` already passed (its selections)."""
    if interval is not None:
        interval = registry.parse_interval(str(interval), where="--interval")
    explicit = selections is not None
    if selections is None:
        selections = [registry.Selection(name, None) for name in registry.LISTENERS]
    chosen: list[Listener] = []
    skipped: dict[str, str] = {}
    for sel in selections:
        reason = registry.availability(sel.name, target)
        if reason:
            if explicit:
                raise UsageError(
                    f"listener {sel.name!r} cannot run here: {reason}; drop it from --listeners "
                    "(`radt-ext listeners` shows what works)"
                )
            skipped[sel.name] = reason
            continue
        cls = registry.load(sel.name)
        if sel.interval is not None:
            chosen.append(cls(target, sel.interval))
        else:
            chosen.append(cls(target, None if interval is None else max(interval, cls.min_interval)))
    return chosen, skipped
