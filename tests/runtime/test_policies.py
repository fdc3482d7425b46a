"""The scheduler's decisions are pure functions: tested without engines."""

from __future__ import annotations

import math

import pytest

from ragraph.runtime.scheduler import policies as p
from ragraph.runtime.scheduler import speculation_rules as sr


def test_budget_is_sqrt_two_beta_tr():
    assert p.retrieval_budget_ms(0.5, 40.0) == pytest.approx(math.sqrt(2 * 0.5 * 40.0))


def test_budget_maximizes_the_expected_gain():
    beta, t_r = 0.4, 50.0
    best = p.retrieval_budget_ms(beta, t_r)

    def gain(mb: float) -> float:  # HedraRAG: (t_R - mb)/2 - (t_R/mb)·β
        return (t_r - mb) / 2 - (t_r / mb) * beta

    assert gain(best) >= max(gain(best * 0.5), gain(best * 2.0))


def test_budget_bounds():
    assert p.retrieval_budget_ms(0.0, 10.0) == 0.5  # the floor keeps steps meaningful
    assert p.retrieval_budget_ms(100.0, 2.0) == 2.0  # never more than one whole search
    with pytest.raises(ValueError):
        p.retrieval_budget_ms(-1.0, 1.0)


def test_speculation_only_under_the_utilization_threshold():
    assert p.has_spare_capacity(5, 10, 0.6) and not p.has_spare_capacity(6, 10, 0.6)
    assert not p.has_spare_capacity(0, 0, 0.6)


def test_drift_is_zero_when_the_partial_topk_is_stable():
    assert sr.topk_drift([1, 2, 3], [3, 2, 1]) == 0.0
    assert sr.topk_drift([1, 2], [3, 4]) == 1.0
    assert sr.topk_drift([1, 2, 3, 4], [1, 2, 3, 5]) == pytest.approx(1 - 3 / 5)


def test_prefill_order_prefers_cached_prefixes_but_never_starves():
    ready = [
        p.PrefillCandidate("new", cached_tokens=0, prompt_tokens=100, waited_cycles=0, arrival=2),
        p.PrefillCandidate("warm", cached_tokens=90, prompt_tokens=100, waited_cycles=0, arrival=3),
        p.PrefillCandidate("old", cached_tokens=0, prompt_tokens=100, waited_cycles=32, arrival=1),
    ]
    assert p.order_prefills(ready, starvation_window=32) == ["old", "warm", "new"]


def test_prefetch_budget():
    assert p.prefetch_budget_bytes(25e9, 0.2) == int(5e9)
    assert p.prefetch_budget_bytes(25e9, -1.0) == 0


def test_running_mean():
    m = p.RunningMean(alpha=0.5)
    assert m.add(10.0) == 10.0 and m.add(20.0) == 15.0


def test_loaded_budget_bounds_the_step_overhead():
    # Idle search: the sqrt rule stands.
    assert p.loaded_budget_ms(10.0, 4.0, backlog_ms=5.0) == 10.0
    # A backlog: beta is at most a tenth of a step, never more than the backlog itself.
    assert p.loaded_budget_ms(10.0, 4.0, backlog_ms=500.0) == pytest.approx(36.0)
    assert p.loaded_budget_ms(10.0, 4.0, backlog_ms=20.0) == 20.0
    with pytest.raises(ValueError):
        p.loaded_budget_ms(10.0, -1.0, backlog_ms=1.0)


def test_busy_meter_measures_the_share_of_recent_time_the_engine_computed():
    meter = p.BusyMeter(window_s=1.0)
    assert meter.sample(0.0, 10.0) is None  # nothing to compare with yet
    assert meter.sample(0.3, 10.5) is None  # the window is not over
    assert meter.sample(0.9, 11.0) == pytest.approx(0.9)
    assert meter.sample(1.1, 13.0) == pytest.approx(0.1)  # 0.2 s busy over the last 2 s


def test_an_engine_without_timers_is_never_called_the_bottleneck():
    meter = p.BusyMeter(window_s=1.0)
    meter.sample(0.0, 0.0)
    assert meter.sample(0.0, 5.0) is None  # HTTP and simulated engines report no busy time
    assert not p.engine_is_bottleneck(None, tau=0.6)
    assert p.engine_is_bottleneck(0.95, tau=0.6)
    assert not p.engine_is_bottleneck(0.4, tau=0.6)


def test_prefills_sharing_their_documents_go_back_to_back():
    cands = [p.PrefillCandidate("a", 0, 100, 0, 0, group="docs-1"),
             p.PrefillCandidate("b", 0, 100, 0, 1, group="docs-2"),
             p.PrefillCandidate("c", 0, 100, 0, 2, group="docs-1"),
             p.PrefillCandidate("d", 0, 100, 0, 3)]
    assert p.order_prefills(cands) == ["a", "c", "b", "d"]
    ungrouped = [p.PrefillCandidate(c.rid, 0, 100, 0, c.arrival) for c in cands]
    assert p.order_prefills(ungrouped) == ["a", "b", "c", "d"]


def test_steps_search_whole_where_no_generation_follows():
    staged = p.loaded_budget_ms(p.retrieval_budget_ms(1.0, 40.0), 1.0, 100.0)
    assert p.step_budget_ms(1.0, 40.0, 100.0, generation_follows=True) == staged < 100.0
    assert p.step_budget_ms(1.0, 40.0, 100.0, generation_follows=False) == math.inf
    assert p.step_budget_ms(1.0, None, 100.0, generation_follows=True) == math.inf  # untimed


def test_embedding_batches_grow_while_they_embed_within_one_search():
    assert p.embed_batch_size(None, 40.0, 16, 64) == 16  # nothing measured yet
    assert p.embed_batch_size(11.0, 40.0, 16, 64) == 16  # MiniLM on 2 cores: 3 fit
    assert p.embed_batch_size(1.0, 40.0, 16, 64) == 40
    assert p.embed_batch_size(0.05, 40.0, 16, 64) == 64  # a lookup


def test_waiting_queries_join_a_step_only_when_they_embed_within_its_scan_time():
    assert not p.join_before_step(None, 48, 300.0)  # the embedder not timed yet
    assert p.join_before_step(0.2, 48, 300.0)  # a GPU embedder: 10 ms beside a 300 ms step
    # int8 MiniLM on 2 cores: 192 ms beside a 250 ms step at nprobe 256 (a step of their own
    # would cost about as much); float64's 528 ms would not.
    assert p.join_before_step(4.0, 48, 250.0)
    assert not p.join_before_step(11.0, 48, 300.0)
    assert p.join_before_step(1.0, 300, 300.0) and not p.join_before_step(1.0, 301, 300.0)
    assert not p.join_before_step(0.2, 0, 300.0) and not p.join_before_step(0.2, 8, 0.0)


def test_an_engine_holding_nothing_is_fed_first_and_batches_double_until_one_is_timed():
    assert p.feed_batch(0, timed=False, last=0) == p.FEED_BATCH  # the run's first batch
    assert p.feed_batch(0, timed=True, last=40) == p.FEED_BATCH  # drained mid-run
    assert p.feed_batch(4, timed=False, last=4) == 8
    assert p.feed_batch(12, timed=False, last=8) == 16
    assert p.feed_batch(3, timed=False, last=0) == p.FEED_BATCH
    assert p.feed_batch(12, timed=True, last=8) is None  # the usual batches


def test_an_engine_that_batches_on_its_own_gets_batches_it_can_wait_out():
    # 150 ms of decoding left: 13 queries embed (10 ms each) and search (20 ms) before then.
    assert p.feed_batch(12, True, 8, drain_ms=150.0, per_query_ms=10.0, search_ms=20.0) == 13
    # Nearly drained: FEED_BATCH, never fewer.
    assert p.feed_batch(12, True, 8, drain_ms=5.0, per_query_ms=10.0, search_ms=20.0) == \
        p.FEED_BATCH
    # An engine on the cores (no drain), or no query timed yet: the usual batches.
    assert p.feed_batch(12, True, 8, drain_ms=None, per_query_ms=10.0) is None
    assert p.feed_batch(12, True, 8, drain_ms=150.0, per_query_ms=None) is None
    # The first batches are as before.
    assert p.feed_batch(0, True, 8, drain_ms=150.0, per_query_ms=10.0) == p.FEED_BATCH


def test_prompts_off_the_critical_path_go_in_at_what_a_decode_step_absorbs():
    sizes = [500.0, 500.0, 100.0]
    assert p.leaves_to_release(False, 220.0, 0.0, sizes) == 3  # nothing critical decodes
    assert p.leaves_to_release(True, None, 0.0, sizes) == 3  # steps not observable
    assert p.leaves_to_release(True, 220.0, 0.0, sizes) == 1  # one at least
    assert p.leaves_to_release(True, 220.0, 500.0, sizes) == 0  # one still prefilling
    assert p.leaves_to_release(True, 0.0, 0.0, sizes) == 1  # not timed yet: one at a time
    assert p.leaves_to_release(True, 1000.0, 100.0, sizes) == 1  # 100 + 500 fit, not + 500
    assert p.leaves_to_release(True, 1200.0, 100.0, sizes) == 3
    assert p.leaves_to_release(True, 1200.0, 0.0, []) == 0


def test_a_split_pays_when_its_early_finishers_gain_more_than_the_others_lose():
    # 2 retrievals end 30 ms sooner; 10 of the step and 6 queued lose 3 ms of sharing each.
    assert p.split_pays(finishing=2, waiting=16, rest_ms=30.0, lost_ms=3.0)
    assert not p.split_pays(finishing=1, waiting=16, rest_ms=30.0, lost_ms=3.0)
    assert p.split_pays(finishing=1, waiting=0, rest_ms=1.0, lost_ms=50.0)  # nobody waits
    assert not p.split_pays(finishing=0, waiting=4, rest_ms=30.0, lost_ms=0.0)  # ends nothing
    with pytest.raises(ValueError):
        p.split_pays(-1, 4, 1.0, 1.0)


def test_a_split_pays_for_one_retrieval_whose_partial_top_k_may_start_its_generation():
    # One retrieval alone on the search thread: a split ends nothing sooner, and costs β.
    assert not p.split_pays(finishing=0, waiting=1, rest_ms=60.0, lost_ms=0.5)
    # Its partial top-k may start its generation on an idle engine: adopted half the time,
    # that generation starts 60 ms sooner.
    assert p.split_pays(finishing=0, waiting=1, rest_ms=60.0, lost_ms=0.5, speculating=0.5)
    # Not when the rest is shorter than what the split costs.
    assert not p.split_pays(finishing=0, waiting=1, rest_ms=0.8, lost_ms=0.5, speculating=0.5)
    with pytest.raises(ValueError):
        p.split_pays(0, 1, 1.0, 1.0, speculating=-1.0)


def test_adoption_rate_starts_at_the_prior_and_follows_the_settlements():
    assert sr.adoption_rate(0, 0) == sr.PRIOR_ADOPTION
    assert 0 < sr.adoption_rate(0, 1) < sr.PRIOR_ADOPTION  # one rollback does not stop speculation
    assert sr.adoption_rate(90, 100) == pytest.approx(0.885, abs=0.01)
    with pytest.raises(ValueError):
        sr.adoption_rate(3, 2)


def test_speculation_backs_off_under_one_half_adopted_once_enough_settled():
    assert not sr.backs_off(0, 0)  # the prior: nothing settled, speculation stays on
    assert not sr.backs_off(0, sr.BACKOFF_MIN_SETTLED - 1)  # a few early rollbacks do not stop it
    assert sr.backs_off(0, sr.BACKOFF_MIN_SETTLED)
    assert sr.backs_off(3, 8)  # 37.5% adopted
    assert not sr.backs_off(4, 8)  # one half is enough
    assert not sr.backs_off(8, 8)
    with pytest.raises(ValueError):
        sr.backs_off(3, 2)


def test_held_back_retrievals_explore_one_in_n_deterministically():
    chosen = [i for i in range(3 * sr.EXPLORE_EVERY) if sr.explores(i)]
    assert chosen == [0, sr.EXPLORE_EVERY, 2 * sr.EXPLORE_EVERY]  # the first at once, no dice
    with pytest.raises(ValueError):
        sr.explores(-1)


def test_settlements_keep_a_recent_window_so_speculation_recovers():
    recent = sr.Settlements(window=8)
    for _ in range(8):
        recent.add(False)
    assert sr.backs_off(recent.adopted, recent.settled)
    for adopted in range(1, 5):  # accurate again: each adoption pushes a rollback out
        recent.add(True)
        assert (recent.adopted, recent.settled) == (adopted, 8)
    assert not sr.backs_off(recent.adopted, recent.settled)  # 4 of the last 8: on again


def test_the_first_partial_top_k_may_be_speculated_on_later_ones_only_when_settled():
    assert sr.speculate_on(views=1, drift=1.0, max_drift=0.0)  # nothing before it to drift from
    assert not sr.speculate_on(views=2, drift=0.4, max_drift=0.0)  # it changed: wait
    assert sr.speculate_on(views=3, drift=0.0, max_drift=0.0)  # unchanged over the last step
    assert sr.speculate_on(views=2, drift=0.4, max_drift=0.5)


def test_a_partial_top_k_counts_for_speculation_past_a_share_of_the_probe_list():
    share = sr.SPECULATE_AFTER_SHARE
    assert not sr.counts_for_speculation(searched=int(share * 256) - 1, probed=256)
    assert sr.counts_for_speculation(searched=int(share * 256), probed=256)
    assert not sr.counts_for_speculation(searched=0, probed=0)
    assert not sr.speculate_on(views=0, drift=0.0, max_drift=0.0)  # none past the share yet


def test_engine_order_puts_the_critical_path_first_then_the_shortest_prefill_left():
    def cand(rid: str, prompt: int, cached: int, arrival: int, critical: bool = False):
        return p.PrefillCandidate(rid, cached_tokens=cached, prompt_tokens=prompt,
                                  waited_cycles=0, arrival=arrival, critical=critical)

    ready = [cand("answer-long", 900, 0, 1), cand("answer-short", 300, 0, 2),
             cand("hypo", 800, 0, 3, critical=True), cand("answer-cached", 900, 700, 4),
             cand("answer-tie", 300, 0, 5)]
    assert p.order_for_engine(ready) == ["hypo", "answer-cached", "answer-short", "answer-tie",
                                         "answer-long"]


def test_prompts_stream_to_an_engine_that_is_the_bound_while_the_search_thread_has_time():
    assert p.stream_prompts("auto", engine_share=0.95, search_share=0.2)
    assert p.stream_prompts("auto", engine_share=0.95, search_share=None)
    assert not p.stream_prompts("auto", engine_share=0.95, search_share=0.7)  # cores the bound
    assert not p.stream_prompts("auto", engine_share=0.3, search_share=0.1)  # engine has room
    assert not p.stream_prompts("auto", engine_share=None, search_share=0.1)  # on the cores
    assert p.stream_prompts("retrieval", engine_share=None, search_share=0.9)
    assert not p.stream_prompts("step", engine_share=1.0, search_share=0.0)


def test_speculation_load_counts_generations_on_their_way_until_the_engine_is_measured():
    assert p.speculation_load(2, 10, None) == 2 + 9  # the speculating retrieval is one of them
    assert p.speculation_load(2, 0, None) == 2
    assert p.speculation_load(2, 10, 0.3) == 2  # measured: the share says whether it is fed
