"""A tiny sentence-transformers model made on the spot (no download): a 2-layer BERT with
random weights, a word-piece vocabulary of the words the tests use, and mean pooling, saved
with ``SentenceTransformer.save`` to a directory the shipped local provider then loads by path,
as a user's downloaded model is."""

from __future__ import annotations

from pathlib import Path

WORDS = [
    "the",
    "deploy",
    "window",
    "is",
    "on",
    "tuesday",
    "friday",
    "staging",
    "database",
    "backup",
    "restore",
    "nightly",
    "cron",
    "job",
    "postgres",
    "sqlite",
    "vector",
    "search",
    "memory",
    "agent",
    "release",
    "notes",
    "coffee",
    "machine",
    "kitchen",
    "office",
    "password",
    "rotation",
    "policy",
    "quarterly",
    "audit",
    "team",
    "lunch",
    "meeting",
    "room",
    "booking",
    "in",
    "at",
    "where",
]

DIMENSIONS = 32


def build(where: Path) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    base = where / "bert"
    base.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS))]
    # the vocabulary as a mapping: transformers 5 ignores a vocab_file here (every word [UNK])
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    assert tokenizer("coffee machine")["input_ids"][1] != vocab.index("[UNK]")
    tokenizer.save_pretrained(base)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=DIMENSIONS,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.5,  # distinct words, distinct vectors (the default makes all texts alike)
    )
    BertModel(config).save_pretrained(base)
    transformer = models.Transformer(str(base), max_seq_length=64)
    pooling = models.Pooling(DIMENSIONS, pooling_mode="mean")
    model_dir = where / "model"
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(model_dir))
    return model_dir
