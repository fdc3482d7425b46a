"""The shape of a Llama-style decoder: what the roofline and the calibration forward pass need.

A shape fixes the bytes a forward pass reads (weights, KV cache per token) and the FLOPs it does
per token, so a profile measured for one shape carries the roofline to fall back on outside it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ragraph.errors import ConfigError


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dtype_bytes: int = 2  # bf16

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "name" and (not isinstance(value, int) or isinstance(value, bool)
                                     or value < 1):
                raise ConfigError(f"shape.{f.name}", f"must be a positive integer, got {value!r}")
        if self.heads % self.kv_heads:
            raise ConfigError("shape.kv_heads", f"must divide heads ({self.heads}), got "
                              f"{self.kv_heads}")

    @property
    def params(self) -> int:
        """Parameters: embeddings and LM head (untied), per layer QKV, O, gated MLP, 2 norms."""
        qkv = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim
        out = self.heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        per_layer = qkv + out + mlp + 2 * self.hidden
        return 2 * self.vocab * self.hidden + self.layers * per_layer + self.hidden

    @property
    def weight_bytes(self) -> int:
        return self.params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V for every layer and KV head."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def flops_per_token(self) -> float:
        """The usual 2 FLOPs per parameter per token (attention over context not counted)."""
        return 2.0 * self.params

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# Llama-3.1-8B (Meta's config.json): 8,030,261,248 parameters, 128 KiB of bf16 KV per token.
LLAMA_3_1_8B = ModelShape("Llama-3.1-8B", layers=32, hidden=4096, intermediate=14336, heads=32,
                          kv_heads=8, head_dim=128, vocab=128256)
# Small enough to run the calibration end to end on a CPU in a test (float32 there).
TINY = ModelShape("tiny", layers=2, hidden=64, intermediate=128, heads=4, kv_heads=2,
                  head_dim=16, vocab=256, dtype_bytes=4)
PRESETS = {s.name.lower(): s for s in (LLAMA_3_1_8B, TINY)}


def parse_shape(text: str) -> ModelShape:
    """`llama-3.1-8b`, `tiny`, or a preset then `key=value` overrides: `tiny,layers=4`
    (without a preset the overrides apply to Llama-3.1-8B and the name gets a `custom-` mark)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    base = LLAMA_3_1_8B
    if parts and "=" not in parts[0]:
        name = parts.pop(0).lower()
        if name not in PRESETS:
            raise ConfigError("--shape", f"unknown shape {name!r}; presets: {', '.join(PRESETS)}")
        base = PRESETS[name]
    changes: dict[str, object] = {}
    known = {f.name for f in fields(ModelShape)}
    for part in parts:
        key, _, value = part.partition("=")
        if key not in known or not value:
            raise ConfigError("--shape", f"{part!r}: expected key=value with a key in "
                              f"{', '.join(sorted(known))}")
        changes[key] = value if key == "name" else _integer(key, value)
    if changes and "name" not in changes:
        changes["name"] = f"custom-{base.name}"
    return replace(base, **changes)


def shape_from_json(data: object, origin: str, name: str) -> ModelShape:
    """The `shape` object of a profile file (the model's dimensions; its name is the file's
    model); errors name the file (`origin`) and the key."""
    if not isinstance(data, dict):
        raise ConfigError(origin, "shape: must be an object of the model's dimensions")
    known = {f.name for f in fields(ModelShape)} - {"name"}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(origin, f"shape: unknown keys {', '.join(sorted(unknown))}")
    missing = known - set(data) - {"dtype_bytes"}
    if missing:
        raise ConfigError(origin, f"shape: missing {', '.join(sorted(missing))}")
    try:
        return ModelShape(name, **data)
    except ConfigError as err:
        raise ConfigError(origin, str(err)) from err


def _integer(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError as err:
        raise ConfigError("--shape", f"{key}: expected an integer, got {value!r}") from err
