"""`ragraph bench --target`: the load generator against a running server, open and closed loop."""

from __future__ import annotations

import asyncio

from ragraph.bench.run.http_load import LoadSpec, drive
from ragraph.bench.run.target import requests_for
from ragraph.cli.main import main


def test_closed_loop_reports_every_request(server):
    spec = LoadSpec(target=server.url, requests=24, rate=None, clients=6, stream_share=0.5)
    report = asyncio.run(drive(spec, requests_for(("hyde", "irg"), 24, None, 0)))
    assert len(report.shots) == 24 and len(report.ok) == 24 and not report.errors()
    assert report.throughput_rps > 0 and report.latency(50) <= report.latency(99)
    streamed = [s for s in report.shots if s.first_token_s is not None]
    assert streamed and all(s.first_token_s <= s.latency_s for s in streamed)


def test_bench_target_command_prints_the_table(server, capsys):
    code = main(["bench", "--target", server.url, "--requests", "8", "--rates", "50",
                 "--workflows", "oneshot", "--stream", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Poisson arrivals at 50 req/s" in out and "8/8" in out and "none" in out


def test_unknown_workflow_counts_as_errors(server):
    spec = LoadSpec(target=server.url, requests=3, rate=None, clients=3)
    report = asyncio.run(drive(spec, requests_for(("nope",), 3, None, 0)))
    assert report.errors() == {"404": 3} and not report.ok
