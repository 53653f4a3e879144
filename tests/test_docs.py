"""The user's pages stay true to the code: every relative link leads somewhere, every command runs.

For README.md, CONTRIBUTING.md and docs/*.md: each relative link's file exists (and its
`#anchor` names a heading there); each file path quoted from the repository exists, and each
dotted name quoted from the package (`slotop.x.y`, `from slotop.x import y`) imports; each
`slotop ...` command quoted, in a code block or inline, names a subcommand whose `--help` names
every flag it uses; each `python -m bench.X ...` names a bench module whose `--help` names its
flags. A failure names the file and line of every stale quote at once.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

from slotop.cli import build_parser
from slotop.sim.cli import build_parser as build_sim_parser
from slotop.sim.sglang.flags import build_parser as build_sglang_sim_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

# Folders of this repository a quoted path may start with (vLLM's own paths are quoted too).
REPO_FOLDERS = (
    "actions/",
    "bench/",
    "cli/",
    "collectors/",
    "sim/",
    "tests/",
    "tui/",
    "web/",
    ".ci/",
)

_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_INLINE_CODE = re.compile(r"`([^`]+)`")
_FLAG = re.compile(r"--[a-zA-Z0-9][a-zA-Z0-9-]*")
_BENCH = re.compile(r"python3? -m bench\.([A-Za-z_0-9]+)(.*)")
_BETWEEN = re.compile(r"^\s*(/|,|or)?\s*$")
_SLOTOP = re.compile(r"^(?:\S*/)?slotop(?:\s+(.*))?$")
_DOTTED = re.compile(r"slotop(?:\.[A-Za-z_]\w*)+")
_FROM_IMPORT = re.compile(r"from (slotop(?:\.\w+)*) import (\w+(?:, \w+)*)")


@dataclass(frozen=True)
class Quote:
    """A piece of a page: where it is, and its text."""

    page: Path
    line: int
    text: str
    follows: bool = False  # an inline span just after another, "/", "," or "or" between them

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _pieces(page: Path) -> tuple[list[Quote], list[Quote], list[Quote]]:
    """The page's code lines (fenced or indented), its inline code spans and its prose lines."""
    lines = page.read_text(encoding="utf-8").splitlines()
    code: list[Quote] = []
    prose: list[Quote] = []
    fenced = False
    previous_blank = True
    in_indented = False
    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            code.append(Quote(page, number, line))
            continue
        blank = not line.strip()
        starts_indented = line.startswith("    ") and not line.lstrip().startswith(("- ", "* "))
        in_indented = starts_indented and (previous_blank or in_indented)
        if in_indented:
            code.append(Quote(page, number, line.strip()))
        elif not blank:
            prose.append(Quote(page, number, line))
        previous_blank = blank
    return code, list(_inline_spans(prose)), prose


def _inline_spans(prose: list[Quote]) -> Iterator[Quote]:
    """Inline code spans of the prose, read paragraph by paragraph, so a span may wrap a line."""
    paragraph: list[Quote] = []
    for quote in [*prose, None]:
        if quote is not None and (not paragraph or paragraph[-1].line == quote.line - 1):
            paragraph.append(quote)
            continue
        text = "\n".join(piece.text for piece in paragraph)
        end = None
        for match in _INLINE_CODE.finditer(text):
            line = paragraph[0].line + text.count("\n", 0, match.start())
            words = " ".join(match.group(1).split())
            follows = end is not None and _BETWEEN.match(text[end : match.start()]) is not None
            yield Quote(paragraph[0].page, line, words, follows)
            end = match.end()
        paragraph = [quote] if quote is not None else []


def _all_pieces() -> tuple[list[Quote], list[Quote], list[Quote]]:
    code: list[Quote] = []
    spans: list[Quote] = []
    prose: list[Quote] = []
    for page in PAGES:
        page_code, page_spans, page_prose = _pieces(page)
        code += page_code
        spans += page_spans
        prose += page_prose
    return code, spans, prose


def _commands(quotes: list[Quote], *, split_shell: bool) -> Iterator[Quote]:
    """The shell commands quoted: a code line cut at `&&`, `;`, `|` and `#`; or a whole span."""
    for quote in quotes:
        text = quote.text
        if split_shell:
            text = text.split(" #", 1)[0]
            parts = re.split(r"&&|;|\|", text)
        else:
            parts = [text]
        for part in parts:
            yield Quote(quote.page, quote.line, part.strip())


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in ("L", "N"))
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """Every heading anchor of a page, GitHub's way (a repeated one gets -1, -2, …)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        slug = github_slug(line.lstrip("#").replace("`", ""))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def test_relative_links_lead_to_files_and_headings() -> None:
    broken: list[str] = []
    for page in PAGES:
        for quote in _pieces(page)[2]:
            for match in _LINK.finditer(quote.text):
                target = match.group(1)
                if re.match(r"[a-z]+:", target):
                    continue
                path_part, _, anchor = target.partition("#")
                path = (page.parent / unquote(path_part)).resolve() if path_part else page
                if not path.exists():
                    broken.append(f"{quote.where()}: {target}: no file {path}")
                elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                    broken.append(f"{quote.where()}: {target}: no heading #{anchor} in {path.name}")
    assert not broken, "broken links:\n" + "\n".join(broken)


_DOC_POINTER = re.compile(r'(docs/[\w-]+\.md|README(?:\.md)?)(?::\s*"([^"]+)")?', re.S)
PRODUCT_FOLDERS = ("actions", "cli", "collectors", "config", "sim", "tui", "web")


def test_the_codes_pointers_into_the_docs_lead_to_a_page_and_its_heading() -> None:
    """A help text or docstring that sends the reader to `docs/page.md: "Heading"` (the README
    once held those sections) names a page that exists and a heading it has."""
    broken: list[str] = []
    sources = [ROOT / "errors.py", *(p for f in PRODUCT_FOLDERS for p in (ROOT / f).rglob("*.py"))]
    for source in sources:
        # A help text is written in pieces: join adjacent string literals before matching.
        text = re.sub(r"['\"]\s*\n\s*['\"]", "", source.read_text(encoding="utf-8"))
        for match in _DOC_POINTER.finditer(text):
            page_name, heading = match.group(1), match.group(2)
            where = f"{source.relative_to(ROOT)}: {match.group(0)!r}"
            page = ROOT / (page_name if page_name.endswith(".md") else "README.md")
            if not page.exists():
                broken.append(f"{where}: no file {page_name}")
            elif heading is not None and (
                github_slug(" ".join(heading.replace("`", "").split())) not in anchors(page)
            ):
                broken.append(f"{where}: no heading {heading!r} in {page.name}")
    assert not broken, "pointers to nowhere:\n" + "\n".join(broken)


def test_quoted_repository_paths_exist() -> None:
    _, spans, _ = _all_pieces()
    missing: list[str] = []
    for quote in spans:
        path = quote.text.removeprefix("slotop/")
        if " " in path or not path.startswith(REPO_FOLDERS) or any(c in path for c in "*<{"):
            continue
        path = path.split("::", 1)[0].rstrip(".,:")
        if not (ROOT / path).exists():
            missing.append(f"{quote.where()}: `{quote.text}`: no such file in the repository")
    assert not missing, "\n".join(missing)


def _imports(dotted: str) -> bool:
    """Whether `dotted` names a module of slotop, or a name one holds (a function, a class)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found: object = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                continue  # no such module: the rest may be names it holds
            raise
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_quoted_module_paths_import() -> None:
    _, spans, _ = _all_pieces()
    missing: list[str] = []
    for quote in spans:
        statement = _FROM_IMPORT.fullmatch(quote.text)
        if statement is not None:
            module, names = statement.groups()
            dotted = [f"{module}.{name}" for name in names.split(", ")]
        else:
            named = _DOTTED.fullmatch(quote.text.split("(", 1)[0])  # `f(path)` quotes f
            dotted = [named.group(0)] if named is not None else []
        missing += [
            f"{quote.where()}: `{quote.text}`: {name} does not import"
            for name in dotted
            if not _imports(name)
        ]
    assert not missing, "\n".join(missing)


@cache
def slotop_help() -> dict[str, str]:
    """Each subcommand's `--help`, and the top level's as `""`, from the parsers themselves."""
    parser = build_parser()
    helps = {
        "": parser.format_help(),
        "sim": build_sim_parser().format_help(),
        "sim --engine sglang": build_sglang_sim_parser().format_help(),
    }
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                helps.setdefault(name, sub.format_help())
    return helps


def _names_flag(help_text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


def _slotop_problems(quote: Quote) -> list[str]:
    """What is wrong with one quoted `slotop ...` command: a subcommand or flags it lacks."""
    match = _SLOTOP.match(quote.text)
    if match is None:
        return []
    words = (match.group(1) or "").split()
    if words and words[0].endswith(":"):
        return []  # slotop's own output quoted ("slotop web: serving ..."), not a command
    helps = slotop_help()
    first = words[0] if words else ""
    if first in ("", "--help", "-h", "--version"):
        command, rest = "", words
    elif first in helps:
        command, rest = first, words[1:]
    elif first.startswith(("-", "http", "[")) or first.isupper():
        command, rest = "attach", words  # `slotop [URL]` is `slotop attach [URL]`
    else:
        return [f"{quote.where()}: `{quote.text}`: slotop has no subcommand {first!r}"]
    if command == "sim" and "sglang" in rest:
        command = "sim --engine sglang"  # SGLang's flag names
    problems = []
    for word in rest:
        for flag in _FLAG.findall(word.split("=", 1)[0]):
            if not _names_flag(helps[command], flag):
                name = f"slotop {command}".strip()
                problems.append(f"{quote.where()}: `{quote.text}`: `{name} --help` names no {flag}")
    return problems


def _with_their_command(spans: list[Quote]) -> Iterator[Quote]:
    """The spans, a span of flags alone read with the command quoted just before it:
    `slotop budget --model M` / `--url U` is `slotop budget --url U`."""
    subcommand: str | None = None
    for quote in spans:
        match = _SLOTOP.match(quote.text)
        if match is not None:
            words = (match.group(1) or "").split()
            subcommand = words[0] if words and not words[0].startswith("-") else ""
            yield quote
        elif subcommand is not None and quote.follows and quote.text.startswith("--"):
            yield Quote(
                quote.page, quote.line, f"slotop {subcommand} {quote.text}".replace("  ", " ")
            )
        else:
            subcommand = None


def test_quoted_slotop_commands_exist_with_their_flags() -> None:
    code, spans, _ = _all_pieces()
    quotes = [*_commands(code, split_shell=True), *_with_their_command(spans)]
    seen = [q for q in quotes if _SLOTOP.match(q.text)]
    assert len(seen) > 20, f"only {len(seen)} slotop commands found: is the page reader broken?"
    problems = [problem for quote in quotes for problem in _slotop_problems(quote)]
    assert not problems, "stale slotop commands in the docs:\n" + "\n".join(problems)


_BENCH_HELP = """
import contextlib, io, importlib, json, sys
helps = {}
for name in sys.argv[1:]:
    out = io.StringIO()
    sys.argv = [name, "--help"]
    try:
        module = importlib.import_module("bench." + name)
        with contextlib.redirect_stdout(out):
            module.main()
    except SystemExit:
        pass
    except Exception as exc:
        out.write(f"FAILED: {exc!r}")
    helps[name] = out.getvalue()
print(json.dumps(helps))
"""


def bench_helps(names: set[str]) -> dict[str, str]:
    """Each named bench's `--help`, all read in one child process (no bench is run)."""
    known = {p.stem for p in (ROOT / "bench").glob("*.py")}
    wanted = sorted(names & known)
    if not wanted:
        return {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT.parent), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", _BENCH_HELP, *wanted],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    helps: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return helps


@pytest.mark.slow
def test_quoted_bench_commands_exist_with_their_flags() -> None:
    code, spans, _ = _all_pieces()
    uses: list[tuple[Quote, str, str]] = []
    for quote in [*_commands(code, split_shell=True), *_commands(spans, split_shell=False)]:
        for match in _BENCH.finditer(quote.text):
            uses.append((quote, match.group(1), match.group(2)))
    assert uses, "no bench command found: is the page reader broken?"
    helps = bench_helps({name for _, name, _ in uses})
    problems: list[str] = []
    for quote, name, rest in uses:
        help_text = helps.get(name)
        if help_text is None:
            problems.append(f"{quote.where()}: `{quote.text}`: no module bench/{name}.py")
            continue
        if not help_text.startswith("usage:"):
            problems.append(f"{quote.where()}: bench.{name} --help failed: {help_text[-300:]}")
            continue
        for word in rest.split():
            for flag in _FLAG.findall(word.split("=", 1)[0]):
                if not _names_flag(help_text, flag):
                    problems.append(
                        f"{quote.where()}: `{quote.text}`: `bench.{name} --help` names no {flag}"
                    )
    assert not problems, "stale bench commands in the docs:\n" + "\n".join(problems)


def _readme_commands() -> list[str]:
    """The commands quoted (indented) in the README's first lines."""
    opening = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:15]
    return [line.strip() for line in opening if line.startswith("    ")]


def test_the_readme_opens_with_the_two_commands_a_newcomer_needs() -> None:
    assert _readme_commands()[:2] == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/slotop demo",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .ci/install-vllm && "
        ".ci/install-sglang && .ci/install-prometheus && .ci/install-chromium && "
        ".venv/bin/python -m pytest -n 4 --dist loadgroup",
    ]


def test_ci_runs_the_readme_s_test_command() -> None:
    readme_pytest = _readme_commands()[1].rsplit(" && ", 1)[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert [line for line in ci if "-m pytest" in line] == [readme_pytest]


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to docs/"


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("## slotop snapshot --json", "slotop-snapshot---json"),
        ("## Before and after: what it compares", "before-and-after-what-it-compares"),
        ("## `slotop web`", "slotop-web"),
        ("## Sweeps, and tune", "sweeps-and-tune"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading.lstrip("#").replace("`", "")) == slug
