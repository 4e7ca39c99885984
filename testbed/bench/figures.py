"""A bench figure: several measurements of one quantity, its DESIGN section 10 target, and
whether the median meets it."""
from __future__ import annotations

import operator
import statistics
from dataclasses import dataclass, field

_OPS = {"<=": operator.le, ">=": operator.ge}


@dataclass
class Figure:
    """`runs` are the measurements; `target` is (`"<="` or `">="`, value) in the figure's unit."""

    name: str
    label: str
    unit: str
    runs: list[float]
    setup: str
    target: tuple[str, float] | None = None
    extra: dict = field(default_factory=dict)

    @property
    def median(self) -> float | None:
        return statistics.median(self.runs) if self.runs else None

    @property
    def met(self) -> bool | None:
        if self.target is None or self.median is None:
            return None
        op, value = self.target
        return _OPS[op](self.median, value)

    def to_json(self) -> dict:
        return {"label": self.label, "unit": self.unit, "min": min(self.runs, default=None),
                "median": self.median, "max": max(self.runs, default=None), "runs": self.runs,
                "target": None if self.target is None else f"{self.target[0]} {self.target[1]:g}",
                "met": self.met, "setup": self.setup, **self.extra}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
