"""Answer extraction of the demo's evaluation (pass@k and maj@k are tested in tests/eval)."""

from __future__ import annotations

from gtpo.demo.evaluate import extract_answer


def test_extract_answer_takes_the_last_block():
    assert extract_answer("<reasoning>x</reasoning><answer> 5 </answer>") == "5"
    assert extract_answer("<answer>1</answer><answer>2</answer>") == "2"
    assert extract_answer("<reasoning>so 5</reasoning>5") is None
    assert extract_answer("</answer><answer>") is None
