"""Bounds per cell (issue 31): the least time a run's measured work could take at its engines'
own rates, measured alone in the same run; known work on known engines gives a known bound."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from ragraph.bench.bounds import LlmRates, Rates, Work, fit_decode, least_time
from ragraph.bench.probe import DECODE_TOKENS, probe_llm, run_prompts, shares_cores
from ragraph.runtime.llm.sim.clock import VirtualClock
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine

LLM = LlmRates(prefill_tok_s=1000.0, step_s=0.02, token_s=0.005, timed_by="engine timers")


def rates(shares: bool) -> Rates:
    return Rates(LLM, embed_s=0.01, scan_vec_s=1e6, per_query=((32, 50_000.0),),
                 shares_cores=shares)


def test_a_runs_known_work_gets_the_sum_of_its_parts_on_shared_cores():
    # 2,000 prompt tokens: 2 s; 100 steps and 400 tokens: 2 + 2 s; 50 queries: 0.5 s embedding
    # and 50 x 50,000 vectors: 2.5 s scanning.
    work = Work(prompt_tokens=2000, completion_tokens=400, decode_steps=100, queries=50,
                vectors=0)
    shared = least_time(work, rates(True), nprobe=32)
    assert (shared.llm_s, shared.embed_s, shared.search_s) == pytest.approx((6.0, 0.5, 2.5))
    assert shared.total_s == pytest.approx(9.0)
    # The LLM on its own device: the cores' 3 s hide behind its 6 s.
    assert least_time(work, rates(False), nprobe=32).total_s == pytest.approx(6.0)
    assert shared.share(wall_s=12.0) == pytest.approx(0.75)


def test_counted_scans_price_the_search_and_uncounted_decode_steps_are_one_a_token():
    work = Work(prompt_tokens=0, completion_tokens=10, decode_steps=0, queries=4,
                vectors=1_000_000)
    b = least_time(work, rates(True), nprobe=32)
    assert b.search_s == pytest.approx(1.0)  # its own count, not 4 x 50,000
    assert b.llm_s == pytest.approx(10 * 0.02 + 10 * 0.005)  # the app decodes alone
    # An nprobe not probed scales the nearest one probed.
    assert rates(True).vectors_per_query(64) == pytest.approx(100_000.0)


def test_the_decode_line_goes_through_affine_points_and_stays_non_negative():
    assert fit_decode([(1, 0.012), (8, 0.026), (16, 0.042)]) == pytest.approx((0.01, 0.002))
    assert fit_decode([(4, 0.03)]) == (0.03, 0.0)  # one batch: flat
    assert fit_decode([(1, 0.05), (8, 0.04)]) == (pytest.approx(0.045), 0.0)  # noise: flat
    step, per = fit_decode([(1, 0.001), (10, 0.1)])  # a line through below zero: the origin's
    assert step == 0.0 and per == pytest.approx((0.001 + 1.0) / 101)
    with pytest.raises(ValueError):
        fit_decode([])


@dataclass(frozen=True)
class LinearGpu:
    """A step costs 10 ms, 0.1 ms a prompt token and 1 ms a sequence decoding."""

    label: str = "linear"

    def step_s(self, prefill_tokens: int, decode_batch: int, context_tokens: int) -> float:
        if not prefill_tokens and not decode_batch:
            return 0.0
        return 0.01 + 1e-4 * prefill_tokens + 1e-3 * decode_batch

    def prefill_s(self, prompt_tokens: int) -> float:
        return self.step_s(prompt_tokens, 0, 0)

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        return self.step_s(0, batch, 0)


def test_the_probe_measures_a_known_engine_and_prices_known_work_at_its_time():
    async def go():
        engine = SimEngine(SimConfig(cost=LinearGpu(), output_lengths=(1000,)), VirtualClock())
        async with engine:
            found = await probe_llm(engine, batch=8)
            # A cell's work on the same engine: 8 prompts at once, 16 tokens each.
            before = engine.counters()
            await run_prompts(engine, 8, 300, DECODE_TOKENS)
            after = engine.counters()
        return found, before, after

    found, before, after = asyncio.run(go())
    # The better prefill: 8 prompts in one step, the 10 ms shared; ~0.1 ms a token.
    assert 9000 < found.prefill_tok_s < 10_000
    # Decode: 10 ms a step plus 1 ms a sequence, the first token of each coming with its prompt
    # (so a step's batch reads 16/15 of the sequences in it).
    assert found.step_s == pytest.approx(0.01)
    assert found.token_s == pytest.approx(1e-3 * 15 / 16)
    assert found.timed_by == "engine timers"
    busy = (after.prefill_s - before.prefill_s) + (after.decode_s - before.decode_s)
    work = Work(prompt_tokens=after.prompt_tokens - before.prompt_tokens,
                completion_tokens=after.completion_tokens - before.completion_tokens,
                decode_steps=after.decode_steps - before.decode_steps, queries=0, vectors=0)
    priced = least_time(work, Rates(found, 0.0, 1.0, ((8, 0.0),), False), nprobe=8)
    # Decode exactly; prefill at the probe's best rate (longer prompts than this cell's).
    assert priced.llm_s == pytest.approx(busy, rel=0.02)


def test_the_llm_shares_the_cores_when_it_computes_on_this_machine():
    assert shares_cores("llamacpp", None)
    assert shares_cores("openai", "http://127.0.0.1:8080")
    assert not shares_cores("openai", "http://gpu-box:8080")
    assert not shares_cores("sim", None)


def test_a_rows_work_is_priced_and_written_to_the_csv_and_the_json(tmp_path):
    import csv
    import json
    from dataclasses import replace

    from ragraph.bench import results as R
    from ragraph.bench.cells import Cell, CellResult
    from ragraph.bench.work import with_bound

    row = CellResult(Cell("oneshot", 32, None, 8), "ragraph", "llamacpp", False, 10, 0, 12.0,
                     10 / 12, 1.0, 2.0, 1.2, None, 0, None, 0.0)
    # The same work as the first test: 2,000 prompt tokens computed, 400 generated in 100
    # steps, 50 queries embedded; llm_tokens counts the computed prompt plus the generated.
    row = replace(row, llm_tokens=2400, completion_tokens=400, decode_steps=100,
                  queries_embedded=50)
    priced = with_bound(row, rates(True))
    assert priced.bound.total_s == pytest.approx(9.0) and priced.bound_share == pytest.approx(0.75)
    assert with_bound(row, None).bound is None
    R.write_csv(tmp_path / "bench.csv", [priced, row], {"caption": "c"})
    got = list(csv.DictReader((tmp_path / "bench.csv").open()))
    assert float(got[0]["bound_share"]) == pytest.approx(0.75) and got[1]["bound_share"] == ""
    assert float(got[0]["bound_search_s"]) == pytest.approx(2.5)
    R.write_json(tmp_path / "bench.json", [priced, row], {"caption": "c"})
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["rates"]["llm"]["prefill_tok_s"] == 1000.0 and saved["rates"]["shares_cores"]
    assert saved["runs"][0]["bound"]["llm_s"] == pytest.approx(6.0)
    assert saved["runs"][0]["bound_share"] == pytest.approx(0.75)
    assert saved["runs"][1]["bound"] is None


def test_a_missed_llamacpp_target_says_how_near_ragraph_ran_to_its_bound():
    from dataclasses import replace

    from ragraph.bench import reasons as W
    from ragraph.bench import results as R
    from ragraph.bench.cells import Cell, CellResult
    from ragraph.bench.work import with_bound

    def run(executor: str, thr: float) -> CellResult:
        return replace(CellResult(Cell("hyde", 32, None, 8), executor, "llamacpp", False, 10, 0,
                                  12.0, thr, 1.0, 2.0, 1.2, None, 0, None, 0.0),
                       llm_tokens=2400, completion_tokens=400, decode_steps=100,
                       queries_embedded=50, prefill_s=8.0, decode_s=2.0)

    ours, theirs = with_bound(run("ragraph", 1.2), rates(True)), run("langgraph", 1.0)
    throughput, _ = R.llamacpp_targets([ours, theirs])
    why = W.why_engine_bound(throughput, [ours, theirs])
    assert "ragraph ran at 75% of its bound (9 s" in why
    assert "at its bound it would reach 1.11x langgraph" in why  # 10 requests in 9 s vs 1.0/s
    assert "of its bound" not in W.why_engine_bound(throughput, [run("ragraph", 1.2), theirs])


def test_the_probes_prompts_fit_a_small_context():
    async def go():
        engine = SimEngine(SimConfig(context_length=400), VirtualClock())
        async with engine:
            return await run_prompts(engine, 2, 384, 1)

    assert all(r.finish_reason != "error" and r.prompt_tokens < 400 for r in asyncio.run(go()))
