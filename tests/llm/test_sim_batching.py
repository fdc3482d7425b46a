"""The simulated GPU's step policies (sim/batching.py): vLLM V1's token budget with decode first,
SGLang's alternating prefill and decode batches (mixed chunk off or on), on the engine and as
pure plans."""

import asyncio

import pytest

from ragraph.errors import ConfigError
from ragraph.ir import Sampling
from ragraph.runtime.llm import GenerationRequest
from ragraph.runtime.llm.settings import LlmConfig
from ragraph.runtime.llm.sim.batching import Batching, plan_step
from ragraph.runtime.llm.sim.clock import VirtualClock
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine

VLLM = Batching(token_budget=100, max_running=8)
SGLANG = Batching("sglang", token_budget=100, max_running=8)
MIXED = Batching("sglang", token_budget=100, max_running=8, mixed_chunk=True)


def left_of(needs: dict[str, int]):
    return lambda name: needs[name]


def test_vllm_gives_every_decoding_sequence_its_token_first_then_chunks_prompts_into_the_rest():
    needs = {"d1": 0, "d2": 0, "p1": 60, "p2": 70}
    plan = plan_step(VLLM, ["d1", "d2"], ["p1", "p2"], left_of(needs))
    assert plan.decodes == ("d1", "d2")
    # 100 - 2 decode tokens: p1 whole, p2 chunked to what is left.
    assert plan.chunks == (("p1", 60), ("p2", 38))
    assert plan.admitted == 2 and plan.prompt_tokens + len(plan.decodes) == 100


def test_vllm_continues_a_chunked_prompt_before_admitting_new_ones():
    needs = {"d1": 0, "p2": 32, "new": 50}
    plan = plan_step(VLLM, ["d1", "p2"], ["new"], left_of(needs))
    assert plan.chunks == (("p2", 32), ("new", 50)) and plan.decodes == ("d1",)


def test_vllm_admits_no_more_than_max_running():
    needs = {f"p{i}": 5 for i in range(4)}
    plan = plan_step(Batching(token_budget=100, max_running=3), ["p0"], ["p1", "p2", "p3"],
                     left_of(needs))
    assert plan.admitted == 2 and [s for s, _ in plan.chunks] == ["p0", "p1", "p2"]


def test_sglang_runs_a_prefill_batch_alone_while_decode_waits():
    needs = {"d1": 0, "d2": 0, "p1": 60}
    plan = plan_step(SGLANG, ["d1", "d2"], ["p1"], left_of(needs))
    assert plan.chunks == (("p1", 60),) and plan.decodes == ()
    # No prompt to admit: a decode batch of every running sequence.
    decode = plan_step(SGLANG, ["d1", "d2"], [], left_of(needs))
    assert decode.decodes == ("d1", "d2") and not decode.chunks


def test_sglang_mixed_chunk_lets_decode_ride_and_take_its_share_of_the_budget():
    needs = {"d1": 0, "d2": 0, "p1": 200}
    plan = plan_step(MIXED, ["d1", "d2"], ["p1"], left_of(needs))
    assert plan.decodes == ("d1", "d2") and plan.chunks == (("p1", 98),)


def test_batching_names_a_bad_field():
    with pytest.raises(ConfigError, match="policy"):
        Batching("tgi")
    with pytest.raises(ConfigError, match="token_budget"):
        Batching(token_budget=0)
    with pytest.raises(ConfigError, match="mixed_chunk"):
        Batching(mixed_chunk=True)
    with pytest.raises(ConfigError, match="sim_batching"):
        LlmConfig(engine="sim", sim_batching="sglang-chunky")
    assert LlmConfig(engine="sim", sim_batching="sglang-mixed", sim_budget=512).batching() == \
        Batching("sglang", token_budget=512, mixed_chunk=True)


def req(rid: str, prompt_tokens: int, n: int = 64) -> GenerationRequest:
    ids = tuple(range(1 + 1000 * len(rid), 1 + 1000 * len(rid) + prompt_tokens))
    return GenerationRequest(rid, prompt_ids=ids, params=Sampling(max_tokens=n))


async def _serve(batching: Batching, arrivals: list[tuple[int | None, GenerationRequest]],
                 lengths: tuple[int, ...] = (12,)):
    """Each request submitted at once (None) or when the one at that index has its first
    token: arrivals on the simulated GPU's own timeline (the virtual clock has one sleeper)."""
    clock = VirtualClock()
    cfg = SimConfig(output_lengths=lengths, batching=batching, prefix_cache_tokens=0)
    async with SimEngine(cfg, clock) as eng:
        streams = []
        for after, request in arrivals:
            if after is not None:
                await streams[after].next_event()
            streams.append(eng.submit(request))
        results = [await s.result() for s in streams]
        return results, eng.counters(), clock.now()


def test_a_long_prompt_is_chunked_under_the_budget_and_finishes_beside_decoding_ones():
    """No starvation: a prompt eight budgets long prefills a chunk a step while the running
    sequences keep decoding, and it ends."""
    budget = Batching(token_budget=256)
    results, used, _ = asyncio.run(_serve(budget, [(None, req("a", 50)), (None, req("b", 60)),
                                                   (0, req("c", 2048))]))
    assert [r.finish_reason for r in results] == ["stop"] * 3
    assert used.mixed_steps >= 8  # c's chunks, with a and b riding in them
    assert max(i for i, n in enumerate(used.prompt_passes) if n) <= 8  # no pass over 256


def test_decode_rides_in_prompt_passes_under_vllm_and_waits_under_sglang():
    arrivals = [(None, req("a", 300))] + [(k - 1, req("r" * k, 300)) for k in range(1, 9)]
    _, vllm, _ = asyncio.run(_serve(Batching(), arrivals))
    _, sglang, _ = asyncio.run(_serve(Batching("sglang"), arrivals))
    _, mixed, _ = asyncio.run(_serve(Batching("sglang", mixed_chunk=True), arrivals))
    assert vllm.mixed_steps > 0 and mixed.mixed_steps > 0 and sglang.mixed_steps == 0
    # Sat out, a decoding sequence waits for every prefill batch before its decode step.
    assert sglang.worst_decode_wait_s > vllm.worst_decode_wait_s > 0


@pytest.mark.parametrize("batching", [Batching(token_budget=64), Batching("sglang"),
                                      Batching("sglang", token_budget=100, mixed_chunk=True)])
def test_outputs_are_the_same_whatever_the_policy(batching: Batching):
    arrivals = [(None if k < 2 else k - 2, req("q" * (k + 1), 40 + 37 * k)) for k in range(6)]
    reference, _, _ = asyncio.run(_serve(Batching(), arrivals, lengths=(5, 30)))
    results, _, _ = asyncio.run(_serve(batching, arrivals, lengths=(5, 30)))
    assert [(r.text, r.token_ids) for r in results] == \
        [(r.text, r.token_ids) for r in reference]


def test_idle_seconds_count_the_gap_between_requests():
    async def main():
        clock = VirtualClock()
        async with SimEngine(SimConfig(output_lengths=(2,)), clock) as eng:
            await eng.submit(req("a", 20, n=2)).result()
            await clock.sleep(1.0)  # the engine waits for work meanwhile, asleep on no clock
            await eng.submit(req("b", 20, n=2)).result()
            return eng.counters(), clock.now()

    used, end = asyncio.run(main())
    assert used.idle_s == pytest.approx(1.0)
    assert used.idle_s + used.busy_s == pytest.approx(end)
