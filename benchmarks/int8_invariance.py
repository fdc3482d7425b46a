"""Where int8 query vectors first depend on their batch, stage by stage, on one device.

    python benchmarks/int8_invariance.py [--device cuda] [--questions 64] [--model DIR]

MiniLM's int8 packed forward (int8.py, packed.py) runs over the questions one at a time and all in
one batch, keeping every stage's output (embeddings; per layer the quantized values, the int32
sums, q/k/v, attention, each norm, the activation; the mean pooling; the normalization); it prints
per stage how many questions got the same bits alone and batched, and the first stage that
differs. Each float32 op is then also run alone on identical inputs (a text's rows, sliced from
the batch's, against the whole batch), which names the op whose kernel sees the batch without
what came before it muddling the answer; plus the TF32 flags and CUDA's vectors against the CPU's.
Not a test: a diagnosis for a lent GPU (docs/benchmarks/gpu.md says what it found).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from gpu_embedder import questions

from ragraph.runtime.retrieval.embed.embedder import Embedder, EmbedderConfig
from ragraph.runtime.retrieval.embed.int8 import Int8Linear, exact_matmul
from ragraph.runtime.retrieval.embed.packed import attend
from ragraph.runtime.retrieval.embed.spec import MINILM_NAME


def traced_forward(model, layers, texts: list[str]) -> tuple[list[str], list[list]]:
    """Each stage's output split per text: (stage names, per stage one tensor a text)."""
    import torch

    transformer = model[0]
    bert = transformer.auto_model
    ids = transformer.tokenizer(texts, truncation=True,
                                max_length=transformer.max_seq_length)["input_ids"]
    lengths = [len(row) for row in ids]
    device = bert.device
    names, outs = [], []

    def keep(name, tensor):
        names.append(name)
        outs.append([t.cpu() for t in torch.split(tensor, lengths)])
        return tensor

    with torch.inference_mode():
        tokens = torch.tensor([t for row in ids for t in row], device=device).unsqueeze(0)
        positions = torch.cat([torch.arange(n, device=device) for n in lengths]).unsqueeze(0)
        x = keep("embeddings", bert.embeddings(input_ids=tokens, position_ids=positions,
                                               token_type_ids=torch.zeros_like(tokens))[0])
        for i, layer in enumerate(layers):
            x = _traced_layer(layer.args[0], layer.args[1], x, lengths,
                              lambda name, t, i=i: keep(f"L{i}.{name}", t))
        pooled = torch.stack([rows.mean(0) for rows in torch.split(x, lengths)])
        names.append("mean pooling")
        outs.append(list(pooled.cpu()))
        names.append("normalize")
        outs.append(list(torch.nn.functional.normalize(pooled, dim=1).cpu()))
    return names, outs


def _linear(linear: Int8Linear, x, keep, name: str):
    import torch

    step = x.abs().amax(1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny) / 127
    values = keep(f"{name} int8 values", torch.round(x / step).to(torch.int8))
    sums = keep(f"{name} int32 sums", exact_matmul(values, linear.weight))
    return keep(name, sums.to(torch.float32) * step * linear.scale + linear.bias)


def _traced_layer(layer, heads: int, x, lengths: list[int], keep):
    width = x.shape[1]
    qkv = _linear(layer.qkv, x, keep, "qkv")
    q, k, v = qkv[:, :width], qkv[:, width:2 * width], qkv[:, 2 * width:]
    attended = keep("attention", attend(q, k, v, lengths, heads))
    out = _linear(layer.attention_out, attended, keep, "attention out")
    mid = keep("attention norm", layer.attention_norm(out + x))
    inner = keep("gelu", layer.activation(_linear(layer.intermediate, mid, keep, "intermediate")))
    return keep("output norm", layer.output_norm(_linear(layer.output, inner, keep, "output")
                                                 + mid))


def stage_report(alone: list[list], batched: list[list], names: list[str]) -> dict[str, int]:
    """Per stage, how many texts got the same bits alone and batched."""
    import torch

    return {name: sum(torch.equal(a[s][0], b) for a, b in zip(alone, batched[s], strict=True))
            for s, name in enumerate(names)}


def isolated_ops(model, layers, texts: list[str]) -> dict[str, str]:
    """Each float op on the batch's own inputs: per text, its slice alone vs its rows of the
    batched result."""
    import torch

    names, outs = traced_forward(model, layers, texts)
    by_name = dict(zip(names, outs, strict=True))
    layer = layers[0].args[0]
    ops: dict[str, tuple[Callable, str]] = {
        "layernorm (L0 attention norm)": (layer.attention_norm, "L0.attention out"),
        "gelu (L0)": (layer.activation, "L0.intermediate"),
        "int8 linear (L0 intermediate)": (layer.intermediate, "L0.attention norm"),
        "int_mm only (L0 qkv)": (lambda v: exact_matmul(v, layer.qkv.weight), "L0.qkv int8 values"),
    }
    device = next(model.parameters()).device
    report = {}
    with torch.inference_mode():
        for label, (op, stage) in ops.items():
            parts = [t.to(device) for t in by_name[stage]]
            whole = torch.split(op(torch.cat(parts)), [len(p) for p in parts])
            same = sum(torch.equal(op(p), w) for p, w in zip(parts, whole, strict=True))
            report[label] = f"{same}/{len(parts)}"
        pooled = torch.stack(by_name["mean pooling"]).to(device)
        whole = torch.nn.functional.normalize(pooled, dim=1)
        single = [torch.nn.functional.normalize(p[None], dim=1)[0] for p in pooled]
        report["normalize (batch rows vs one row)"] = \
            f"{sum(torch.equal(a, b) for a, b in zip(single, whole, strict=True))}/{len(pooled)}"
    return report


def diagnose(model_name: str, device: str, texts: list[str]) -> dict:
    import torch

    embedder = int8_embedder(model_name, device)
    model, layers = embedder._model, embedder._layers  # the forward the query embedder runs
    alone = [traced_forward(model, layers, [t])[1] for t in texts]
    names, batched = traced_forward(model, layers, texts)
    stages = stage_report(alone, batched, names)
    first = next((name for name, same in stages.items() if same < len(texts)), None)
    return {
        "device": device,
        "tf32": {"matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                 "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                 "float32_matmul_precision": torch.get_float32_matmul_precision()},
        "first_stage_that_differs": first,
        "stages": stages,
        "isolated_ops": isolated_ops(model, layers, texts),
        "embedder_alone_vs_batched": _same(embedder, texts),
    }


def int8_embedder(model_name: str, device: str) -> Embedder:
    return Embedder(EmbedderConfig(model=model_name, role="query", device=device,
                                   precision="int8", packed=True))


def _same(embedder: Embedder, texts: list[str]) -> str:
    """The embedder as shipped: each text alone against random batches of random sizes."""
    import numpy as np

    alone = np.stack([embedder.embed([t])[0] for t in texts])
    rng = np.random.default_rng(0)
    order, batched, start = rng.permutation(len(texts)), np.empty_like(alone), 0
    while start < len(texts):
        rows = order[start:start + int(rng.choice([1, 2, 3, 7, 16, 17, 64]))]
        batched[rows] = embedder.embed([texts[i] for i in rows])
        start += len(rows)
    return f"{int((alone == batched).all(axis=1).sum())}/{len(texts)}"


def main() -> None:
    import numpy as np
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--model", default=MINILM_NAME)
    args = parser.parse_args()
    texts = questions(args.questions)
    report = diagnose(args.model, args.device, texts)
    if args.device != "cpu":
        vectors = [int8_embedder(args.model, d).embed(texts) for d in (args.device, "cpu")]
        report["same_as_cpu"] = f"{int((vectors[0] == vectors[1]).all(axis=1).sum())}/{len(texts)}"
        report["max_abs_diff_vs_cpu"] = float(np.abs(vectors[0] - vectors[1]).max())
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
