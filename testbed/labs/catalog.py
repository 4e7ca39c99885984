"""The teaching labs under `topologies/labs/`: one directory `NN-slug` each, holding
`guide.md` (YAML front matter, then the Markdown a student reads) and the topologies its
parts run (its own, or shared scenarios by relative path).

The front matter is data so that a lab is checked whole before anything starts (every
topology parsed, every question's facts known) and its answers come from the run, not
from prose: a lab whose guide or topology is wrong is an error naming the file and the key,
never a lab that starts and breaks halfway.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from testbed.config.loader import load_topology, parse_yaml
from testbed.config.parser import TopologyError
from testbed.config.topology_spec import Topology
from testbed.config.walker import is_digits
from testbed.labs.answers import FACTS

LABS_DIR = Path(__file__).resolve().parents[2] / "topologies" / "labs"
GUIDE = "guide.md"
_DIR_NAME = re.compile(r"^(\d{2})-[a-z0-9-]+$")
_KEYS = {"title", "rule", "parts", "predict", "questions"}


class LabError(ValueError):
    """Every problem found in a lab (or in finding one), each naming its file and key."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


@dataclass(frozen=True)
class Part:
    """One run of a lab: its topology and what it shows (`the bug: ...`, `the fix: ...`)."""

    label: str
    path: Path
    topology: Topology


@dataclass(frozen=True)
class Question:
    ask: str
    facts: tuple[str, ...]  # names in `answers.FACTS`, answered from each part's run


@dataclass(frozen=True)
class Lab:
    number: int
    slug: str
    directory: Path
    title: str
    rule: str
    predict: str
    parts: tuple[Part, ...]
    questions: tuple[Question, ...]
    body: str  # the guide's Markdown after the front matter

    @property
    def name(self) -> str:
        return self.directory.name

    @property
    def heading(self) -> str:
        """`Lab 3`, or `Lab` for a teacher's own lab whose directory has no number."""
        return f"Lab {self.number}" if self.number else "Lab"


def lab_dirs(root: Path = LABS_DIR) -> list[Path]:
    """The lab directories in number order."""
    return sorted(d for d in root.iterdir() if d.is_dir() and _DIR_NAME.match(d.name)) if root.is_dir() else []


def load_lab(directory: Path) -> Lab:
    """Read and check a lab: its front matter's keys and every part's topology."""
    guide = directory / GUIDE
    source = str(guide)
    try:
        text = guide.read_text(encoding="utf-8")
    except OSError as exc:
        raise LabError([f"{source}: cannot read the guide ({exc.strerror or exc})"]) from None
    front, body = split_front_matter(text, source)
    errors: list[str] = []
    unknown = sorted(set(front) - _KEYS)
    errors += [f"{source}: {k}: unknown key (expected one of: {', '.join(sorted(_KEYS))})" for k in unknown]
    texts = {}
    for key in ("title", "rule", "predict"):
        value = front.get(key)
        if not isinstance(value, str) or not value.strip():
            errors.append(f"{source}: {key}: expected a non-empty string")
        texts[key] = str(value or "").strip()
    parts = _parts(front.get("parts"), directory, source, errors)
    questions = _questions(front.get("questions"), source, errors)
    if errors:
        raise LabError(errors)
    named = _DIR_NAME.match(directory.name)
    return Lab(int(named.group(1)) if named else 0, directory.name.partition("-")[2], directory, texts["title"], texts["rule"],
               texts["predict"], tuple(parts), tuple(questions), body)


def split_front_matter(text: str, source: str) -> tuple[dict, str]:
    """(front matter as data, the Markdown after it). The front matter is parsed with the
    file's own line numbers, so a YAML error names the line a teacher sees."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise LabError([f"{source}: expected YAML front matter between '---' lines at the top"])
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise LabError([f"{source}: the front matter's closing '---' is missing"])
    try:
        front = parse_yaml("\n" + "".join(lines[1:end]), source)
    except TopologyError as exc:
        raise LabError(exc.errors) from None
    if not isinstance(front, dict):
        raise LabError([f"{source}: the front matter must be a mapping (title, rule, parts, predict, questions)"])
    return front, "".join(lines[end + 1:]).strip() + "\n"


def _entries(value: object, key: str, fields: tuple[str, ...], shape: str, source: str,
             errors: list[str]) -> list[tuple[str, dict]]:
    """`(key[i], item)` for each item of the list `value` that is a mapping of exactly
    `fields`; an error naming the key for the list and for each other item."""
    if not isinstance(value, list) or not value:
        errors.append(f"{source}: {key}: expected a non-empty list of {{{', '.join(fields)}}}")
        return []
    good = []
    for i, item in enumerate(value):
        if isinstance(item, dict) and set(item) == set(fields) and isinstance(item[fields[0]], str):
            good.append((f"{key}[{i}]", item))
        else:
            errors.append(f"{source}: {key}[{i}]: expected {shape}")
    return good


def _parts(value: object, directory: Path, source: str, errors: list[str]) -> list[Part]:
    parts = []
    for key, item in _entries(value, "parts", ("topology", "label"),
                              "{topology: a file relative to the lab, label: text}", source, errors):
        if not isinstance(item["label"], str) or not item["label"].strip() or not item["topology"].strip():
            errors.append(f"{source}: {key}: expected {{topology: a file relative to the lab, label: text}}")
            continue
        path = (directory / item["topology"]).resolve()
        try:
            parts.append(Part(item["label"].strip(), path, load_topology(path)))
        except TopologyError as exc:
            errors += [f"{source}: {key}.topology: {e}" for e in exc.errors]
    return parts


def _questions(value: object, source: str, errors: list[str]) -> list[Question]:
    questions = []
    for key, item in _entries(value, "questions", ("ask", "answer"), "{ask: text, answer: [fact, ...]}",
                              source, errors):
        facts = item["answer"]
        if not isinstance(facts, list) or not facts or not all(isinstance(f, str) for f in facts):
            errors.append(f"{source}: {key}.answer: expected a non-empty list of facts ({', '.join(FACTS)})")
            continue
        unknown = [f for f in facts if f not in FACTS]
        if unknown:
            errors.append(f"{source}: {key}.answer: unknown fact {', '.join(unknown)} (expected: {', '.join(FACTS)})")
            continue
        questions.append(Question(item["ask"].strip(), tuple(facts)))
    return questions


def all_labs(root: Path = LABS_DIR) -> list[Lab]:
    """Every lab, checked; the errors of every bad lab at once."""
    labs, errors = [], []
    for d in lab_dirs(root):
        try:
            labs.append(load_lab(d))
        except LabError as exc:
            errors += exc.errors
    if errors:
        raise LabError(errors)
    return labs


def find_lab(which: str, root: Path = LABS_DIR) -> Lab:
    """A lab by number (`3`, `03`) or directory name (`03-follower-failure`) of the labs
    shipped, else by the path of its directory or its guide.md (a teacher's own lab, which
    `validate` takes so: trial39 could validate one and not run it); an unknown one is an
    error that lists the labs."""
    dirs = lab_dirs(root)
    wanted = [d for d in dirs if (is_digits(which) and int(d.name[:2]) == int(which)) or d.name == which]
    if wanted:
        return load_lab(wanted[0])
    path = Path(which)
    if path.is_dir() or (path.name == GUIDE and path.is_file()):
        return load_lab(path if path.is_dir() else path.parent)
    listing = "\n".join(f"  {d.name[:2]}  {d.name[3:]}" for d in dirs) or "  (none)"
    raise LabError([f"no lab {which!r} (a lab is given by number, by name, or by the path of its directory or its "
                    f"{GUIDE}); the labs ({root}):\n{listing}"])
