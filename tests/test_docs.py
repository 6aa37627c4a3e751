"""The documentation holds together: a short README whose links, commands and options exist, and figures that agree
where two documents state them (README.md and docs/performance.md: the `make test` and `make demo` measurements)."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINKED = [README, ROOT / "CHANGELOG.md", *DOCS]

README_MAX_LINES = 200
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def _code_blocks(text: str) -> list[str]:
    """The fenced code blocks' contents, in order."""
    blocks, current = [], None
    for line in text.splitlines():
        if FENCE.match(line):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in _prose_lines(_text(path)) if re.match(r"#{1,6} ", line)}


def _relative_links(path: Path) -> list[str]:
    links = []
    for line in _prose_lines(_text(path)):
        links += [t for t in LINK.findall(line) if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]
    return links


def _section(text: str, title: str) -> str:
    """The body of the ``## title`` section (up to the next ``## ``)."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert m, f"README.md has no section '## {title}'"
    return m.group(1)


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    from toolkit.cli import build_parser

    return build_parser()


@pytest.fixture(scope="module")
def commands(parser) -> dict[str, argparse.ArgumentParser]:
    """The CLI's subcommands and their parsers, from the parser itself."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(subs) == 1
    return dict(subs[0].choices)


def test_readme_is_a_short_page():
    n = len(_text(README).splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; at most {README_MAX_LINES} (details go to docs/)"


@pytest.mark.parametrize("doc", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    broken = []
    for link in _relative_links(doc):
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            broken.append(f"{link} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link} (no heading with that anchor)")
    assert not broken, f"{doc.relative_to(ROOT)}: broken links: {broken}"


def test_links_are_checked_at_all():
    """The link pattern finds the README's links (a pattern that matched nothing would pass every file)."""
    links = _relative_links(README)
    assert "docs/methods.md" in links and "PRIVACY.md" in links and len(links) >= 10, links


def _table_commands() -> list[str]:
    rows = [line for line in _section(_text(README), "Commands").splitlines() if line.startswith("| `")]
    return [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]


def test_readme_command_table_matches_the_cli(commands):
    named = _table_commands()
    assert len(named) >= 10, named
    assert len(named) == len(set(named)), f"a command is listed twice: {named}"
    unknown = sorted(set(named) - set(commands))
    assert not unknown, f"README's command table names commands the CLI does not have: {unknown}"
    missing = sorted(set(commands) - set(named))
    assert not missing, f"CLI commands missing from README's command table: {missing}"


def _toolkit_invocations(text: str) -> list[list[str]]:
    """Every ``python -m toolkit CMD ...`` line of the fenced code blocks (continuations joined), as tokens after
    ``toolkit``; comments dropped."""
    calls = []
    for block in _code_blocks(text):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.split("#", 1)[0]
            if "python -m toolkit " in line:
                calls.append(shlex.split(line.split("python -m toolkit ", 1)[1]))
    return calls


def test_readme_command_lines_use_options_the_cli_has(parser, commands):
    calls = _toolkit_invocations(_text(README))
    assert any(c and c[0] == "audit" for c in calls), "README shows no `python -m toolkit audit` example"
    wrong = []
    for tokens in calls:
        name = tokens[0]
        if name.startswith("-"):  # python -m toolkit --help
            wrong += [f"toolkit {t}" for t in tokens if t not in parser._option_string_actions]
            continue
        if name not in commands:
            wrong.append(f"unknown command {name!r}")
            continue
        known = set(commands[name]._option_string_actions)
        wrong += [f"{name} {t}" for t in tokens[1:] if t.startswith("--") and t.split("=", 1)[0] not in known]
    assert not wrong, f"README's command lines use options the CLI does not accept: {wrong}"


# -- figures stated twice ------------------------------------------------------------------------------------------

DURATION = re.compile(r"(?:(\d+) h )?(\d+) min (\d+) s")
COMMIT_DATE = re.compile(r"`([0-9a-f]{7,40})`, (\d{4}-\d{2}-\d{2})")


def _seconds(text: str) -> int:
    m = DURATION.search(text)
    assert m, f"no duration 'N min N s' in: {text}"
    h, mnt, s = (int(g) if g else 0 for g in m.groups())
    return 3600 * h + 60 * mnt + s


def _readme_line(command: str) -> str:
    lines = [line for line in _prose_lines(_text(README)) if line.startswith(f"`{command}`") and DURATION.search(line)]
    assert len(lines) == 1, f"README.md should state `{command}`'s measured time on one line starting with it: {lines}"
    return lines[0]


def _performance_row(command: str) -> list[str]:
    rows = [line for line in _text(ROOT / "docs" / "performance.md").splitlines()
            if line.startswith(f"| `{command}` |")]
    assert len(rows) == 1, f"docs/performance.md should have one table row for `{command}`: {rows}"
    return [c.strip() for c in rows[0].strip("|").split("|")]


@pytest.mark.parametrize("command", ["make test", "make demo"])
def test_measured_time_commit_and_date_agree_between_readme_and_performance(command):
    line, row = _readme_line(command), _performance_row(command)
    assert _seconds(line) == _seconds(row[1]), (line, row)
    readme_commit = COMMIT_DATE.search(line)
    assert readme_commit, f"README's `{command}` line names no commit and date: {line}"
    assert readme_commit.groups() == COMMIT_DATE.search(row[2]).groups(), (line, row)


def test_test_count_agrees_between_readme_and_performance():
    count = re.compile(r"([\d,]+) tests")
    line, row = _readme_line("make test"), _performance_row("make test")
    assert count.search(line).group(1) == count.search(row[1]).group(1), (line, row)


def test_duration_parser():
    assert _seconds("27 min 21 s of notebooks") == 1641
    assert _seconds("took 1 h 2 min 3 s") == 3723
    with pytest.raises(AssertionError):
        _seconds("about half an hour")


def test_readme_and_performance_state_the_newest_measurement():
    """The README's and docs/performance.md's figures for `make test`, `make test-fast`, `make demo` and the quick
    start are the newest record of `make measure` (docs/measurements.json), word for word as benchmarks/measure.py
    writes them."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("measure", ROOT / "benchmarks" / "measure.py")
    measure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measure)
    newest = json.loads((ROOT / "docs" / "measurements.json").read_text(encoding="utf-8"))[-1]
    readme = _text(README).splitlines()
    for command, line in measure.readme_lines(newest).items():
        assert line in readme, f"README.md does not state the newest `{command}` measurement: {line}"
    perf = _text(ROOT / "docs" / "performance.md").splitlines()
    for command, row in measure.performance_rows(newest).items():
        assert row in perf, f"docs/performance.md does not state the newest `{command}` measurement: {row}"


# ------------------------------------------------------------------------------------------------------------------
# the documents speak of the software, not of its making (issue 55)
# ------------------------------------------------------------------------------------------------------------------

_ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|[a-z]+teenth|"
             "twentieth|[0-9]+(?:st|nd|rd|th)")
#: A development session named by its place or its relation to another one (an ordinal, "this", "an earlier", …).
DEV_SESSION = re.compile(rf"\b(?:{_ORDINALS}|this|earlier|previous|next|last|one|an?|that|same|every|each|later)"
                         r" sessions?\b", re.IGNORECASE)
#: The product's and the tools' own sessions: a vocabulary review session, a browser's, a kernel's, an HTTP client's.
PRODUCT_SESSION = re.compile(r"review sessions?|vocabulary sessions?|jupyter|kernel|browser|requests\.session|selenium",
                             re.IGNORECASE)


def _development_wording(line: str) -> bool:
    return bool(DEV_SESSION.search(line)) and not PRODUCT_SESSION.search(line)


def _tracked_text_files() -> list[Path]:
    """Every file git tracks that reads as UTF-8 text (no NUL byte)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = []
    for name in sorted(n for n in out.decode().split("\0") if n):
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def test_the_pattern_finds_development_wording_and_spares_the_product():
    """The check below could pass by matching nothing: the pattern must flag sentences of the kind the project
    held, and leave the review session and the browser's alone."""
    said = "as measured in " + "the eighth" + " session"
    assert _development_wording(said)
    assert _development_wording("An earlier " + "session" + " found it")
    assert _development_wording("docs/results.md, twelfth and thirteenth " + "sessions")
    assert _development_wording("Not run this " + "session")
    assert not _development_wording("a second review " + "session" + " resumes where the first stopped")
    assert not _development_wording("the browser's " + "session" + " cookie")
    assert not _development_wording("row['sessions'] counts the reviewer's sittings")


def test_no_tracked_file_speaks_of_development_sessions():
    """Nowhere in the project (docs, configs, data READMEs, code, tests, notebooks) does a sentence speak of how it
    was developed: a reader has commits and dates."""
    files = _tracked_text_files()
    assert len(files) > 100 and ROOT / "README.md" in files, len(files)
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _development_wording(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "development-session wording (give the commit and date instead):\n" + "\n".join(found)


def test_results_opens_with_current_figures_not_a_diary():
    """docs/results.md is one section per experiment, each naming its date and commit; its history is CHANGELOG.md's
    (no section headed by a date, the diary's form)."""
    text = _text(ROOT / "docs" / "results.md")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    assert len(sections) >= 10, len(sections)
    dated_heading = [s.splitlines()[0] for s in sections if re.match(r"\d{4}-\d{2}-\d{2}", s)]
    assert not dated_heading, f"sections headed by a date (history goes to CHANGELOG.md): {dated_heading}"
    missing = [s.splitlines()[0] for s in sections
               if not (re.search(r"\b20\d\d-\d\d-\d\d\b", s) and re.search(r"`[0-9a-f]{7,40}`", s))]
    assert not missing, f"docs/results.md sections without a date and a commit: {missing}"
