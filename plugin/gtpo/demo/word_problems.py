"""GSM8K-style word problems with numeric answers, generated from templates (no download).

Each template is one kind of problem (adding, taking away, equal groups, sharing, change from a
purchase, ...) in one or two steps, with varied names, objects and small numbers. A problem
carries its question, its answer and a worked solution written the way a careful student would
(the reasoning of a demonstration, or of the one example in a system prompt).

`make_word_split(n_train, n_heldout, steps)` gives distinct questions, the held-out ones never in
training; a seed fixes everything (`random.Random`, pure Python).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from reward_server.protocol import ANSWER_CLOSE as A_CLOSE
from reward_server.protocol import ANSWER_OPEN as A_OPEN
from reward_server.protocol import REASONING_CLOSE as R_CLOSE
from reward_server.protocol import REASONING_OPEN as R_OPEN

NAMES = (
    "Ava", "Ben", "Chloe", "Diego", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jamal", "Kira",
    "Liam", "Maya", "Noah", "Olga", "Priya", "Quinn", "Rosa", "Sam", "Tariq", "Uma", "Victor",
    "Wen", "Yusuf", "Zara",
)  # fmt: skip
# (plural, container) pairs: things that come in boxes, bags or packs.
ITEMS = (
    ("apples", "bags"), ("pencils", "boxes"), ("stickers", "sheets"), ("cookies", "jars"),
    ("marbles", "bags"), ("cards", "packs"), ("eggs", "cartons"), ("books", "shelves"),
    ("shells", "buckets"), ("stamps", "albums"), ("balloons", "packs"), ("crayons", "boxes"),
)  # fmt: skip
# Things with a price (singular, plural).
GOODS = (
    ("notebook", "notebooks"), ("sandwich", "sandwiches"), ("ticket", "tickets"),
    ("toy car", "toy cars"), ("muffin", "muffins"), ("poster", "posters"), ("pen", "pens"),
)  # fmt: skip


@dataclass(frozen=True)
class WordProblem:
    question: str
    answer: int
    reasoning: str  # a worked solution, ending on the answer
    steps: int  # 1 or 2 arithmetic steps
    kind: str  # the template's name

    def demonstration(self) -> str:
        """The solution in the paper's format, each tag on its own line."""
        return f"{R_OPEN}\n{self.reasoning}\n{R_CLOSE}\n{A_OPEN}\n{self.answer}\n{A_CLOSE}"


def _two_names(rng: random.Random) -> tuple[str, str]:
    first, second = rng.sample(NAMES, 2)
    return first, second


def _gets_more(rng: random.Random) -> WordProblem:
    name = rng.choice(NAMES)
    item, _ = rng.choice(ITEMS)
    a, b = rng.randint(2, 20), rng.randint(2, 20)
    return WordProblem(
        f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?",
        a + b,
        f"{name} starts with {a} {item} and gets {b} more: {a} + {b} = {a + b}.",
        1,
        "gets_more",
    )


def _gives_away(rng: random.Random) -> WordProblem:
    name, friend = _two_names(rng)
    item, _ = rng.choice(ITEMS)
    b = rng.randint(2, 15)
    a = b + rng.randint(2, 20)
    return WordProblem(
        f"{name} had {a} {item} and gave {b} of them to {friend}. How many {item} does {name} "
        "have left?",
        a - b,
        f"{name} had {a} {item} and gave away {b}: {a} - {b} = {a - b}.",
        1,
        "gives_away",
    )


def _equal_groups(rng: random.Random) -> WordProblem:
    name = rng.choice(NAMES)
    item, container = rng.choice(ITEMS)
    a, b = rng.randint(2, 9), rng.randint(2, 12)
    return WordProblem(
        f"{name} has {a} {container} with {b} {item} in each. How many {item} does {name} have "
        "in all?",
        a * b,
        f"There are {a} {container} of {b} {item} each: {a} × {b} = {a * b}.",
        1,
        "equal_groups",
    )


def _shares(rng: random.Random) -> WordProblem:
    name = rng.choice(NAMES)
    item, _ = rng.choice(ITEMS)
    friends, each = rng.randint(2, 8), rng.randint(2, 10)
    total = friends * each
    return WordProblem(
        f"{name} shares {total} {item} equally among {friends} friends. How many {item} does "
        "each friend get?",
        each,
        f"{total} {item} shared by {friends} friends: {total} ÷ {friends} = {each}.",
        1,
        "shares",
    )


def _buys_then_gives(rng: random.Random) -> WordProblem:
    name, friend = _two_names(rng)
    item, _ = rng.choice(ITEMS)
    a, b = rng.randint(3, 20), rng.randint(2, 15)
    c = rng.randint(1, a + b - 1)
    return WordProblem(
        f"{name} has {a} {item}, buys {b} more and then gives {c} to {friend}. How many {item} "
        f"does {name} have now?",
        a + b - c,
        f"After buying, {name} has {a} + {b} = {a + b} {item}. After giving {c} away: "
        f"{a + b} - {c} = {a + b - c}.",
        2,
        "buys_then_gives",
    )


def _change(rng: random.Random) -> WordProblem:
    name = rng.choice(NAMES)
    one, many = rng.choice(GOODS)
    price, count = rng.randint(2, 9), rng.randint(2, 5)
    cost = price * count
    paid = next(bill for bill in (10, 20, 50, 100) if bill > cost)
    return WordProblem(
        f"A {one} costs ${price}. {name} buys {count} {many} and pays with a ${paid} bill. How "
        f"many dollars of change does {name} get?",
        paid - cost,
        f"{count} {many} cost {count} × ${price} = ${cost}. The change is ${paid} - ${cost} = "
        f"${paid - cost}.",
        2,
        "change",
    )


def _groups_and_extra(rng: random.Random) -> WordProblem:
    name = rng.choice(NAMES)
    item, container = rng.choice(ITEMS)
    a, b, extra = rng.randint(2, 6), rng.randint(2, 10), rng.randint(1, 9)
    return WordProblem(
        f"{name} has {a} {container} of {b} {item} and {extra} loose {item}. How many {item} "
        f"does {name} have?",
        a * b + extra,
        f"The {container} hold {a} × {b} = {a * b} {item}. With the loose ones: {a * b} + {extra} "
        f"= {a * b + extra}.",
        2,
        "groups_and_extra",
    )


def _together(rng: random.Random) -> WordProblem:
    name, friend = _two_names(rng)
    item, _ = rng.choice(ITEMS)
    a, more = rng.randint(2, 15), rng.randint(1, 10)
    return WordProblem(
        f"{name} has {a} {item}. {friend} has {more} more {item} than {name}. How many {item} do "
        "they have together?",
        a + a + more,
        f"{friend} has {a} + {more} = {a + more} {item}. Together: {a} + {a + more} = "
        f"{a + a + more}.",
        2,
        "together",
    )


TEMPLATES: dict[int, tuple[Callable[[random.Random], WordProblem], ...]] = {
    1: (_gets_more, _gives_away, _equal_groups, _shares),
    2: (_buys_then_gives, _change, _groups_and_extra, _together),
}


def word_problem(rng: random.Random, steps: tuple[int, ...] = (1, 2)) -> WordProblem:
    """One problem of a random kind with one of `steps` arithmetic steps."""
    return rng.choice(TEMPLATES[rng.choice(steps)])(rng)


@dataclass(frozen=True)
class WordSplit:
    train: list[WordProblem]
    heldout: list[WordProblem]


def make_word_split(
    n_train: int, n_heldout: int, steps: tuple[int, ...] = (1, 2), seed: int = 2026
) -> WordSplit:
    """Distinct questions; no held-out question ever appears in the training list. The
    held-out set comes first, so it does not depend on how many training problems are asked."""
    if not steps or not set(steps) <= set(TEMPLATES):
        raise ValueError(f"steps: a non-empty subset of {sorted(TEMPLATES)}, got {steps}")
    rng = random.Random(seed)
    seen: set[str] = set()
    problems: list[WordProblem] = []
    attempts = 0
    while len(problems) < n_train + n_heldout:
        attempts += 1
        if attempts > 50 * (n_train + n_heldout) + 1000:
            raise ValueError(f"cannot make {n_train + n_heldout} distinct problems")
        problem = word_problem(rng, steps)
        if problem.question not in seen:
            seen.add(problem.question)
            problems.append(problem)
    return WordSplit(train=problems[n_heldout:], heldout=problems[:n_heldout])
