"""Small sentence-transformers models with random weights, written to a directory in a second:
real model directories (config, tokenizer, safetensors, modules.json, prompts) that load through
the same code as a downloaded model, so the fast tests need no real embedder."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = ("the a of in is and to which who what where when how volcano violin chess glacier "
         "lava ash crust planet bow string wooden instrument board game players squares ice "
         "body moves weight dense plants light water sugar bees honey colonies flowers query "
         "passage represent this sentence for searching relevant passages played made").split()


def tiny_model(directory: Path, *, arch: str = "bert", pooling: str = "mean",
               normalize: bool = True, prompts: dict[str, str] | None = None,
               similarity: str | None = None, hidden: int = 32, seed: int = 0) -> Path:
    """A sentence-transformers model at `directory`: `arch` bert or xlm-roberta (position ids
    after the padding id), `pooling` mean or cls, a Normalize module or not."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    torch.manual_seed(seed)
    hf = directory / "hf"
    _write_encoder(hf, arch, hidden)
    modules = [Transformer(str(hf), max_seq_length=64), Pooling(hidden, pooling_mode=pooling)]
    if normalize:
        modules.append(Normalize())
    model = SentenceTransformer(modules=modules, device="cpu", prompts=prompts or {},
                                similarity_fn_name=similarity)
    model.save(str(directory / "model"))
    return directory / "model"


def _write_encoder(hf: Path, arch: str, hidden: int) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import AutoConfig, AutoModel, BertTokenizerFast

    # [PAD] is id 1: XLM-RoBERTa counts positions from its padding id + 1.
    specials = ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"]
    vocab = {token: i for i, token in enumerate(specials + sorted(set(WORDS)))}
    for c in "abcdefghijklmnopqrstuvwxyz0123456789?.,:()-":
        vocab.setdefault(c, len(vocab))
        vocab.setdefault("##" + c, len(vocab))
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 0), ("[SEP]", 2)])
    hf.mkdir(parents=True, exist_ok=True)
    BertTokenizerFast(tokenizer_object=tok, model_max_length=64).save_pretrained(str(hf))
    config = AutoConfig.for_model(
        arch, vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=80,
        pad_token_id=1, type_vocab_size=1)
    AutoModel.from_config(config).save_pretrained(str(hf))
    # The tokenizer is BERT's whatever the encoder (the model type would pick another).
    settings = json.loads((hf / "tokenizer_config.json").read_text())
    settings["tokenizer_class"] = "BertTokenizer"
    (hf / "tokenizer_config.json").write_text(json.dumps(settings))
