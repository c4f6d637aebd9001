"""Every decision in words: the dry run's plan table, and the tags a group run carries."""
from __future__ import annotations

from radt_ext.packing import chains
from radt_ext.packing.planner import BASES, Decision, Plan
from radt_ext.sweep import console as out


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "?" if value is None else fmt.format(value)


def plan_table(plan: Plan):
    table = out.table("gpu", "#", "mode", "job", "start s", "start-up s", "active s", "pred. wall s", "pred. slowdown",
                      "pred. energy J", "follows the job before", "why",
                      title=f"pack plan (max_slowdown {plan.max_slowdown:g}: a job's wall time in the queue over its "
                            "wall time alone, start-up and pauses included; start: after its group's start; each job "
                            "follows the one before: its start-up beside that one's active phase, side by side where "
                            "measured, or on trial under the guard)")
    for gpu, decisions in plan.gpus.items():
        for n, d in enumerate(decisions):
            for i, j in enumerate(d.jobs):
                ph = chains.phases(j.profile) if j.profile else None
                link = d.links[i] if d.links and i < len(d.links) else None
                table.add_row(gpu if n == 0 and i == 0 else "", n if i == 0 else "",
                              d.mode if i == 0 else "", j.name,
                              _num(d.starts[i] if d.starts else 0.0, "{:.1f}"),
                              _num(ph.startup if ph else None, "{:.1f}"), _num(ph.active if ph else None, "{:.1f}"),
                              _num(d.wall_s(i), "{:.1f}"), _num(d.slowdowns[i]), _num(d.energies[i], "{:.0f}"),
                              link.text() if link is not None else "-", d.reason if i == 0 else "")
    return table


def totals_line(plan: Plan, plain=None) -> str:
    """The plan's totals; with `plain` (the store's plain pass of these jobs), against it too."""
    packed, alone = plan.predicted_makespan_s(), plan.one_per_gpu_makespan_s()
    energy = [d.energy_j for d in plan.decisions]
    jobs = sum(len(d.jobs) for d in plan.decisions)
    shared = sum(len(d.jobs) for d in plan.decisions if len(d.jobs) > 1)
    line = f"{jobs} jobs in {len(plan.decisions)} groups on {len(plan.gpus)} GPU(s), {shared} in chains"
    bases = [d.basis for d in plan.decisions if len(d.jobs) > 1]
    if bases:
        line += " (" + ", ".join(f"{bases.count(b)} {b}" for b in BASES if b in bases) + ")"
    if packed is not None and alone:
        line += (f"; predicted makespan (wall) {packed:.1f} s against {alone:.1f} s one job per GPU at a time "
                 f"(ratio {packed / alone:.2f})")
        if plan.overhead_s:
            line += f", each group run {plan.overhead_s:.1f} s of its own"
    else:
        line += "; makespan not predicted (jobs without a profile run alone first)"
    if None not in energy and energy:
        line += f"; predicted GPU energy (whole runs) {sum(energy):.0f} J"
    if plain is not None:
        from radt_ext.packing.against_plain import planned

        line += f"; {planned(plan, plain)}"
    return line


def group_tags(d: Decision, max_slowdown: float, guard: bool | None = None) -> dict[str, str]:
    tags = {"pack.decision": d.summary, "pack.reason": d.reason, "pack.source": d.source,
            "pack.max_slowdown": f"{max_slowdown:g}", "pack.predicted_slowdown": f"{d.max_slowdown:.4f}",
            "pack.basis": d.basis_text}
    if d.evidence:
        tags["pack.evidence"] = ",".join(d.evidence)
    if d.overhead_s:
        tags["pack.predicted_overhead_s"] = f"{d.overhead_s:.2f}"
    if guard is not None and len(d.jobs) > 1:
        tags["pack.guard"] = "on" if guard else "off"
    if d.energy_j is not None:
        tags["pack.predicted_energy_j"] = f"{d.energy_j:.1f}"
    if d.makespan_s is not None:
        tags["pack.predicted_makespan_s"] = f"{d.makespan_s:.2f}"
    return tags


def job_tags(d: Decision, i: int) -> dict[str, str]:
    tags = {"pack.decision": d.summary, "pack.reason": d.reason, "pack.predicted_slowdown": f"{d.slowdowns[i]:.4f}",
            "pack.basis": d.basis_text}
    if d.energies[i] is not None:
        tags["pack.predicted_energy_j"] = f"{d.energies[i]:.1f}"  # over the whole run
    if d.wall_s(i) is not None:
        tags["pack.predicted_wall_s"] = f"{d.wall_s(i):.2f}"
    if d.offset_s(i) is not None:
        tags["pack.start_offset_s"] = f"{d.offset_s(i):.2f}"
    if d.work_left_s(i) is not None:  # and once the job before has this much of its active phase (alone) to go
        tags["pack.start_work_left_s"] = f"{d.work_left_s(i):.2f}"
    if d.links and i < len(d.links) and d.links[i] is not None:
        tags["pack.link"] = d.links[i].text()
    if d.jobs[i].profile is not None:
        tags["pack.profile_run_id"] = d.jobs[i].profile.run_id
    return tags
