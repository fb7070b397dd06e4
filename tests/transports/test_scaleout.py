"""Several gateway nodes on one real Redis: real ``agui-engine serve --event-log
redis://...`` subprocesses, a real redis-server started by the tests, real HTTP.

What is checked: a run cut at any byte on one node resumes on the other with no
event lost or repeated (ids and payloads); DELETE on any node cancels the run
where it runs; a reader on another node keeps the owner's grace timer from
firing; an owner killed with SIGKILL ends its runs with RUN_ERROR{owner_lost}
within OWNER_LOST_BOUND_SECONDS; Redis lost mid-run gives RUN_ERROR to the runs,
503 to new ones and readiness 503, and the nodes recover when it returns;
SIGTERM drains one node (readiness 503, new runs refused) and ends only its own
runs with RUN_ERROR{shutdown}. Metrics are checked by scraping ``/metrics``.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.protocol.codec import encode_event
from agui_engine.transports.redislog import OWNER_LOST_BOUND_SECONDS

from ..redis_server import RedisServer
from .scripted import ScriptedAgent, make_input

ROOT = Path(__file__).resolve().parents[2]
#: The clients here cut their stream and resume on the other node, so they declare
#: it: without X-AGUI-Resumable a closed stream stops its run (spec/transports.md §3.1).
JSON = {"Content-Type": "application/json", "X-AGUI-Resumable": "1"}
#: Every wait in these tests ends by this many seconds (a loaded CI machine).
DEADLINE = 30.0


class Node:
    """One ``agui-engine serve`` subprocess using the shared Redis event log."""

    def __init__(self, redis_url: str, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--event-log", redis_url,
             "--agent", "py:tests.transports.scripted:by_message", "--log-level", "WARNING", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
        )
        self.lines: list[str] = []
        self.url = ""
        started = threading.Event()

        def pump() -> None:  # keeps the pipe drained (a full pipe would block the server)
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.lines.append(line)
                if line.startswith("serving on "):
                    self.url = line.split()[-1]
                    started.set()
            started.set()

        threading.Thread(target=pump, daemon=True).start()
        if not started.wait(DEADLINE) or not self.url:
            self.kill()
            raise AssertionError(f"the gateway did not start: {self.lines}")

    def runs(self, run_id: str) -> str:
        return self.url.rstrip("/") + "/runs/" + run_id

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url.rstrip("/") + path, timeout=DEADLINE)

    def metrics(self) -> str:
        return self.get("/metrics").text

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(DEADLINE)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)


def metric(text: str, name: str) -> float:
    """The value of one sample line of a Prometheus text exposition."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def key_of(r: httpx.Response) -> dict[str, str]:
    """The run key a run's start answered with, as the header that presents it (spec §2.6)."""
    return {"X-AGUI-Run-Key": r.headers["X-AGUI-Run-Key"]}


def body(run_id: str, text: str = "go") -> bytes:
    return msgspec.json.encode(make_input(run_id, text))


def frames(buf: bytes) -> list[tuple[str | None, bytes]]:
    """The complete SSE frames of ``buf`` as (id, data); a cut last frame is dropped."""
    out: list[tuple[str | None, bytes]] = []
    for part in buf.split(b"\n\n")[:-1]:
        fid, data = None, None
        for line in part.split(b"\n"):
            if line.startswith(b"id: "):
                fid = line[4:].decode()
            elif line.startswith(b"data: "):
                data = line[6:]
        if data is not None:
            out.append((fid, data))
    return out


class Stream:
    """An open SSE response read frame by frame, with deadlines."""

    def __init__(self, resp: httpx.Response) -> None:
        self.resp = resp
        self.buf = b""
        self.got: list[tuple[str | None, bytes]] = []
        self._it = resp.aiter_raw()

    async def take(self, n: int | None = None, timeout: float = DEADLINE) -> list[tuple[str | None, bytes]]:
        """Frames until ``n`` more arrived (None: until the stream ends)."""
        start = len(self.got)
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while n is None or len(self.got) - start < n:
            try:
                chunk = await asyncio.wait_for(self._it.__anext__(), end - loop.time())
            except StopAsyncIteration:
                break
            self.buf += chunk
            done = self.buf.rfind(b"\n\n")
            if done >= 0:
                self.got += frames(self.buf[: done + 2])
                self.buf = self.buf[done + 2 :]
        return self.got[start:]


def terminal(frame: tuple[str | None, bytes]) -> dict[str, Any]:
    doc = json.loads(frame[1])
    assert doc["type"] in ("RUN_FINISHED", "RUN_ERROR"), doc
    return doc


@pytest.fixture(scope="module")
def two_nodes(redis_server: RedisServer) -> Iterator[tuple[Node, Node]]:
    nodes: list[Node] = []
    try:
        nodes = [Node(redis_server.url, "--grace-seconds", "1.5") for _ in range(2)]
        yield nodes[0], nodes[1]
    finally:
        for node in nodes:
            node.kill()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=DEADLINE, limits=limits) as c:
        yield c


async def _expected(run_id: str) -> list[bytes]:
    return [encode_event(e) async for e in ScriptedAgent(deltas=20).run(make_input(run_id, "go"))]


async def test_500_runs_cut_at_random_bytes_resume_on_the_other_node(
    two_nodes: tuple[Node, Node], client: httpx.AsyncClient
) -> None:
    a, b = two_nodes
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    gate = asyncio.Semaphore(100)
    cases = []
    for i in range(500):
        rid = f"cut-{seed}-{i}"
        expected = await _expected(rid)
        whole = sum(len(b"id: %s:%d\ndata: %s\n\n" % (rid.encode(), n + 1, p)) for n, p in enumerate(expected))
        cases.append((rid, expected, rng.randint(1, whole)))

    async def one(rid: str, expected: list[bytes], cut: int) -> None:
        async with gate:
            buf = b""
            async with client.stream("POST", a.url, content=body(rid), headers=JSON) as r:
                assert r.status_code == 200, (await r.aread(), a.lines[-5:])
                key = key_of(r)
                async for chunk in r.aiter_raw():
                    buf += chunk
                    if len(buf) >= cut:
                        break
            before = frames(buf[:cut])
            last = before[-1][0] if before else f"{rid}:0"
            after: list[tuple[str | None, bytes]] = []
            async with client.stream("GET", b.runs(rid), headers={**key, "Last-Event-ID": last}) as r:
                if r.status_code == 200:
                    after = await Stream(r).take()
                else:
                    problem = (seed, rid, cut, r.status_code, await r.aread(), b.lines[-3:])
                    assert r.status_code == 204 and len(before) == len(expected), problem
        got = before + after
        assert [fid for fid, _ in got] == [f"{rid}:{n}" for n in range(1, len(expected) + 1)], (seed, rid, cut)
        assert [data for _, data in got] == expected, (seed, rid, cut)

    started = time.monotonic()
    await asyncio.gather(*(one(*case) for case in cases))
    elapsed = time.monotonic() - started
    print(f"500 cut runs resumed on the other node in {elapsed:.1f} s (seed {seed})")
    scraped = b.metrics()
    assert metric(scraped, 'agui_resumes_total{transport="sse"}') >= 500
    assert metric(scraped, 'agui_events_sent_total{transport="sse"}') > 0
    assert metric(a.metrics(), 'agui_runs_ended_total{code="",terminal="RUN_FINISHED"}') >= 500


async def test_delete_on_the_other_node_cancels_where_the_run_runs(
    two_nodes: tuple[Node, Node], client: httpx.AsyncClient
) -> None:
    a, b = two_nodes
    async with client.stream("POST", a.url, content=body("del-1", "hang"), headers=JSON) as r:
        stream = Stream(r)
        assert len(await stream.take(3)) == 3
        key = key_of(r)
        # the id alone is not enough on any node: the run key travels in Redis as a hash
        assert (await client.get(b.runs("del-1"), headers={"Last-Event-ID": "del-1:0"})).status_code == 404
        assert (await client.delete(b.runs("del-1"))).status_code == 404
        gone = await client.delete(b.runs("del-1"), headers=key)
        assert gone.status_code == 204
        rest = await stream.take()
    doc = terminal(rest[-1])
    assert doc["type"] == "RUN_ERROR" and doc["code"] == "cancelled"
    assert (await client.delete(b.runs("del-1"), headers=key)).status_code == 409  # already finished
    assert (await client.delete(b.runs("never-was"))).status_code == 404
    assert metric(a.metrics(), 'agui_runs_ended_total{code="cancelled",terminal="RUN_ERROR"}') >= 1


async def test_a_reader_on_the_other_node_keeps_the_run_alive_past_the_grace_period(
    two_nodes: tuple[Node, Node], client: httpx.AsyncClient
) -> None:
    a, b = two_nodes  # --grace-seconds 1.5
    abandoned = 'agui_runs_ended_total{code="abandoned",terminal="RUN_ERROR"}'
    before = metric(a.metrics(), abandoned)
    async with client.stream("POST", a.url, content=body("grace-1", "hang"), headers=JSON) as r:
        first = await Stream(r).take(3)
        key = key_of(r)
    last = first[-1][0]
    assert last is not None
    async with client.stream("GET", b.runs("grace-1"), headers={**key, "Last-Event-ID": last}) as r:
        with pytest.raises(TimeoutError):
            await Stream(r).take(1, timeout=4.0)  # > 2x the grace period: alive (and silent)
    assert metric(a.metrics(), abandoned) == before
    # That reader left: one grace period (and a heartbeat) later the owner abandons the run.
    deadline = time.monotonic() + DEADLINE
    while metric(a.metrics(), abandoned) == before:
        assert time.monotonic() < deadline, "the run was never abandoned"
        await asyncio.sleep(0.2)
    rest = await client.get(b.runs("grace-1"), headers={**key, "Last-Event-ID": last})
    assert terminal(frames(rest.content)[-1])["code"] == "abandoned"


async def test_an_owner_killed_mid_run_ends_its_runs_with_run_error_in_bounded_time(
    redis_server: RedisServer, client: httpx.AsyncClient
) -> None:
    a, b = Node(redis_server.url), Node(redis_server.url)
    try:
        async with client.stream("POST", a.url, content=body("kill-1", "hang"), headers=JSON) as r:
            first = await Stream(r).take(3)
            key = key_of(r)
        last = first[-1][0]
        assert last is not None
        async with client.stream("GET", b.runs("kill-1"), headers={**key, "Last-Event-ID": last}) as r:
            follower = Stream(r)
            a.kill()  # SIGKILL: no shutdown, no terminal event from the owner
            killed = time.monotonic()
            rest = await follower.take(timeout=OWNER_LOST_BOUND_SECONDS + 10)
        waited = time.monotonic() - killed
        doc = terminal(rest[-1])
        assert doc["type"] == "RUN_ERROR" and doc["code"] == "owner_lost"
        assert rest[-1][0] == f"kill-1:{int(last.rsplit(':', 1)[1]) + 1}"  # an id: resumable like any event
        assert waited <= OWNER_LOST_BOUND_SECONDS + 1, waited
        # A reader arriving later gets the same end at once.
        later = await client.get(b.runs("kill-1"), headers={**key, "Last-Event-ID": last})
        assert later.status_code == 200 and terminal(frames(later.content)[-1])["code"] == "owner_lost"
    finally:
        a.kill()
        b.kill()


async def test_redis_lost_mid_run_then_back(client: httpx.AsyncClient) -> None:
    redis = RedisServer()
    redis.start()
    a = b = None
    try:
        a, b = Node(redis.url), Node(redis.url)
        assert a.get("/readyz").status_code == 200
        async with client.stream("POST", a.url, content=body("lost-1", "hang"), headers=JSON) as r:
            owner = Stream(r)
            first = await owner.take(3)
            follow = {**key_of(r), "Last-Event-ID": first[-1][0] or ""}
            async with client.stream("GET", b.runs("lost-1"), headers=follow) as f:
                follower = Stream(f)
                redis.stop()
                rest = await owner.take(timeout=DEADLINE)
                followed = await follower.take(timeout=DEADLINE)
        assert terminal(rest[-1])["code"] == "event_log_unavailable"
        assert terminal(followed[-1])["code"] == "event_log_unavailable"
        refused = await client.post(a.url, content=body("lost-2"), headers=JSON)
        assert refused.status_code == 503 and refused.headers["Retry-After"]
        assert refused.json()["error"]["code"] == "event_log_unavailable"
        assert a.get("/readyz").status_code == 503 and a.get("/healthz").status_code == 200
        redis.start()  # same port, empty
        deadline = time.monotonic() + DEADLINE
        while a.get("/readyz").status_code != 200 or b.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the nodes did not become ready again"
            await asyncio.sleep(0.2)
        ok = await client.post(a.url, content=body("lost-3"), headers=JSON)
        assert ok.status_code == 200 and [f[1] for f in frames(ok.content)] == await _expected("lost-3")
        again = await client.get(b.runs("lost-3"), headers={**key_of(ok), "Last-Event-ID": "lost-3:5"})
        assert [f[1] for f in frames(again.content)] == (await _expected("lost-3"))[5:]
        assert metric(a.metrics(), 'agui_errors_total{code="event_log_unavailable"}') >= 1
    finally:
        for node in (a, b):
            if node is not None:
                node.kill()
        redis.stop()


async def test_sigterm_drains_one_node_and_ends_only_its_own_runs(
    redis_server: RedisServer, client: httpx.AsyncClient
) -> None:
    a, b = Node(redis_server.url, "--drain", "1.5"), Node(redis_server.url)
    try:
        async with client.stream("POST", a.url, content=body("term-a", "hang"), headers=JSON) as ra, \
                client.stream("POST", b.url, content=body("term-b", "hang"), headers=JSON) as rb:
            on_a, on_b = Stream(ra), Stream(rb)
            key_a = key_of(ra)
            await on_a.take(3)
            await on_b.take(3)
            a.terminate()
            deadline = time.monotonic() + DEADLINE
            while a.get("/readyz").status_code != 503:  # draining: not ready, still serving
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            refused = await client.post(a.url, content=body("term-a2"), headers=JSON)
            assert refused.status_code == 503
            rest = await on_a.take(timeout=DEADLINE)
            assert terminal(rest[-1])["code"] == "shutdown"
            with pytest.raises(TimeoutError):
                await on_b.take(1, timeout=0.5)  # the other node's run goes on
        assert a.proc.wait(DEADLINE) == 0
        assert b.get("/readyz").status_code == 200
        # The other node still serves the drained node's finished run from Redis.
        done = await client.get(b.runs("term-a"), headers={**key_a, "Last-Event-ID": "term-a:0"})
        assert terminal(frames(done.content)[-1])["code"] == "shutdown"
    finally:
        a.kill()
        b.kill()


def test_serve_with_an_unreachable_redis_prints_one_line() -> None:
    port = RedisServer().port  # a free port nobody listens on
    done = subprocess.run(
        [sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--event-log", f"redis://127.0.0.1:{port}/0"],
        capture_output=True, cwd=ROOT, timeout=DEADLINE,
    )
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and len(err) == 1 and "cannot reach Redis" in err[0], err
    bad = subprocess.run(
        [sys.executable, "-m", "agui_engine", "serve", "--event-log", "mysql://x"],
        capture_output=True, cwd=ROOT, timeout=DEADLINE,
    )
    assert bad.returncode == 2 and len(bad.stderr.decode().strip().splitlines()) == 1
