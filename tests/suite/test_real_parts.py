"""The suite's own rules: a missing real part skips a test on a developer's machine and fails
it under CI=true; the tiers run what they say (the Makefile's targets, as `make -n` prints
them); the host fixture presents the machines it names."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.real import missing, need_module

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("ci", ["", "false", "true", "TRUE"])
def test_a_missing_real_part_skips_and_fails_under_ci(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci.lower() == "true" else pytest.skip.Exception
    with pytest.raises(outcome, match="shared data not found"):
        missing("shared data not found at /nowhere")
    with pytest.raises(outcome, match="could not import 'no_such_model_package'"):
        need_module("no_such_model_package")
    assert need_module("json").__name__ == "json"


def dry_run(target: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    return subprocess.run(["make", "-n", target, "BIN=.venv/bin"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout


def test_setup_does_not_build_llama_server_and_test_all_does():
    assert "llama_server" not in dry_run("setup")
    assert "ragraph index default" in dry_run("setup")
    test_all = dry_run("test-all")
    assert test_all.index("ragraph.bench.server.llama_server build") < test_all.index("pytest")


def test_the_tiers_select_their_tests_and_test_all_reports():
    assert '-m "not slow and not soak"' in dry_run("test")
    test_all = dry_run("test-all")
    assert '-m "not soak"' in test_all and "-rfEs" in test_all and "--durations=25" in test_all
    assert "-m soak" in dry_run("soak")


def test_ci_lints_and_runs_test_all_with_ci_set():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    steps = [line.removeprefix("timed ") for line in script.splitlines()
             if line.startswith(("make ", "timed make ", "export CI"))]
    assert steps == ['export CI="${CI:-true}"', "make setup", "make lint", "make test-all"]


def test_the_host_fixture_presents_its_machine(host):
    from ragraph.runtime.retrieval.embed import int8
    from ragraph.runtime.retrieval.ivf.products import host_product
    from ragraph.runtime.retrieval.ivf.split import last_level_cache_bytes
    from ragraph.runtime.threads import usable_cores

    assert usable_cores() == host.cores == os.cpu_count()
    assert last_level_cache_bytes() == {"512K": 512 * 2**10, "105M": 105 * 2**20}[host.cache]
    assert host_product(384) == host.product
    assert int8.int_mm_is_exact("cpu") is host.exact_int8


def test_setup_compiles_llama_cpp_without_the_multimodal_library_ragraph_never_loads():
    """`make setup` builds llama-cpp-python without mtmd (a minute less on 2 cores), which is
    safe only while nothing in ragraph imports llama-cpp-python's multimodal modules."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k != "CMAKE_ARGS"}
    shown = subprocess.run(["make", "-s", "--eval", "show-cmake-args: ; @echo $$CMAKE_ARGS",
                            "show-cmake-args"], cwd=ROOT, env=env, check=True,
                           capture_output=True, text=True).stdout
    assert shown.split() == ["-DLLAVA_BUILD=OFF"]
    for path in (ROOT / "ragraph").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "mtmd_cpp" not in text and "llava_cpp" not in text, path
