"""A tiny byte-level BPE trained locally on the task's text (no download).

Digits are split one per token (arithmetic is learnable digit by digit) and the four format
tags are single added tokens, as they are in the chat vocabularies of real models. The
end-of-sequence token is ``<|endoftext|>``, which the reward server strips from the end of a
response like any other end-of-turn token, so a query can be decoded with special tokens kept,
exactly as OpenRLHF does.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from gtpo.demo.task import TAGS

PAD, EOS = "<pad>", "<|endoftext|>"
# Merges on top of the byte alphabet the task uses; the whole vocabulary stays under ~64.
BPE_VOCAB_SIZE = 56


def build_tokenizer(texts: list[str], vocab_size: int = BPE_VOCAB_SIZE) -> Tokenizer:
    """Train the BPE on `texts` (tags removed: they are added tokens) and add the tags."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    plain = []
    for text in texts:
        for tag in TAGS:
            text = text.replace(tag, " ")
        plain.append(text)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[PAD, EOS], show_progress=False
    )
    tokenizer.train_from_iterator(plain, trainer)
    # Added after training so the BPE cannot assign their ids to merges.
    tokenizer.add_tokens([AddedToken(tag, normalized=False, special=False) for tag in TAGS])
    return tokenizer


def check_round_trip(tokenizer: Tokenizer, texts: list[str]) -> None:
    """Fail loudly if decoding does not give the text back: the server would see other text."""
    for text in texts:
        decoded = tokenizer.decode(tokenizer.encode(text).ids, skip_special_tokens=False)
        if decoded != text:
            raise RuntimeError(
                f"tokenizer round trip changed {text!r} into {decoded!r}; the task's "
                "characters must all appear in the tokenizer's training text"
            )
