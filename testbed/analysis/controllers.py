"""The controller quorum's elections of a run (R22), each with the fault that brought it:
a run with three controllers said nowhere but in its events when, or why, another took over,
though DESIGN section 10 times exactly that (trial39)."""
from __future__ import annotations


def controller_elections(elected: list[dict], faults: list[dict]) -> list[dict]:
    """One entry per `controller-elected` event (`elected`: `t`, `node`, `term`, in order)
    after the run's first: when (`at_s`), who, its term, and the fault it followed (`after`:
    the last fault applied since the election before it that acted on a controller, or
    else the last one applied since then; none when no fault came between) with the seconds
    from it (`after_s`). `faults` are the figures' applied faults (`at_s`, `do`, `target`,
    `resolved`, `groups`)."""
    out = []
    for before, e in zip(elected, elected[1:]):
        since = [f for f in faults if before["t"] < f["at_s"] <= e["t"]]
        on_controller = [f for f in since if _touches_controller(f)]
        cause = (on_controller or since or [None])[-1]
        out.append({"at_s": e["t"], "node": e["node"], "term": e["term"],
                    "after": None if cause is None else " ".join(filter(None, (cause["do"], cause.get("target")))),
                    "after_s": None if cause is None else round(e["t"] - cause["at_s"], 3)})
    return out


def _touches_controller(fault: dict) -> bool:
    nodes = [*(fault.get("resolved") or []), *(n for g in fault.get("groups") or [] for n in g)]
    return any(str(n).startswith("controller-") for n in nodes)
