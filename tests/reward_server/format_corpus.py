"""Whole responses in the reasoning models' formats (``think`` and ``boxed``), labelled.

Written for this project (the problems, numbers and wording are invented here, none is taken
from a dataset or another project's tests). Each response is what a model of one family writes
for a GSM8K-, MATH- or AIME-style problem, in the layout that family uses:

* ``think``: DeepSeek-R1 distills (the chat template prefills ``<think>``, so the response
  holds only ``</think>``; or the model opens the block itself), Qwen3 in thinking mode and QwQ
  (they open ``<think>`` themselves), and R1-Zero-style completions with an ``<answer>`` block
  after ``</think>``;
* ``boxed``: Qwen2.5-Math-style solutions that end with ``\\boxed{}``, no tags.

Each problem is written in every style, right and wrong. A right response states the
reference's value as its one final answer (a box inside the think block that differs from the
final one, an empty think block, the same value boxed twice or written in the answer block and
a box, a list of boxes against a list reference, text after the final box that gives no other
value); a wrong one is cut off inside the think block, answers only inside the think block,
gives several final answers that differ, hedges or negates its final answer, states another
value, or misses the format's opening tag. ``format_score`` is what the format reward must be.

``test_rs_format_corpus.py`` holds the server to every response; ``benchmarks/
checker_accuracy.py`` scores this server and math-verify on them side by side.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Response:
    text: str  # the model's response (what follows the prompt), end token included
    prefilled: bool  # the prompt ends with <think> (the chat template opened the block)
    label: str  # the dataset's label
    correct: bool  # the accuracy the grader gives: 10 (True) or 0
    format_score: float  # the format reward the response must earn
    style: str
    why: str  # why the grader accepts or refuses it


@dataclass(frozen=True)
class Problem:
    label: str  # the dataset's label
    right: str  # the final answer as the model boxes it
    wrong: str  # a close wrong final answer
    think: str  # the reasoning inside the think block (mentions intermediate values)
    solution: str  # the written solution after the think block, or a boxed-format solution
    final: str  # the sentence that ends with the boxed answer: "... is" + box


def gsm8k(value: str) -> str:
    return f"Natalia works it out step by step.\n#### {value}"


def math(answer: str) -> str:
    return f"Working through the problem gives $\\boxed{{{answer}}}$."


# fmt: off
PROBLEMS: list[Problem] = [
    Problem(gsm8k("18"), "18", "16",
            "Okay, so Janet's ducks lay 16 eggs a day. She eats 3 and bakes with 4, so 16 - 3 - 4 "
            "= 9 eggs are left. She sells them at $2 each, so 9 times 2 is 18. Let me double-"
            "check: 3 + 4 = 7, 16 - 7 = 9, 9 * 2 = 18. Yes.",
            "Janet has $16 - 3 - 4 = 9$ eggs left each day and sells them at \\$2 each, so she "
            "makes $9 \\times 2 = 18$ dollars.",
            "Janet makes"),
    Problem(gsm8k("3"), "3", "2",
            "Alright, a robe takes 2 bolts of blue fiber and half that much white fiber. Half of 2 "
            "is 1, so the total is 2 + 1 = 3 bolts.",
            "Blue fiber: 2 bolts. White fiber: $2 / 2 = 1$ bolt. Total: $2 + 1 = 3$ bolts.",
            "The total number of bolts is"),
    Problem(gsm8k("70000"), "70000", "65000",
            "Let me see. Josh buys a house for 80,000 and puts in 50,000 of repairs, so the cost "
            "is 130,000. The value increases by 150%, so the new value is 80,000 * 2.5 = 200,000. "
            "Profit is 200,000 - 130,000 = 70,000.",
            "The house is worth $80{,}000 \\times 2.5 = 200{,}000$ after repairs, and Josh spent "
            "$130{,}000$, so his profit is $70{,}000$.",
            "Josh's profit is"),
    Problem(gsm8k("540"), "540", "180",
            "James runs 3 sprints 3 times a week, so 9 sprints a week. Each is 60 meters, so "
            "9 * 60 = 540 meters a week.",
            "He runs $3 \\times 3 = 9$ sprints a week, each 60 meters, so $9 \\times 60 = 540$ "
            "meters.",
            "James runs a total of"),
    Problem(gsm8k("20"), "20", "15",
            "Hmm, Wendi feeds each chicken 3 cups a day, with 20 chickens that is 60 cups. The "
            "morning is 15 cups, the afternoon 25 cups, so 40 cups so far. 60 - 40 = 20.",
            "The flock needs $3 \\times 20 = 60$ cups a day; after $15 + 25 = 40$ cups, the last "
            "meal needs $60 - 40 = 20$ cups.",
            "The final meal needs"),
    Problem(gsm8k("64"), "64", "32",
            "Each glass costs $5, and every second glass is 60% of that, $3. Kylar buys 16 "
            "glasses: 8 at $5 and 8 at $3, so 40 + 24 = 64.",
            "Eight glasses cost $8 \\times 5 = 40$ dollars and eight cost $8 \\times 3 = 24$ "
            "dollars, so Kylar pays $40 + 24 = 64$ dollars.",
            "Kylar needs to pay"),
    Problem(gsm8k("260"), "260", "240",
            "Toulouse has twice as many sheep as Charleston, and Charleston has 4 times as many as "
            "Seattle with 20 sheep. Charleston: 80. Toulouse: 160. Total 20 + 80 + 160 = 260.",
            "Charleston has $4 \\times 20 = 80$ sheep and Toulouse $2 \\times 80 = 160$, so "
            "together $20 + 80 + 160 = 260$ sheep.",
            "Together they have"),
    Problem(gsm8k("160"), "160", "100",
            "Carla downloads 200 GB at 2 GB a minute, but a restart at 40% costs 20 minutes. 40% "
            "of 200 is 80 GB, 40 minutes; then 20 minutes restart; then all 200 GB again, 100 "
            "minutes. 40 + 20 + 100 = 160.",
            "Before the restart: $80 / 2 = 40$ minutes. The restart: 20 minutes. Again from the "
            "start: $200 / 2 = 100$ minutes. In all $40 + 20 + 100 = 160$ minutes.",
            "The download takes"),
    Problem(gsm8k("45"), "45", "60",
            "John drives 3 hours at 60 mph, turns around, 2 hours of standstill, then half an "
            "hour at 30 mph and the rest at 80 mph. Let me just track the distance from home.",
            "He is $180$ miles out; in the last 4 hours he covers $0 + 15 + 120 = 135$ miles "
            "back, so he is $180 - 135 = 45$ miles from home.",
            "John is"),
    Problem(gsm8k("460"), "460", "400",
            "Eliza earns $10 an hour for 40 hours and 1.2 times that for overtime. She worked 45 "
            "hours: 400 + 5 * 12 = 460.",
            "Regular pay: $40 \\times 10 = 400$ dollars. Overtime: $5 \\times 12 = 60$ dollars. "
            "Total: $400 + 60 = 460$ dollars.",
            "Eliza earns"),
    Problem(math("\\frac{3}{4}"), "\\frac{3}{4}", "\\frac{2}{3}",
            "We need P(at least one head) in two flips of a fair coin. The complement is two "
            "tails, probability 1/4. So 1 - 1/4 = 3/4.",
            "The only outcome without a head is TT, with probability $\\frac14$, so the "
            "probability is $1 - \\frac14 = \\frac34$.",
            "The probability is"),
    Problem(math("\\sqrt{2}"), "\\sqrt{2}", "2",
            "The distance from (0,0) to (1,1) is sqrt(1 + 1) = sqrt(2). Let me verify with the "
            "distance formula: sqrt((1-0)^2 + (1-0)^2) = sqrt 2.",
            "By the distance formula, $d = \\sqrt{(1-0)^2 + (1-0)^2} = \\sqrt{2}$.",
            "The distance is"),
    Problem(math("9\\pi"), "9\\pi", "6\\pi",
            "The circle has radius 3, so the area is pi r^2 = 9 pi. Not the circumference, which "
            "would be 6 pi.",
            "With $r = 3$, the area is $\\pi r^2 = 9\\pi$.",
            "The area of the circle is"),
    Problem(math("(2,-1)"), "(2,-1)", "(-1,2)",
            "Solve x + y = 1 and x - y = 3. Adding: 2x = 4, x = 2. Then y = 1 - 2 = -1. So the "
            "point is (2, -1).",
            "Adding the equations gives $2x = 4$, so $x = 2$ and $y = -1$.",
            "The solution is"),
    Problem(math("2, 3"), "2, 3", "2, 4",
            "x^2 - 5x + 6 = 0 factors as (x - 2)(x - 3) = 0, so x = 2 or x = 3.",
            "Factoring, $x^2 - 5x + 6 = (x-2)(x-3)$, so the roots are $x = 2$ and $x = 3$.",
            "The roots are"),
    Problem(math("12"), "12", "10",
            "The number of diagonals of an octagon... wait, the question asks for the number of "
            "edges of a cube. A cube has 12 edges, 8 vertices and 6 faces.",
            "A cube has 4 edges on its top face, 4 on its bottom face and 4 vertical edges: "
            "$4 + 4 + 4 = 12$.",
            "The number of edges is"),
    Problem(math("-\\frac{2}{3}"), "-\\frac{2}{3}", "\\frac{2}{3}",
            "The slope of the line through (1, 3) and (4, 1) is (1 - 3)/(4 - 1) = -2/3.",
            "The slope is $m = \\frac{1 - 3}{4 - 1} = -\\frac{2}{3}$.",
            "The slope is"),
    Problem(math("120"), "120", "24",
            "Arrangements of 5 distinct books on a shelf: 5! = 5 * 4 * 3 * 2 * 1 = 120.",
            "There are $5! = 120$ orders for five distinct books.",
            "The number of arrangements is"),
    Problem(math("2\\sqrt{3}"), "2\\sqrt{3}", "3\\sqrt{2}",
            "sqrt(12) = sqrt(4 * 3) = 2 sqrt 3.",
            "Since $12 = 4 \\cdot 3$, $\\sqrt{12} = 2\\sqrt{3}$.",
            "The simplified form is"),
    Problem(math("[-3, 3]"), "[-3,3]", "(-3,3)",
            "The domain of sqrt(9 - x^2) needs 9 - x^2 >= 0, so -3 <= x <= 3, the closed "
            "interval.",
            "We need $9 - x^2 \\ge 0$, i.e. $-3 \\le x \\le 3$.",
            "The domain is"),
    Problem(math("5"), "5", "7",
            "The remainder of 2^{10} = 1024 divided by 7: 7 * 146 = 1022, so the remainder is 2. "
            "Hmm, the problem asks for 17 mod 12 instead: 17 - 12 = 5.",
            "Since $17 = 12 + 5$, the remainder is 5.",
            "The remainder is"),
    Problem(math("x^2+2x+1"), "(x+1)^2", "x^2+1",
            "Expand (x + 1)^2 = x^2 + 2x + 1; the question asks for the square, which factors as "
            "(x+1)^2.",
            "The expression is the perfect square $x^2 + 2x + 1 = (x+1)^2$.",
            "It equals"),
    Problem(math("\\frac{\\pi}{3}"), "\\frac{\\pi}{3}", "\\frac{\\pi}{6}",
            "cos(theta) = 1/2 for theta in [0, pi/2] gives theta = pi/3, which is 60 degrees.",
            "On $[0, \\frac{\\pi}{2}]$, $\\cos\\theta = \\frac12$ only at "
            "$\\theta = \\frac{\\pi}{3}$.",
            "The angle is"),
    Problem(math("4"), "4", "8",
            "log base 2 of 16 is 4 since 2^4 = 16.",
            "Since $2^4 = 16$, $\\log_2 16 = 4$.",
            "The value is"),
    Problem("33", "033", "34",
            "AIME answers are integers from 0 to 999. We found m + n = 33 after reducing the "
            "fraction 14/19. Let me double check: 14 + 19 = 33.",
            "The fraction reduces to $\\frac{14}{19}$, so $m + n = 14 + 19 = 33$.",
            "Therefore $m + n$ is"),
    Problem("204", "204", "240",
            "Count the paths: the total is 252, minus the 48 through the blocked corner, gives "
            "204.",
            "There are $\\binom{10}{5} = 252$ paths, of which 48 pass the blocked corner, so "
            "$252 - 48 = 204$.",
            "The number of paths is"),
    Problem("560", "560", "506",
            "The sum of the arithmetic series with 20 terms from 9 to 47: (9 + 47) * 20 / 2 = "
            "560.",
            "The series has 20 terms, so its sum is $\\frac{20(9 + 47)}{2} = 560$.",
            "The sum is"),
    Problem(gsm8k("6.5"), "6.50", "6.25",
            "Hannah had $20, spent 3 notebooks at $4.50 = $13.50, so 20 - 13.5 = 6.5 left.",
            "Three notebooks cost $3 \\times 4.50 = 13.50$ dollars, so she has $20 - 13.50 = "
            "6.50$ dollars left.",
            "Hannah has"),
    Problem(gsm8k("1250"), "1{,}250", "1{,}150",
            "Tom earns $250 a week for 5 weeks: 250 * 5 = 1250.",
            "He earns $250 \\times 5 = 1250$ dollars in five weeks.",
            "Tom earns"),
    Problem(gsm8k("25"), "25\\%", "20\\%",
            "The price drops from $80 to $60, a drop of $20. 20 / 80 = 0.25, which is 25 percent.",
            "The drop is $80 - 60 = 20$ dollars, and $\\frac{20}{80} = 25\\%$.",
            "The discount is"),
    Problem(math("1011_2"), "1011_2", "1101_2",
            "Convert 11 to base 2: 8 + 2 + 1, so 1011 in binary.",
            "Since $11 = 8 + 2 + 1$, it is $1011_2$.",
            "In base 2 it is"),
    Problem(math("\\text{(C)}"), "\\text{(C)}", "\\text{(B)}",
            "Check each option: (A) fails at x = 0, (B) is not increasing, (C) works.",
            "Options (A) and (B) fail; only (C) satisfies both conditions.",
            "The answer is"),
    Problem(math("7"), "x = 7", "x = 5",
            "Solve 2x + 3 = 17: 2x = 14, x = 7. Check: 2 * 7 + 3 = 17.",
            "Subtracting 3 gives $2x = 14$, so $x = 7$.",
            "The solution is"),
    Problem(math("\\$5.40"), "\\$5.40", "\\$4.50",
            "Three apples at $1.80 each: 3 * 1.8 = 5.4 dollars.",
            "Three apples cost $3 \\times 1.80 = 5.40$ dollars.",
            "The total cost is"),
    Problem(math("10"), "10", "12",
            "Triangle with legs 6 and 8: hypotenuse sqrt(36 + 64) = sqrt(100) = 10.",
            "By Pythagoras, $c = \\sqrt{6^2 + 8^2} = \\sqrt{100} = 10$.",
            "The hypotenuse is"),
    Problem(math("\\frac{1}{6}"), "\\frac{1}{6}", "\\frac{1}{3}",
            "Rolling a 6-sided die and getting a 4: one of six outcomes, 1/6.",
            "One of the six equally likely faces is a 4, so the probability is $\\frac16$.",
            "The probability is"),
    Problem(math("24"), "24", "12",
            "The least common multiple of 8 and 12: multiples of 12 are 12, 24; 24 is divisible "
            "by 8. So 24.",
            "Since $8 = 2^3$ and $12 = 2^2 \\cdot 3$, the LCM is $2^3 \\cdot 3 = 24$.",
            "The least common multiple is"),
    Problem(math("-4"), "-4", "4",
            "The minimum of x^2 + 4x: complete the square, (x + 2)^2 - 4, so the minimum is -4 "
            "at x = -2.",
            "Completing the square, $x^2 + 4x = (x+2)^2 - 4 \\ge -4$.",
            "The minimum value is"),
    Problem(math("15"), "15", "30",
            "Choose 2 of 6 people: C(6, 2) = 6 * 5 / 2 = 15.",
            "The number of pairs is $\\binom{6}{2} = \\frac{6 \\cdot 5}{2} = 15$.",
            "The number of handshakes is"),
    Problem(math("\\frac{5}{2}"), "\\frac{5}{2}", "\\frac{2}{5}",
            "Solve 2x - 5 = 0: x = 5/2 = 2.5.",
            "From $2x = 5$ we get $x = \\frac{5}{2}$.",
            "The root is"),
]
# fmt: on

END = "<|im_end|>"  # the end token the decoded query keeps; the server drops it


def _box(value: str) -> str:
    return f"\\boxed{{{value}}}"


def _think(p: Problem, opened: bool, think: str | None = None) -> str:
    return ("<think>\n" if opened else "") + (think or p.think) + "\n</think>\n\n"


def _right_think(p: Problem) -> list[tuple[str, bool, float, str, str]]:
    """(response, prefilled, format score, style, why) of right think-format responses."""
    box = _box(p.right)
    return [
        (
            _think(p, False) + f"{p.solution}\n\n{p.final} ${box}$." + END,
            True,
            10.0,
            "r1_prefilled",
            "the template opened <think>; one final box",
        ),
        (
            _think(p, True) + f"{p.solution}\n\n**Final Answer**\n\\[\n{box}\n\\]" + END,
            False,
            10.0,
            "r1_open",
            "the model opened <think>; the final box in display math",
        ),
        (
            _think(p, True) + f"{p.solution}\n\n### Final Answer\n\n$$\n{box}\n$$" + END,
            False,
            10.0,
            "qwen3",
            "Qwen3's final answer heading, the box in display math",
        ),
        (
            _think(p, True) + f"**Final Answer**\n\n\\[ {box} \\]" + END,
            False,
            10.0,
            "qwq",
            "QwQ's final answer heading",
        ),
        (
            _think(p, True, p.think + f" So it's {_box(p.wrong)}? No, recheck: it is {box}.")
            + f"{p.final} ${box}$."
            + END,
            False,
            10.0,
            "box_in_think",
            "a different box inside the think block is not an answer",
        ),
        (
            "<think>\n\n</think>\n\n" + f"{p.solution} {p.final} ${box}$." + END,
            False,
            10.0,
            "empty_think",
            "an empty think block is a complete block",
        ),
        (
            _think(p, True) + f"<answer>{p.right}</answer>" + END,
            False,
            10.0,
            "answer_block",
            "the answer block after the think block",
        ),
        (
            _think(p, False) + f"{p.solution} So ${box}$.\n\n<answer>{box}</answer>" + END,
            True,
            10.0,
            "block_and_box",
            "the same value in a box and in the answer block",
        ),
        (
            _think(p, True) + f"{p.final} ${box}$.\n\n**Final Answer**\n${box}$" + END,
            False,
            10.0,
            "box_twice",
            "the same value boxed twice",
        ),
        (
            _think(p, False) + f"{p.final} ${box}$. I hope this helps!" + END,
            True,
            1.5,
            "text_after",
            "text after the final box that states no value costs format only",
        ),
    ]


def _wrong_think(p: Problem) -> list[tuple[str, bool, float, str, str]]:
    box, wrong = _box(p.right), _box(p.wrong)
    cut = p.think + f" So the answer should be {box}. Let me verify this once more by"
    return [
        (cut, True, 0.0, "truncated", "cut off inside the think block: no final answer"),
        ("<think>\n" + cut, False, 0.0, "truncated_open", "cut off inside the think block"),
        (
            _think(p, True, p.think + f" So {box}.") + f"{p.final} ${wrong}$." + END,
            False,
            10.0,
            "right_in_think",
            "the right value only inside the think block; the final one is wrong",
        ),
        (
            _think(p, True) + f"{p.final} ${wrong}$.\n\nWait, it is ${box}$." + END,
            False,
            1.5,
            "several_boxes",
            "two final boxes that differ",
        ),
        (
            _think(p, False) + f"{p.final} ${box}$.\n\n<answer>{p.wrong}</answer>" + END,
            True,
            1.5,
            "block_and_other_box",
            "an answer block and a box that differ",
        ),
        (
            _think(p, False) + f"Perhaps {p.final[0].lower()}{p.final[1:]} ${box}$." + END,
            True,
            10.0,
            "hedged",
            "a hedge before the final box",
        ),
        (
            _think(p, True) + f"{p.final} not ${wrong}$ but ${box}$." + END,
            False,
            1.5,
            "negated",
            "a negation in the final sentence",
        ),
        (
            _think(p, True) + f"{p.final} ${box}$ or ${wrong}$." + END,
            False,
            10.0,
            "two_candidates",
            "two candidates in one list",
        ),
        (
            _think(p, False) + f"{p.final} ${box}$ or more." + END,
            True,
            1.5,
            "bound_after",
            "a bound after the final box",
        ),
        (
            _think(p, True) + f"{p.final} ${box}$. Actually, it could be {p.wrong}." + END,
            False,
            1.5,
            "other_value_after",
            "text after the final box gives another value",
        ),
        (
            _think(p, True) + f"{p.final} ${wrong}$." + END,
            False,
            10.0,
            "wrong_value",
            "the final answer is another value",
        ),
        (
            p.think + f"\n</think>\n\n{p.final} ${box}$." + END,
            False,
            1.5,
            "no_opening_tag",
            "no <think>, neither in the prompt nor in the response",
        ),
        (
            f"{p.solution}\n\n{p.final} ${box}$." + END,
            False,
            1.0,
            "no_think_block",
            "an answer without the think block",
        ),
        (
            _think(p, True, p.think + f" <answer>{p.right}</answer>") + p.solution + END,
            False,
            1.0,
            "answer_in_think",
            "the answer block only inside the think block",
        ),
    ]


def _right_boxed(p: Problem) -> list[tuple[str, bool, float, str, str]]:
    box = _box(p.right)
    return [
        (f"{p.solution}\n\n{p.final} ${box}$." + END, False, 10.0, "qwen_math", "one final box"),
        (
            f"{p.solution}\n\nThe final answer is:\n\\[\n{box}\n\\]" + END,
            False,
            10.0,
            "display",
            "the final box in display math",
        ),
        (
            f"{p.solution} Therefore, the final answer is: ${box}$. I hope it is correct." + END,
            False,
            1.5,
            "hope_correct",
            "text after the box that states no value",
        ),
        (
            f"{p.solution}\n\n{p.final} ${box}$.\n\nSo the answer is ${box}$." + END,
            False,
            10.0,
            "restated",
            "the same value boxed twice",
        ),
        (
            f"To solve this, {p.solution[0].lower()}{p.solution[1:]}\n\\boxed{{{p.right}}}" + END,
            False,
            10.0,
            "bare_box",
            "a bare final box",
        ),
    ]


def _wrong_boxed(p: Problem) -> list[tuple[str, bool, float, str, str]]:
    box, wrong = _box(p.right), _box(p.wrong)
    return [
        (
            f"{p.solution}\n\n{p.final} ${wrong}$." + END,
            False,
            10.0,
            "wrong_value",
            "another value",
        ),
        (
            f"{p.solution} First ${wrong}$, then {p.final[0].lower()}{p.final[1:]} ${box}$." + END,
            False,
            1.5,
            "several_boxes",
            "two final boxes that differ",
        ),
        (
            f"{p.solution}\n\nI think {p.final[0].lower()}{p.final[1:]} ${box}$." + END,
            False,
            10.0,
            "hedged",
            "a hedge before the final box",
        ),
        (
            f"{p.solution}\n\n{p.final} ${box}$ or ${wrong}$." + END,
            False,
            10.0,
            "two_candidates",
            "two candidates in one list",
        ),
        (
            f"{p.solution}\n\n{p.final} approximately ${box}$." + END,
            False,
            10.0,
            "approximate",
            "an approximation of the value",
        ),
        (
            f"{p.solution}\n\n{p.final} ${box}$, but that is wrong." + END,
            False,
            1.5,
            "negated_after",
            "the final box is called wrong",
        ),
        (
            f"{p.solution}\n\n{p.final} $\\boxed{{{p.right}" + END,
            False,
            0.0,
            "truncated",
            "cut off inside the box",
        ),
        (
            f"{p.solution}\n\n{p.final} {p.right}." + END,
            False,
            0.0,
            "no_box",
            "the value without a box",
        ),
    ]


def _responses(rows: list[tuple[Problem, list[tuple[str, bool, float, str, str]], bool]]):
    out = []
    for p, items, correct in rows:
        for text, prefilled, fmt, style, why in items:
            out.append(Response(text, prefilled, p.label, correct, fmt, style, why))
    return out


THINK: list[Response] = _responses(
    [(p, _right_think(p), True) for p in PROBLEMS] + [(p, _wrong_think(p), False) for p in PROBLEMS]
)
BOXED: list[Response] = _responses(
    [(p, _right_boxed(p), True) for p in PROBLEMS] + [(p, _wrong_boxed(p), False) for p in PROBLEMS]
)
