"""BENCHMARKS.md stays a page a newcomer reads at a glance: the hot paths alone, short, undated,
and naming only commands that exist. The studies live in elden_il/studies/STUDIES.md and what
later runs replaced in docs/benchmarks-history.md (the rule is written at the top of
BENCHMARKS.md). Pure file reading: milliseconds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick  # scripts/test.sh --quick: a contributor's first check, in seconds

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "BENCHMARKS.md"
STUDIES = ROOT / "elden_il" / "studies" / "STUDIES.md"
HISTORY = ROOT / "docs" / "benchmarks-history.md"

LINE_BUDGET = 450
"""BENCHMARKS.md's most lines. A new hot path fits by saying less elsewhere or by moving what a
newer run replaced to the history, not by raising this."""
DATED_LINES_ALLOWED = 0
"""Lines of BENCHMARKS.md that may hold a date: none. A measurement is told by its machine (and
commit); when it ran is the history's to say."""
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
MODULE = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
PATH = re.compile(r"(?<![\w./-])((?:benchmarks|elden_il|capture|env|tests|scripts)/[\w./-]*?\.(?:py|sh))\b")
COMMAND = re.compile(r"^ {4}\S*.*(?:python3?\s+-m|bash |dvc |\.ci/run)", re.M)
UNCOMMANDED = {"Summary against the targets"}
"""BENCHMARKS.md's sections that need no command of their own (every row of the summary is
measured in a section below)."""


def exists(relative: str) -> bool:
    """Whether a file the pages name is in the tree."""
    return (ROOT / relative).is_file()


def module_exists(module: str) -> bool:
    """Whether ``python -m module`` finds a module of this repository: a file, or a package
    that runs (``__main__.py``) or imports (``__init__.py``)."""
    base = module.replace(".", "/")
    return any(exists(f"{base}{tail}") for tail in (".py", "/__main__.py", "/__init__.py"))


def ours(module: str) -> bool:
    """A module of this repository (not pytest or pip), and not a placeholder such as
    ``benchmarks.bench_NAME``."""
    return (ROOT / module.split(".")[0]).is_dir() and not any(part.isupper() for part in re.split(r"[._]", module))


def missing(page: Path) -> list[str]:
    """The modules and files ``page`` names that the tree does not hold."""
    text = page.read_text()
    gone = [f"python -m {m}" for m in sorted(set(MODULE.findall(text))) if ours(m) and not module_exists(m)]
    return gone + [p for p in sorted(set(PATH.findall(text))) if not exists(p)]


def sections(text: str) -> dict[str, str]:
    """Each ``## `` section's title and its text, subsections included."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_benchmarks_md_stays_within_its_line_budget():
    lines = BENCHMARKS.read_text().splitlines()
    assert len(lines) <= LINE_BUDGET, (
        f"BENCHMARKS.md has {len(lines)} lines, over its budget of {LINE_BUDGET}: move what a newer run replaced "
        "to docs/benchmarks-history.md, and win rates or learning outcomes to elden_il/studies/STUDIES.md"
    )


def test_benchmarks_md_holds_no_dates():
    dated = [f"{n}: {line}" for n, line in enumerate(BENCHMARKS.read_text().splitlines(), 1) if DATE.search(line)]
    assert len(dated) <= DATED_LINES_ALLOWED, (
        "BENCHMARKS.md says what holds today, undated (a measurement is told by its machine and commit); "
        "dates and the narrative around them belong in docs/benchmarks-history.md:\n" + "\n".join(dated)
    )


def test_every_module_and_file_the_pages_name_exists():
    for page in (BENCHMARKS, STUDIES):
        assert not missing(page), f"{page.name} names what the tree does not hold: {missing(page)}"


def test_every_benchmarks_section_gives_the_command_that_measures_it():
    bare = [
        t for t, body in sections(BENCHMARKS.read_text()).items() if t not in UNCOMMANDED and not COMMAND.search(body)
    ]
    assert not bare, f"BENCHMARKS.md's sections without a command line (indented, `python -m ...`): {bare}"


def test_every_study_names_its_command_and_no_heading_is_dated():
    text = STUDIES.read_text()
    bare = [t for t, body in sections(text).items() if t != "Summary against the targets" and "python -m" not in body]
    assert not bare, f"STUDIES.md's questions without the command that reproduces them: {bare}"
    dated = [line for line in text.splitlines() if line.startswith("#") and DATE.search(line)]
    assert not dated, f"STUDIES.md's headings name questions, not dates: {dated}"


def test_the_rule_is_written_where_a_contributor_reads_it():
    head = BENCHMARKS.read_text().split("\n## ", 1)[0]
    for page in ("elden_il/studies/STUDIES.md", "docs/benchmarks-history.md", "tests/test_benchmarks_page.py"):
        assert page in head, f"BENCHMARKS.md's opening no longer points to {page}"
    assert HISTORY.is_file() and STUDIES.is_file()
