"""Every command the docs show, read as a reader's shell would read it.

The pages are README.md, docs/*.md and recipes/*.md. A ```bash (or ```sh) block is a list of
commands: lines joined at a trailing backslash and inside an open quote, `&&` and `;` split,
a trailing `&` runs in the background, `VAR=value` before a program is that command's
environment, `# …` ends a line. A comment on a line of its own names where the commands after
it run ("# head node", "# every other node"), and the comment lines right after a command are
its documented output. A ```python block is one program. Other fences (output, layouts) are not
commands.

tests/documented/substitutions.py says what CI may change in a command before it runs it, and
tests/documented/runner.py runs them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = ("bash", "sh")
# A fence may be indented (a block inside a list item); its body is indented as much.
FENCE = re.compile(r"^([ \t]*)```(\w*)[^\n]*\n(.*?)^\1```", re.M | re.S)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def pages() -> list[Path]:
    """README.md, then docs/ and recipes/ in name order."""
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "recipes").glob("*.md")),
    ]


@dataclass(frozen=True)
class Command:
    """One documented command: `argv` as the shell splits it, `$VAR` still in it."""

    page: str  # relative to the repository, e.g. "recipes/paper.md"
    line: int  # the page's line where the command starts
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # VAR=value written before the program
    background: bool = False  # ends with `&`
    place: str = ""  # the comment line above it in its block ("head node"), if any
    output: tuple[str, ...] = ()  # the comment lines right after it: its documented output

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def program(self) -> str:
        """`gtpo-openrlhf`; for `gtpo`, `pip`, `make`, `docker` and `ray`, with the subcommand
        (`gtpo eval`, `pip install`, `docker compose`)."""
        name = self.argv[0]
        if name in ("gtpo", "pip", "make", "docker", "ray") and len(self.argv) > 1:
            return f"{name} {self.argv[1]}"
        return name

    @property
    def text(self) -> str:
        prefix = [f"{k}={v}" for k, v in self.env]
        return shlex.join([*prefix, *self.argv]) + (" &" if self.background else "")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    commands: tuple[Command, ...] = ()  # a shell block's
    code: str = ""  # a python block's source

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class _Logical:
    """A logical line being gathered: its first line number and its text so far."""

    line: int
    text: str = ""


def blocks(page: Path) -> list[Block]:
    """The page's shell and python blocks, in page order."""
    text = page.read_text()
    name = str(page.relative_to(ROOT))
    found = []
    for match in FENCE.finditer(text):
        indent, language = match.group(1), match.group(2)
        body = "".join(line.removeprefix(indent) for line in match.group(3).splitlines(True))
        first = text[: match.start()].count("\n") + 2  # the block's first line
        if language in SHELL:
            found.append(Block(name, first, language, commands=_commands(name, first, body)))
        elif language == "python":
            found.append(Block(name, first, language, code=body))
    return found


def _commands(page: str, first: int, body: str) -> tuple[Command, ...]:
    commands: list[Command] = []
    place = ""
    in_output = False  # the comment lines under a command that show what it prints (JSON)
    for start, text in _logical_lines(first, body):
        stripped = text.strip()
        if not stripped:
            place, in_output = "", False
            continue
        if stripped.startswith("#"):
            comment = stripped.lstrip("#").strip()
            follows_command = (
                commands and commands[-1].line < start and (in_output or _is_json(comment))
            )
            if follows_command and (in_output or not commands[-1].output):
                commands[-1] = _with_output(commands[-1], comment)
                in_output = True
            else:
                place, in_output = comment, False
            continue
        in_output = False
        commands += _split(page, start, text, place)
    return tuple(commands)


def _is_json(comment: str) -> bool:
    return comment.startswith(("{", "["))


def _with_output(command: Command, line: str) -> Command:
    return Command(
        command.page, command.line, command.argv, command.env, command.background,
        command.place, (*command.output, line),
    )  # fmt: skip


def _logical_lines(first: int, body: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line: physical lines joined at a trailing
    backslash and while a quote is open."""
    out: list[tuple[int, str]] = []
    current: _Logical | None = None
    for offset, raw in enumerate(body.splitlines()):
        if current is None:
            current = _Logical(first + offset)
        if raw.rstrip().endswith("\\") and not raw.lstrip().startswith("#"):
            current.text += raw.rstrip()[:-1] + " "
            continue
        current.text += raw
        if _quotes_open(current.text):
            current.text += "\n"
            continue
        out.append((current.line, current.text))
        current = None
    if current is not None:
        raise ValueError(f"line {current.line}: a command the block never finishes")
    return out


def _quotes_open(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return True
    return False


def _split(page: str, line: int, text: str, place: str) -> list[Command]:
    """One logical line → its commands (`a && b`, `a; b`, `a &`)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    commands = []
    current: list[str] = []
    for token in [*tokens, ";"]:
        if token in ("&&", ";", "&"):
            if current:
                commands.append(_command(page, line, current, background=token == "&", place=place))
            current = []
        elif token in ("|", "||", "|&"):
            raise ValueError(
                f"{page}:{line}: `{token}` in a documented command: the docs runner runs one "
                "program per command; write the pipeline's steps as separate commands"
            )
        else:
            current.append(token)
    return commands


def _command(page: str, line: int, tokens: list[str], background: bool, place: str) -> Command:
    env = []
    while tokens and ASSIGNMENT.match(tokens[0]) and len(tokens) > 1:
        name, _, value = tokens.pop(0).partition("=")
        env.append((name, value))
    return Command(page, line, tuple(tokens), tuple(env), background, place)


def expand(token: str, env: dict[str, str], where: str) -> str:
    """`$VAR` and `${VAR}` in `token` from `env`; an unknown variable is an error naming it."""

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in env:
            raise KeyError(f"{where}: ${name} is neither exported on the page nor declared")
        return env[name]

    return VARIABLE.sub(value, token)


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def all_commands() -> list[Command]:
    return [c for block in all_blocks() for c in block.commands]
