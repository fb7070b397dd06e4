"""Issue 22, hole 3: readers that never read, across runs. 300 stalled SSE readers
of one token used to hold every run's log (bounded per run only: 418 MB -> 1.9 GB);
the per-client run cap (RegistryOptions.max_runs_per_client) and the logs' budget of
buffered bytes (max_buffered_bytes) bound what they cost the server. Measured on a
real ``agui-engine serve`` subprocess (its RSS from /proc) with 300 real TCP
connections that read the response headers and then never read again."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import msgspec
import pytest

from .scripted import make_input

ROOT = Path(__file__).resolve().parents[2]
READERS = 300
FLOOD_KIB = 6144  # per run: 6 MiB of deltas, more than the log (4 MiB) and a socket (4 MiB) take
#: The unbounded server must grow past this to count as the hole reproduced.
REPRODUCED_MIB = 400
#: The per-client cap alone: PER_CLIENT runs, each holding its 4 MiB log
#: (DEFAULT_LOG_MAX_BYTES) at ~1.65x in bytes objects, plus a pending write each.
PER_CLIENT = 20
PER_CLIENT_BOUND_MIB = 200
#: The budget alone: (32 MiB + 256 KiB per admitted run) at ~1.65x, plus pending writes.
BUDGET_BYTES = 32 * 1024 * 1024
BUDGET_BOUND_MIB = 160

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def serve(*flags: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agui_engine", "serve", "--transport", "sse", "--port", "0", "--no-inspect",
        "--no-access-log", "--log-level", "warning", "--agent", "py:tests.transports.flood_agent:agent", *flags,
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "AGUI_AUTH_TOKEN": "tok", "AGUI_TEST_FLOOD_KIB": str(FLOOD_KIB)},
    )  # fmt: skip
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "the server did not start"
        if line.startswith("serving on "):
            return proc, line.split()[-1]


async def stalled_reader(port: int, run_id: str) -> tuple[int, bytes, asyncio.StreamWriter]:
    """POST a run, read the response's head, then never read again: (status, head, writer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=16 * 1024)
    body = msgspec.json.encode(make_input(run_id))
    writer.write(
        b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\n"
        b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    return int(head.split()[1]), head, writer


async def growth_with_stalled_readers(*flags: str, stop_above_mib: float | None = None) -> tuple[float, list[int]]:
    proc, url = await serve(*flags)
    writers: list[asyncio.StreamWriter] = []
    try:
        port = int(url.rsplit(":", 1)[1].strip("/"))
        status, _, w = await stalled_reader(port, "warm-up")  # everything a run needs is loaded
        w.close()
        await asyncio.sleep(1.0)
        base = rss_mib(proc.pid)
        statuses = []
        for i in range(READERS):
            status, head, w = await stalled_reader(port, f"stalled-{i}")
            writers.append(w)
            statuses.append(status)
            if status == 503:
                assert b"\r\nRetry-After: " in head
            if stop_above_mib is not None and rss_mib(proc.pid) - base > stop_above_mib:
                return rss_mib(proc.pid) - base, statuses  # shown: no need to load the machine further
        # until the producers are done (RSS steady), or the hole is shown
        last, steady = rss_mib(proc.pid), 0
        for _ in range(120):
            await asyncio.sleep(0.5)
            now = rss_mib(proc.pid)
            if stop_above_mib is not None and now - base > stop_above_mib:
                return now - base, statuses
            steady = steady + 1 if abs(now - last) < 2 else 0
            if steady >= 4:
                break
            last = now
        return rss_mib(proc.pid) - base, statuses
    finally:
        for w in writers:
            w.transport.abort()
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


@pytest.mark.timeout(300)
async def test_300_stalled_readers_of_one_token_are_bounded_by_the_client_cap_and_the_budget() -> None:
    # the hole: no per-client cap, no budget -> every run's log (4 MiB each) is held
    # for its stalled reader, 300 of them (it went past 2 GiB when left to run)
    grown, statuses = await growth_with_stalled_readers(
        "--max-runs-per-client", "0", "--max-buffered-bytes", "0", stop_above_mib=REPRODUCED_MIB
    )
    assert grown > REPRODUCED_MIB and set(statuses) == {200}, (grown, statuses)
    # the per-client cap: one client (one token, one address) holds PER_CLIENT runs;
    # its other requests get 503 + Retry-After
    grown, statuses = await growth_with_stalled_readers(
        "--max-runs-per-client", str(PER_CLIENT), "--max-buffered-bytes", "0"
    )
    assert statuses.count(200) == PER_CLIENT and statuses.count(503) == READERS - PER_CLIENT, statuses
    assert grown < PER_CLIENT_BOUND_MIB, grown
    # the budget: whatever the clients, the logs hold at most the budget plus
    # BUDGET_TRIM_FLOOR_BYTES per run, and new runs get 503 past it
    grown, statuses = await growth_with_stalled_readers(
        "--max-runs-per-client", "0", "--max-buffered-bytes", str(BUDGET_BYTES)
    )
    assert statuses.count(503) > 0 and statuses.count(200) + statuses.count(503) == READERS, statuses
    assert grown < BUDGET_BOUND_MIB, grown
