"""A lab's guide as a student reads it: in the terminal (rich's Markdown) before the run, and
as `lab.md` in each part's run directory, which the run's report shows at its top. The
answers after a part are the questions of the guide with what the run observed."""
from __future__ import annotations

from rich.console import Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from testbed.labs.answers import RunRecords, answer
from testbed.labs.catalog import Lab, Part


def intro(lab: Lab) -> Group:
    """The title, the rule, the guide's body, the parts and the prediction to make."""
    parts = "\n".join(f"{i}. {p.label} (`{p.topology.name}`)" for i, p in enumerate(lab.parts, 1))
    return Group(
        Panel(Text(f"{lab.heading}: {lab.title}\n", style="bold") + Text(f"Rule: {lab.rule}"), expand=True),
        Markdown(lab.body),
        Markdown(f"## The runs\n\n{parts}"),
        Panel(Markdown(lab.predict), title="Before you run: predict", title_align="left", border_style="yellow"),
    )


def part_markdown(lab: Lab, index: int) -> str:
    """`lab.md` of the `index`-th part's run directory: which lab and part the run is, the
    guide, and the questions (the report puts it above the verdict)."""
    part = lab.parts[index]
    questions = "\n".join(f"- {q.ask}" for q in lab.questions)
    return (f"# {lab.heading}: {lab.title}\n\nPart {index + 1} of {len(lab.parts)}: **{part.label}**  \n"
            f"Rule: {lab.rule}\n\n{lab.body}\n## Before you run: predict\n\n{lab.predict}\n\n"
            f"## Questions\n\n{questions}\n")


def answers(lab: Lab, runs: list[tuple[Part, RunRecords]]) -> Group:
    """Each question, then per part the lines that answer it."""
    blocks = []
    for i, q in enumerate(lab.questions, 1):
        lines = Text(f"{i}. {q.ask}\n", style="bold")
        for part, run in runs:
            lines.append(f"   {part.label}:\n", style="cyan")
            for line in answer(run, q.facts):
                lines.append(f"     {line}\n")
        blocks.append(lines)
    return Group(*blocks)
