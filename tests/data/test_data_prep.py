"""``gtpo data`` on fixture files of every source format, the skip report, and the hub path
through a fake ``load_dataset`` (the hub itself is never reached in tests)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from gtpo.cli import main as gtpo_main
from gtpo.data import SYSTEM_PROMPT, prepare
from gtpo.data.sources import MATH_SUBJECTS, last_boxed, math_label
from reward_server.checker.extract import extract_reference

FIXTURES = Path(__file__).parent / "fixtures"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_gsm8k_jsonl_via_cli_with_skip_report(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "gsm8k.jsonl"
    with caplog.at_level(logging.INFO):
        rc = gtpo_main(["data", "gsm8k", "--split", "test", "--input",
                        str(FIXTURES / "gsm8k_test.jsonl"), "--out", str(out)])  # fmt: skip
    assert rc == 0
    rows = read_jsonl(out)
    assert [r["label"] for r in rows] == ["72", "10", "1,200"]
    assert rows[0]["prompt"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": rows[0]["prompt"][1]["content"]},
    ]
    assert rows[0]["prompt"][1]["content"].startswith("Natalia sold clips")
    assert {r["source"] for r in rows} == {"gsm8k"} and {r["split"] for r in rows} == {"test"}
    # The truncated solution (no "####") is skipped, listed with its reason, and logged.
    skipped = read_jsonl(tmp_path / "gsm8k.jsonl.skipped.jsonl")
    assert skipped == [{"index": 2, "id": "gsm8k-test-2", "reason": "no_final_answer_marker"}]
    assert "skipped 1 rows (no_final_answer_marker: 1)" in caplog.text


def test_system_prompt_is_the_papers_instruction() -> None:
    for tag in ("<reasoning>", "</reasoning>", "<answer>", "</answer>", "step by step"):
        assert tag in SYSTEM_PROMPT


def test_math_folder_reads_only_the_split_and_skips_unboxed(tmp_path: Path) -> None:
    prepared = prepare("math", "test", input_path=FIXTURES / "MATH")
    assert [r["label"] for r in prepared.records] == ["6", "\\frac{1}{2}"]
    assert [r["level"] for r in prepared.records] == ["Level 1", "Level 2"]
    # geometry/7.json has no \boxed{}: skipped with the reason; train/ is never read.
    assert [s["reason"] for s in prepared.skipped] == ["no_boxed_answer"]
    assert prepared.skip_summary() == {"no_boxed_answer": 1}
    train = prepare("math", "train", input_path=FIXTURES / "MATH")
    assert [r["label"] for r in train.records] == ["0"]


def test_math_label_nested_braces_and_fbox() -> None:
    boxed = {"solution": "so $\\boxed{\\frac{\\sqrt{3}}{2}}$ and not \\boxed"}
    assert math_label(boxed) == ("\\frac{\\sqrt{3}}{2}", None)
    assert math_label({"solution": "last: \\boxed{1} then \\boxed{(2, 3)}"}) == ("(2, 3)", None)
    assert math_label({"solution": "\\fbox{7}"}) == ("7", None)
    assert math_label({"solution": "no box"}) == (None, "no_boxed_answer")
    assert math_label({"problem": "MATH-500 style", "answer": "9"}) == ("9", None)


def test_the_last_box_is_read_as_the_reward_server_reads_a_label() -> None:
    """Data preparation reads MATH's boxes itself (no server runs there); these are the cases
    the reward server's own reading of a label settles the same way."""
    assert last_boxed("\\boxed{1} then \\boxed{unclosed") == "1"  # an unclosed box: the one before
    assert last_boxed("}{ \\boxed{a{b}c}} {") == "a{b}c"  # stray braces around it do not count
    assert last_boxed("so \\boxed 5.") == "5"  # brace-less, the sentence's full stop dropped
    assert last_boxed("\\boxed \n $7$") == "$7"
    assert last_boxed("\\boxed \\boxed{2}") == "2"  # a box in the token of a brace-less one
    assert last_boxed("\\boxed{}") == "" and last_boxed("\\boxedx{3}") is None
    assert last_boxed("\\fbox{7} \\boxed{8}", "\\fbox") == "7"
    assert math_label({"solution": "\\boxed{ } and \\fbox{4}"}) == ("4", None)


def test_labels_read_back_unchanged_by_the_reward_server() -> None:
    # The label is written in the form the server's reference extraction leaves as it is.
    records = prepare("math", "test", input_path=FIXTURES / "MATH").records
    records += prepare("gsm8k", "test", input_path=FIXTURES / "gsm8k_test.jsonl").records
    for record in records:
        assert extract_reference(record["label"]) == record["label"]


def test_aime_json_list_with_int_and_missing_answers() -> None:
    prepared = prepare("aime24", "test", input_path=FIXTURES / "aime24.json")
    assert [(r["id"], r["label"]) for r in prepared.records] == [("60", "204"), ("61", "33")]
    assert prepared.records[0]["year"] == "2024"
    assert prepared.skipped == [{"index": 2, "id": "62", "reason": "no_answer"}]


def test_parquet_folder_selects_split_by_file_name(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp_path / "aime25" / "data"
    folder.mkdir(parents=True)
    test = {"problem": ["Find x.", "Find y."], "answer": [27.0, 70.0]}
    pq.write_table(pa.table(test), folder / "test-00000-of-00001.parquet")
    pq.write_table(pa.table({"problem": ["Other"], "answer": [1.0]}), folder / "train-0.parquet")
    prepared = prepare("aime25", "test", input_path=tmp_path / "aime25")
    # Parquet float answers 27.0 are written as the integers they are.
    assert [r["label"] for r in prepared.records] == ["27", "70"]


def test_plain_and_chat_formats(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]")
    tok.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    tok.save_pretrained(tmp_path / "tok")
    src = FIXTURES / "aime24.json"
    plain = prepare("aime24", "test", input_path=src, fmt="plain").records[0]["prompt"]
    assert plain == SYSTEM_PROMPT + "\n\nEvery morning Aya goes for a 9-kilometer-long walk. " \
        "Find the number of minutes the walk takes her.\n"  # fmt: skip
    out = tmp_path / "chat.jsonl"
    gtpo_main(["data", "aime24", "--input", str(src), "--out", str(out), "--format", "chat",
               "--tokenizer", str(tmp_path / "tok"), "--limit", "1"])  # fmt: skip
    (row,) = read_jsonl(out)
    assert row["prompt"].startswith(f"<|system|>{SYSTEM_PROMPT}<|user|>Every morning")
    assert row["prompt"].endswith("<|assistant|>")
    with pytest.raises(SystemExit, match="--format chat needs --tokenizer"):
        gtpo_main(["data", "aime24", "--input", str(src), "--out", str(out), "--format", "chat"])


class FakeDataset:
    """What ``datasets.load_dataset(..., split=...)`` returns, as far as we use it."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


def test_hub_path_calls_load_dataset_with_the_usual_names() -> None:
    calls: list[tuple[Any, ...]] = []

    def fake_load(name: str, config: str | None, split: str) -> FakeDataset:
        calls.append((name, config, split))
        if name == "openai/gsm8k":
            return FakeDataset([{"question": "1+1?", "answer": "1+1=2\n#### 2"}])
        if name == "EleutherAI/hendrycks_math":
            return FakeDataset([{"problem": f"{config}?", "solution": "\\boxed{1}"}])
        return FakeDataset([{"problem": "AIME?", "answer": 5}])

    gsm = prepare("gsm8k", "train", load_dataset=fake_load)
    assert calls == [("openai/gsm8k", "main", "train")]
    assert gsm.records[0]["label"] == "2"
    calls.clear()
    math = prepare("math", "test", load_dataset=fake_load)
    assert calls == [("EleutherAI/hendrycks_math", s, "test") for s in MATH_SUBJECTS]
    assert len(math.records) == len(MATH_SUBJECTS)
    calls.clear()
    prepare("aime24", "test", load_dataset=fake_load)  # the hub names its only split "train"
    prepare("aime25", "test", load_dataset=fake_load)
    prepare("amc23", "test", load_dataset=fake_load)
    assert calls == [("HuggingFaceH4/aime_2024", None, "train"), ("math-ai/aime25", None, "test"),
                     ("math-ai/amc23", None, "test")]  # fmt: skip
    calls.clear()
    prepare("math", "test", hub_name="hendrycks/competition_math", load_dataset=fake_load)
    assert calls == [("hendrycks/competition_math", None, "test")]
    calls.clear()
    prepare("aime24", "test", hub_name="me/aime", hub_configs=["I", "II"], hub_split="train",
            load_dataset=fake_load)  # fmt: skip
    assert calls == [("me/aime", "I", "train"), ("me/aime", "II", "train")]


def test_hub_path_through_a_real_datasets_object() -> None:
    datasets = pytest.importorskip("datasets")
    rows = [{"question": "2+2?", "answer": "#### 4"}, {"question": "x", "answer": "no marker"}]

    def fake_load(name: str, config: str | None, split: str) -> Any:
        return datasets.Dataset.from_list(rows)

    prepared = prepare("gsm8k", "test", load_dataset=fake_load)
    assert [r["label"] for r in prepared.records] == ["4"]
    assert prepared.skip_summary() == {"no_final_answer_marker": 1}


def test_evaluation_sets_refuse_a_train_split() -> None:
    with pytest.raises(ValueError, match="aime24 has only the test split"):
        prepare("aime24", "train", load_dataset=lambda *a, **k: [])


def test_errors_say_what_to_change(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown source 'mmlu'"):
        prepare("mmlu", "test", input_path=tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        prepare("gsm8k", "test", input_path=tmp_path / "missing.jsonl")
    (tmp_path / "rows.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match=r"unsupported file type '\.csv'"):
        prepare("gsm8k", "test", input_path=tmp_path / "rows.csv")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(SystemExit, match="no usable rows"):
        gtpo_main(["data", "gsm8k", "--input", str(empty), "--out", str(tmp_path / "o.jsonl")])
