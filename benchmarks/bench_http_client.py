"""What reading a streamed HTTP answer costs the client, per item, with httpx's own transport (h11,
pure Python) and with httpx on aiohttp's connection and C parser (``httpx_aiohttp``, what the
provider adapters and ``SSEAgent`` use): a provider's token stream, one chunk per token, from the
loopback OpenAI-compatible server (in a thread of this process; only this thread's CPU is counted).

    python benchmarks/bench_http_client.py            (prints µs per item for each, and the ratio)

In CI the test below runs it once on a short stream, to keep it working; the figures in
spec/benchmarks.md come from the script.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx
from httpx_aiohttp import AiohttpTransport

from agui_engine.adapters import client_from_spec
from agui_engine.adapters.loopback import serve_openai_compatible
from agui_engine.demo.scripted import ScriptedModel
from agui_engine.protocol.events import UserMessage

TRANSPORTS = ("httpx", "httpx-aiohttp")


async def cpu_per_item(base_url: str, transport: str, streams: int) -> float:
    """This thread's CPU seconds per stream item over ``streams`` answers."""
    http = httpx.AsyncClient(transport=AiohttpTransport()) if transport == "httpx-aiohttp" else httpx.AsyncClient()
    client = client_from_spec(f"openai-compatible:{base_url}#scripted", http_client=http)
    items = 0
    started = time.thread_time()
    for _ in range(streams):
        async for _item in client.complete([UserMessage(id="u", content="hi")], []):
            items += 1
    spent = time.thread_time() - started
    await http.aclose()
    return spent / items


def measure(words: int, streams: int, reps: int) -> dict[str, list[float]]:
    text = " ".join(f"word{i}" for i in range(words))
    with serve_openai_compatible(ScriptedModel([text] * (streams * reps * len(TRANSPORTS) + 1))) as endpoint:
        results: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
        for _ in range(reps):  # interleaved
            for transport in TRANSPORTS:
                results[transport].append(asyncio.run(cpu_per_item(endpoint.base_url, transport, streams)))
    return results


def test_both_transports_read_the_whole_stream() -> None:
    results = measure(words=50, streams=1, reps=1)
    assert all(len(v) == 1 and v[0] > 0 for v in results.values())


if __name__ == "__main__":
    found = measure(words=2000, streams=5, reps=5)
    for transport, values in found.items():
        print(f"{transport:<14} {statistics.median(values) * 1e6:7.2f} µs/item "
              f"({min(values) * 1e6:.2f}-{max(values) * 1e6:.2f})")
    print(f"httpx / httpx-aiohttp: {statistics.median(found['httpx']) / statistics.median(found['httpx-aiohttp']):.2f}x")
