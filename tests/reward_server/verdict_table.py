"""The verdict table (``verdicts.tsv``): every row of the reward server's corpora and a fixed
generated set, each with this server's verdict and math-verify's, checked in so that a change
that moves any verdict shows in its diff.

``test_rs_verdict_table.py`` (default stage) recomputes this server's verdicts and fails on any
that differs from the table; ``python benchmarks/verdict_table.py --write`` writes the table
again, math-verify's column included, to commit with the change that moved them.

A row is identified by its corpus, its index there and a digest of its texts; its answer and
reference are shown shortened, on one line. A pair's verdict is ``equal reason``; a whole
completion's ``format+accuracy reason``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from fractions import Fraction
from pathlib import Path

from rs_corpora import Case, corpora, score_cases

TABLE = Path(__file__).with_name("verdicts.tsv")
COLUMNS = ("corpus", "row", "digest", "answer", "reference", "expected", "server", "math_verify")
_SHOWN = 72  # characters of an answer or reference the table shows
_GENERATED = "generated pairs"


def generated(seed: int = 2026, per_class: int = 24) -> list[Case]:
    """A fixed set of generated pairs (the same on every machine): values of several classes
    in another spelling (expected equal), with one number changed (expected different), and
    with a remark that states another value (expected different)."""
    rng = random.Random(seed)
    cases: list[Case] = []

    def add(answer: str, reference: str, expected: bool, note: str) -> None:
        cases.append(Case(answer, reference, expected, _GENERATED, note))

    for _ in range(per_class):
        n = rng.randint(-(10**6), 10**6)
        add(f"{n:,}", str(n), True, "integer with separators")
        add(f"\\boxed{{{n + rng.choice([-1, 1])}}}", str(n), False, "integer off by one")
        p, q = rng.randint(1, 99), rng.randint(2, 99)
        value = Fraction(p, q)
        add(f"{value.numerator}/{value.denominator}", f"\\frac{{{p}}}{{{q}}}", True, "fraction")
        add(f"\\frac{{{p + 1}}}{{{q}}}", f"\\frac{{{p}}}{{{q}}}", False, "fraction changed")
        a, b = rng.randint(2, 9), rng.choice([2, 3, 5, 6, 7, 10, 11, 13])
        add(f"{a}*sqrt({b})", f"\\sqrt{{{a * a * b}}}", True, "plain-text root")
        add(f"{a}\\sqrt{{{b + 1 if b != 3 else 5}}}", f"{a}\\sqrt{{{b}}}", False, "root changed")
        lo, hi = sorted(rng.sample(range(-20, 21), 2))
        add(f"{lo} \\le x < {hi}", f"[{lo}, {hi})", True, "inequality as an interval")
        add(f"{lo} < x < {hi}", f"[{lo}, {hi})", False, "open end against closed")
        m, c = rng.randint(1, 9), rng.randint(1, 9)
        add(f"{m}x + {c} = y", f"y = {m}x + {c}", True, "equation written backwards")
        add(f"y = {m}x + {c + 1}", f"y = {m}x + {c}", False, "equation changed")
        k = rng.randint(1, 500)
        add(f"{k} \\text{{ cm}}", f"{k}", True, "unit where the reference has none")
        add(f"{k} (which is {k + 1})", f"{k + 1}", False, "remark stating another value")
    return cases


def all_cases() -> list[Case]:
    """Every corpus's cases in the benchmark's order, then the generated pairs."""
    return [case for cases in corpora().values() for case in cases] + generated()


def identities(cases: list[Case]) -> list[tuple[str, int, str]]:
    """(corpus, index in it, digest of the texts) of each case."""
    counts: dict[str, int] = {}
    out = []
    for case in cases:
        index = counts.get(case.corpus, 0)
        counts[case.corpus] = index + 1
        text = json.dumps([case.answer, case.reference, case.prompt, case.response_format])
        out.append((case.corpus, index, hashlib.sha256(text.encode()).hexdigest()[:10]))
    return out


def server_verdicts(cases: list[Case]) -> list[str]:
    """This server's verdict on each case: a pair through the decision in process, a whole
    completion through the service's scorer with a real pool."""
    from reward_server.checker.decide import equivalent_inline

    verdicts: list[str | None] = [None] * len(cases)
    completions = []
    for i, case in enumerate(cases):
        if case.corpus in ("labelled pairs", _GENERATED):
            verdict = equivalent_inline(case.answer, case.reference)
            verdicts[i] = f"{verdict.equal} {verdict.reason}"
        else:
            completions.append(i)
    items = asyncio.run(score_cases([cases[i] for i in completions]))
    for i, item in zip(completions, items, strict=True):
        verdicts[i] = f"{item.format_score:g}+{item.accuracy_score:g} {item.reason}"
    return [v or "" for v in verdicts]


def math_verify_verdicts(cases: list[Case]) -> list[str]:
    """math-verify's verdict, used as its README shows (the benchmark's way: ``math_verify_check``
    of ``benchmarks/checker_accuracy.py``, repeated here so that the table needs no benchmark)."""
    from math_verify import parse, verify

    from reward_server.checker.extract import extract_reference

    out = []
    for case in cases:
        try:
            if case.corpus in ("labelled pairs", _GENERATED):
                gold, answer = parse(f"${case.reference}$"), parse(f"${case.answer}$")
            else:
                gold, answer = parse(f"${extract_reference(case.reference)}$"), parse(case.answer)
            out.append(str(bool(verify(gold, answer))))
        except Exception as exc:  # a crash is no verdict; the column says so
            out.append(f"error:{type(exc).__name__}")
    return out


def _shown(text: str) -> str:
    shown = json.dumps(text, ensure_ascii=False)
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 4] + '…"'


def render(cases: list[Case], server: list[str], math_verify: list[str]) -> str:
    lines = ["\t".join(COLUMNS)]
    for (corpus, index, digest), case, ours, theirs in zip(
        identities(cases), cases, server, math_verify, strict=True
    ):
        cells = (corpus, str(index), digest, _shown(case.answer), _shown(case.reference))
        lines.append("\t".join((*cells, str(case.expected), ours, theirs)))
    return "\n".join(lines) + "\n"


def read(path: Path = TABLE) -> list[dict[str, str]]:
    header, *rows = path.read_text(encoding="utf-8").splitlines()
    return [dict(zip(header.split("\t"), row.split("\t"), strict=True)) for row in rows]
