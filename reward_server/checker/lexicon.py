"""Every word list of the checker, each declared once: the answer policy (``policy.py``), the
sentence reader (``sentence.py``), number words (``numbers.py``) and units (``units.py``) read
their words from here.

Words are lower case. A list that two readers use differently is declared once and the
difference is a derived set with a comment saying why.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ------------------------------------------------------------------ refusals

# Words that qualify a value as less than the answer: "18 is too high", "only part of it", "a
# lower bound", "the subtotal". Wherever they stand, the value is not committed to.
QUALIFIERS = _words(
    "too partial partially part portion subtotal intermediate preliminary tentative provisional "
    "bound overestimate underestimate overestimated underestimated incomplete insufficient"
)
# Words that make a whole statement uncertain, wherever they stand.
HEDGES = QUALIFIERS | _words(
    "maybe perhaps probably possibly likely unlikely approximate estimate estimated estimation "
    "guess guessing unsure uncertain somewhere either roughly thereabouts think believe seems "
    "seem appears suspect range ranges ranging"
)
# Words that make the number right after them a bound or an approximation of it.
APPROXIMATE = _words(
    "about around approximately approx nearly almost circa some over under above below beyond "
    "exceeding than between like"
)
APPROXIMATE_PAIRS = frozenset(
    {("at", "least"), ("at", "most"), ("up", "to"), ("close", "to"), ("no", "more")}
    | {("at", "minimum"), ("at", "maximum")}
    # "as much as 18", "as many as 40": bounds too
    | {(w, "as") for w in ("much", "many", "little", "few", "high", "low", "large", "small")}
)
# "18 or more", "18 or so", "give or take": a bound after the value.
OR_BOUNDS = _words("more less fewer greater higher lower above below over under so take")
MODAL_HEDGES = frozenset({("could", "be"), ("might", "be"), ("may", "be")})
# A short answer has no room for context: any of these anywhere in it hedges the value
# ("7 or more", "about 18", "18 at least", "several").
SHORT_ANSWER_HEDGES = (
    HEDGES | APPROXIMATE | OR_BOUNDS - {"so", "take"} | _words("least most close several")
)

# Words that reject a value: "18 was rejected", "18 is mistaken", "9 is wrong", "it isn't 9".
NEGATIONS = _words(
    "not no wrong incorrect false isn isnt never none neither nor except but instead without "
    "untrue invalid reject rejected rejects discarded excluded eliminated dismissed "
    "disqualified refuted disproved disproven invalidated mistaken erroneous inaccurate flawed "
    "impossible overcounted undercounted miscounted miscalculated cannot can't isn't aren't "
    "wasn't weren't doesn't don't didn't won't wouldn't shouldn't couldn't hasn't haven't "
    "hadn't nothing rather"
)

# ------------------------------------------------------------------ numbers in words

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
)
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
NUMBER_WORDS = {w: i for i, w in enumerate(_ONES.split())} | {
    w: 10 * i for i, w in enumerate(_TENS, 2)
}
SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
# Read as numbers right after a number: "5 thousand" is 5000, "2 dozen" is 24.
NUMERIC_MULTIPLIERS = {
    "thousand": 1000,
    "thousands": 1000,
    "million": 10**6,
    "millions": 10**6,
    "billion": 10**9,
    "billions": 10**9,
    "hundred": 100,
    "hundreds": 100,
    "dozen": 12,
    "dozens": 12,
}
# Fraction words: "7 tenths" is 0.7, "3 fifths" 0.6. Every ordinal but "first" and "second"
# (which name a position or a unit of time) is also a denominator.
_ORDINALS = (
    "third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth thirtieth fortieth "
    "fiftieth sixtieth seventieth eightieth ninetieth hundredth thousandth millionth"
)
DENOMINATORS = frozenset(w + s for w in _ORDINALS.split() for s in ("", "s"))
# Words that multiply or transform the value. Anywhere but right after a number (the numeric
# ones above) each one is a different value than the one written, so it is refused rather
# than dropped as a unit.
MULTIPLIERS = (
    NUMERIC_MULTIPLIERS.keys()
    | DENOMINATORS
    | _words(
        "trillion squared cubed halves half quarters quarter tens pi times plus minus over i e "
        "factorial factorials reciprocal inverse doubled tripled quadrupled halved permille"
    )
)
# Operations in words on the value after them: "twice 9" is 18.
OPERATIONS_BEFORE = _words("twice double triple thrice quadruple half")
# Operations in words right after a value: "4 to the power of 2", "9 divided by 3".
OPERATIONS_AFTER = _words(
    "power powers raised times plus minus divided multiplied squared cubed factorial modulo "
    "mod root"
)
# Nouns whose "of" takes an operand, not their value: "a third of 36", "a multiple of 6".
OPERATION_NOUNS = MULTIPLIERS | _words(
    "reciprocal inverse square cube root fraction multiple factor divisor power product "
    "quotient percent percentage share portion part proportion"
)
# Names of functions and constants: never a unit after a value ("5 pi", "2 sin").
MATH_WORDS = _words(
    "pi sqrt sin cos tan cot sec csc log ln exp lim inf infty infinity mod and or arcsin arccos "
    "arctan sinh cosh tanh det deg frac cdot times"
)

# ------------------------------------------------------------------ sentences

# A number after one of these is context: "in 3 days", "every 2 days", "the 3 friends", "if
# x = 2". "of" after "total" is not ("a total of 18" states 18).
PREPOSITIONS = _words(
    "of in for after before per every each from by with at on within during into onto among "
    "across through since until till via using without against between"
)
DETERMINERS = _words("the this these those her his their its my our your all both")
CONDITIONS = _words("if when whenever where given assuming suppose let because unless")
CONTEXT_BEFORE = PREPOSITIONS | DETERMINERS | CONDITIONS
# Adjectives between a determiner and its number: "the first 10 integers".
ADJECTIVES = _words(
    "first last next remaining other original initial additional extra whole entire previous "
    "following same given"
)
# Verbs that state a value: "X is 18", "Total: 18".
COPULAS = _words("is are was were be been equals equal equaling totals")
# Words that may stand between a copula and its value: "is therefore $45", "is equal to 7".
FILLERS = _words(
    "exactly precisely then therefore thus so now still just simply indeed also clearly hence "
    "finally altogether overall worth equal to a an the total of in all"
)
# A conclusion: the numbers before it are the working, the value comes after it.
CONCLUSIONS = _words(
    "so therefore thus hence consequently giving making leaving yielding totaling totalling "
    "gives means"
)
ANSWER_WORDS = _words("answer answers")
# Verbs after "which" that conclude: "…, which is 120 plants".
WHICH_VERBS = COPULAS | _words("makes gives leaves means totals brings comes adds")
PRONOUNS = _words("she he they it we you there i that this what which who")
# Words only a sentence has; one of them makes an answer a sentence.
SENTENCE_WORDS = (
    CONTEXT_BEFORE | COPULAS | CONCLUSIONS | PRONOUNS | _words("answer ie namely")
) - {"per"}
# Prose in a short answer: a statement about the value, not the value ("12 is the total").
PROSE = (
    COPULAS
    | CONCLUSIONS
    | _words(
        "the answer final then which that this it we get result solution value because since if"
    )
)
JOINERS = _words("and or &")
CLAUSE_WORDS = _words("and but while whereas although though")
COMPARATIVES = _words(
    "more fewer less longer shorter taller older younger bigger smaller larger higher lower "
    "heavier lighter faster slower cheaper greater"
)
# Words that announce the same value again: "$\\frac{1}{2}$ (that is, 0.5)", "9, i.e. nine".
RESTATEMENT_MARKERS = (("that", "is"), ("ie",), ("namely",), ("in", "other", "words"))
# Words never read as a unit after a value (function words, comparatives, adverbs of time).
NOT_UNITS = (
    CONTEXT_BEFORE
    | COPULAS
    | CONCLUSIONS
    | APPROXIMATE
    | _words(
        "and or but so then than more less fewer left total altogether a an to is are was were "
        "will would can could should must has have had do does did she he they it we you i "
        "who which that what as while overall only also now still already today yesterday "
        "tomorrow respectively instead apiece per long wide tall high deep thick old away apart "
        "later ago early late together combined ie eg namely"
    )
)
