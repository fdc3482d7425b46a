"""Slow and foreign clients, on raw sockets where httpx would be too polite: a connection that
never finishes its headers or its body is closed (408 once it began a request), however it
trickles; connections past --max-connections get 503; a Host header this server does not answer
to gets 400 (DNS rebinding); a client that leaves mid-upload is counted, not logged."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from ragraph.serve import ServeSettings
from tests.serve.conftest import SIM, graphs
from tests.serve.servers import captured_logs, metric, serving, until

SAFETY_S = 30  # a socket read never waits longer (the server closes far sooner)


@pytest.fixture(scope="module")
def strict():
    settings = ServeSettings(port=0, header_timeout_s=0.5, body_timeout_s=0.5)
    with serving(graphs(("oneshot",)), SIM, settings) as served:
        yield served


@contextmanager
def connection(url: str) -> Iterator[socket.socket]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=SAFETY_S) as sock:
        yield sock


def read_to_close(sock: socket.socket) -> bytes:
    """All the server sends until it closes the connection."""
    out = b""
    while chunk := sock.recv(4096):
        out += chunk
    return out


def read_response(sock: socket.socket) -> bytes:
    """One response on a connection kept open: its head, then Content-Length bytes of body."""
    out = b""
    while b"\r\n\r\n" not in out:
        chunk = sock.recv(4096)
        if not chunk:
            return out  # closed before a whole response
        out += chunk
    head, _, body = out.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(4096)
    return head + b"\r\n\r\n" + body


def test_an_idle_connection_is_kept_past_the_header_timeout_then_closed():
    # A client's pool reuses an idle connection (httpx's for up to 5 s): the server must not
    # close it first, or the request sent as it closes gets a reset. Headers get 0.5 s here and
    # an idle connection 2 s: a request 1 s after the last one is answered on the same
    # connection, and the connection closes once it has idled 2 s.
    settings = ServeSettings(port=0, header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=2.0)
    with serving(graphs(("oneshot",)), SIM, settings) as served, connection(served.url) as sock:
        for _ in range(2):
            sock.sendall(b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert read_response(sock).startswith(b"HTTP/1.1 200 ")
            time.sleep(1.0)
        assert read_to_close(sock) == b""
    assert ServeSettings().keep_alive_s > httpx.Limits().keepalive_expiry


def test_headers_never_finished_get_408_and_the_connection_closes(strict):
    before = metric(strict.url, "ragraph_connections_timed_out_total")
    with connection(strict.url) as sock:
        sock.sendall(b"POST /runs/wait HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: applic")
        reply = read_to_close(sock)
    assert reply.startswith(b"HTTP/1.1 408 ") and b"--header-timeout" in reply
    assert metric(strict.url, "ragraph_connections_timed_out_total") == before + 1


def test_a_connection_that_sends_nothing_is_closed(strict):
    with connection(strict.url) as sock:
        assert read_to_close(sock) == b""  # no request began: nothing to answer


def test_headers_trickled_a_byte_at_a_time_are_cut_off(strict):
    """Every byte would reset a keep-alive timer; the deadline is absolute."""
    request = b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 2000
    with connection(strict.url) as sock:
        sock.settimeout(0.05)  # the pace of the trickle, not an order of events
        for byte in request:
            try:
                sock.sendall(bytes([byte]))
                sock.recv(4096)  # returns once the server answered (408) or closed
                break
            except TimeoutError:
                continue  # still open: the next byte
            except OSError:  # reset while sending: closed
                break
        else:
            pytest.fail("the trickling connection was never closed")


def test_a_stalled_body_gets_408_and_the_connection_closes(strict):
    with connection(strict.url) as sock:
        sock.sendall(b"POST /runs/wait HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n{\"workflow\": ")
        reply = read_to_close(sock)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b'"param":"body"' in body
    assert b"--body-timeout" in body


def test_a_client_leaving_mid_upload_is_counted_not_logged(strict):
    with captured_logs() as records:
        with connection(strict.url) as sock:
            sock.sendall(b"POST /runs/wait HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                         b"application/json\r\nContent-Length: 1000\r\n\r\n{\"workflow\": ")
        until(lambda: metric(strict.url, "ragraph_rejected_requests_total", code="499") == 1,
              what="the aborted upload counted")
    assert not [r for r in records if r.levelname in ("ERROR", "CRITICAL") or r.exc_info]


def test_connections_past_the_limit_get_503():
    settings = ServeSettings(port=0, max_connections=2, header_timeout_s=SAFETY_S * 2)
    with serving(graphs(("oneshot",)), SIM, settings) as served:
        connections = served.uvicorn.server_state.connections
        with connection(served.url), connection(served.url):
            until(lambda: len(connections) == 2, what="two connections open")
            assert httpx.get(served.url + "/ok").status_code == 503
        until(lambda: not connections, what="the two connections closed")
        assert httpx.get(served.url + "/ok").status_code == 200


@pytest.mark.parametrize("host, status", [
    ("evil.example.com", 400), ("127.0.0.1.nip.io", 400), ("localhost", 200),
    ("LOCALHOST", 200), ("127.0.0.1", 200), ("[::1]", 200)])
def test_only_loopback_names_are_answered_by_default(server, host, status):
    port = server.url.rsplit(":", 1)[1]
    response = httpx.get(server.url + "/v1/models", headers={"Host": f"{host}:{port}"})
    assert response.status_code == status
    assert metric(server.url, "ragraph_http_responses_total", code="400") >= (status == 400)


def test_allowed_hosts_replace_the_default():
    settings = ServeSettings(port=0, allowed_hosts=("rag.internal", "*.corp.example"))
    with serving(graphs(("oneshot",)), SIM, settings) as served:
        def status(host: str) -> int:
            return httpx.get(served.url + "/ok", headers={"Host": host}).status_code
        assert status("rag.internal") == status("a.corp.example") == 200
        assert status("127.0.0.1") == status("corp.example.evil") == 400
