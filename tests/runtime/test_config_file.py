"""The run's configuration as a TOML file: the same tree, unknown or misplaced keys an error
naming the key and the file, and the documented schema the one the code reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig, knobs
from ragraph.runtime.config_file import read_config

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "config.md"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ragraph.toml"
    path.write_text(text)
    return path


def test_a_file_gives_the_tree_and_keywords_override_it(tmp_path: Path) -> None:
    path = write(tmp_path, 'otlp = "http://127.0.0.1:4318"\n[llm]\nengine = "sim"\n'
                 '[search]\nnprobe = 64\n[scheduler]\nconcurrency = 16\nexecutor = "sequential"\n'
                 '[scale]\nshards = 3\n')
    config = RuntimeConfig.of(read_config(path), concurrency=4)
    assert config.llm.engine == "sim" and config.search.nprobe == 64
    assert config.scheduler.concurrency == 4 and config.scheduler.executor == "sequential"
    assert config.scale.shards == 3 and config.otlp == "http://127.0.0.1:4318"


@pytest.mark.parametrize("text, key, says", [
    ("[scheduler]\nconcurency = 4\n", "scheduler.concurency",
     "unknown key of [scheduler] in {path} (did you mean 'concurrency'?)"),
    ("[llm]\nnprobe = 4\n", "llm.nprobe", "in {path} belongs in [search], not [llm]"),
    ("[search]\notlp = 'http://x'\n", "search.otlp", "belongs in the top level"),
    ("concurrency = 4\n", "concurrency", "in {path} belongs in [scheduler], not the top level"),
    ("[engines]\nname = 'sim'\n", "engines", "unknown top-level key or table in {path}"),
    ("llm = 'sim'\n", "llm", "in {path} must be a table ([llm])"),
    ("[llm\n", "config", "{path} is not valid TOML"),
    # A value of the wrong type, before any part is built from it.
    ("[scale]\nray = 5\n", "scale.ray", "in {path} must be text, got 5"),
    ("[scheduler]\nconcurrency = '8'\n", "scheduler.concurrency",
     "in {path} must be an integer, got '8'"),
    ("[search]\nhot_cache = 1\n", "search.hot_cache", "in {path} must be true or false, got 1"),
    ("[llm]\nreplicas = 'http://a'\n", "llm.replicas", "in {path} must be a list of text"),
    ("[llm]\nreplicas = [1, 2]\n", "llm.replicas", "in {path} must be a list of text"),
    ("otlp = 5\n", "otlp", "in {path} must be text, got 5"),
    ("[scheduler]\ntau = true\n", "scheduler.tau", "in {path} must be a number, got True"),
])
def test_a_bad_key_is_an_error_naming_the_key_and_the_file(tmp_path: Path, text: str, key: str,
                                                            says: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        read_config(path)
    assert err.value.field == key
    assert says.format(path=path) in str(err.value)


def test_a_bad_value_is_the_error_its_flag_gives(tmp_path: Path) -> None:
    path = write(tmp_path, "[scheduler]\nconcurrency = 0\n")
    with pytest.raises(ConfigError, match="^concurrency: must be a positive integer, got 0$"):
        RuntimeConfig.of(read_config(path))
    with pytest.raises(ConfigError, match="^config: cannot read"):
        read_config(tmp_path / "missing.toml")


def test_the_guide_documents_every_knob_and_its_example_loads(tmp_path: Path) -> None:
    guide = GUIDE.read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", guide, re.MULTILINE))
    assert documented == set(knobs())
    example = re.search(r"```toml\n(.*?)```", guide, re.DOTALL)
    assert example is not None
    config = RuntimeConfig.of(read_config(write(tmp_path, example.group(1))))
    assert config.llm.engine == "sim" and config.scheduler.concurrency == 16


def test_a_file_that_is_not_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "ragraph.toml"
    path.write_bytes(b'[llm]\nengine = "sim"\nmodel = "caf\xe9"\n')
    with pytest.raises(ConfigError) as err:
        read_config(path)
    assert err.value.field == "config"
    assert f"{path}:3: not UTF-8 text (byte 0xe9)" in str(err.value)
