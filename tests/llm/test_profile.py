"""GPU profile files: the shipped H100 profile, the round trip, and errors naming file and field."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.llm.sim.profile import (
    default_profile,
    load_profile,
    shipped_profiles,
    write_profile,
)
from ragraph.runtime.llm.sim.shape import LLAMA_3_1_8B, parse_shape


def test_shipped_profile_is_the_h100_llama_measurements() -> None:
    p = default_profile()
    assert (p.model, p.gpu, p.dtype) == ("Llama-3.1-8B", "NVIDIA H100 80GB", "bfloat16")
    assert p.shape == LLAMA_3_1_8B
    assert p.measured_points == len(p.prefill) + len(p.decode) == 17
    assert {(q.tokens, q.ms) for q in p.prefill} >= {(128, 11.7), (1024, 26.4)}
    assert {(q.batch, q.context, q.ms) for q in p.decode} >= {
        (1, 512, 6.7), (64, 512, 8.6), (128, 2048, 18.9)}
    assert "awaits a lent GPU" in p.note


def test_shipped_profiles_load_by_name() -> None:
    assert shipped_profiles() == ("h100-llama-3.1-8b", "h200-llama-3.1-8b")
    h200 = load_profile("h200-llama-3.1-8b")
    assert h200.gpu == "NVIDIA H200" and h200.model == "Llama-3.1-8B"
    assert load_profile("h100-llama-3.1-8b") == default_profile()
    with pytest.raises(ConfigError, match="h300"):
        load_profile("h300-llama-3.1-8b")


def test_llama_shape_has_the_roofline_constants() -> None:
    assert LLAMA_3_1_8B.params == 8_030_261_248
    assert LLAMA_3_1_8B.kv_bytes_per_token == 131072


def test_write_then_load_gives_the_same_profile(tmp_path: Path) -> None:
    p = default_profile()
    path = tmp_path / "again.json"
    write_profile(p, path)
    assert load_profile(path) == replace(p, name="again")


def good() -> dict:
    return {"format": "ragraph-gpu-profile/1", "model": "m", "gpu": "g", "dtype": "bfloat16",
            "shape": {k: v for k, v in LLAMA_3_1_8B.to_json().items() if k != "name"},
            "prefill": [{"tokens": 128, "ms": 11.7}],
            "decode": [{"batch": 1, "context": 512, "ms": 6.7, "measured": False}]}


def test_a_point_may_be_an_estimate(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(good()))
    p = load_profile(path)
    assert p.measured_points == 1 and not p.decode[0].measured


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(format="v0"), "format"),
    (lambda d: d.update(notes="typo"), "unknown keys notes"),
    (lambda d: d.pop("gpu"), "gpu"),
    (lambda d: d.update(prefill=[]), "prefill"),
    (lambda d: d["prefill"].append({"tokens": 128, "ms": 12.0}), "prefill: two points"),
    (lambda d: d["prefill"][0].update(ms=-1), "prefill[0].ms"),
    (lambda d: d["prefill"][0].update(ms="fast"), "prefill[0].ms"),
    (lambda d: d["decode"][0].pop("context"), "decode[0]: missing context"),
    (lambda d: d["decode"][0].update(batch=0), "decode[0].batch"),
    (lambda d: d["decode"][0].update(measured="yes"), "decode[0].measured"),
    (lambda d: d["decode"][0].update(ctx=3), "decode[0]: unknown ctx"),
    (lambda d: d.pop("shape"), "shape"),
    (lambda d: d["shape"].pop("layers"), "shape: missing layers"),
    (lambda d: d["shape"].update(heads=0), "shape.heads"),
])
def test_bad_profile_names_the_file_and_the_field(tmp_path: Path, edit, field: str) -> None:
    data = good()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_missing_or_broken_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read .*nope.json"):
        load_profile(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ConfigError, match="broken.json: not JSON"):
        load_profile(broken)


def test_shapes_from_presets_and_overrides() -> None:
    assert parse_shape("llama-3.1-8b") == LLAMA_3_1_8B
    tiny = parse_shape("tiny,layers=3")
    assert tiny.layers == 3 and tiny.hidden == 64 and tiny.name == "custom-tiny"
    assert parse_shape("layers=16,name=half").name == "half"
    with pytest.raises(ConfigError, match="--shape.*unknown shape"):
        parse_shape("gpt-5")
    with pytest.raises(ConfigError, match="--shape.*depth=3"):
        parse_shape("tiny,depth=3")
    with pytest.raises(ConfigError, match="shape.kv_heads"):
        parse_shape("tiny,kv_heads=3")
