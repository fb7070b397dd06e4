"""spec/deploy.md's nginx configuration, as written there, in front of a real gateway: a real
``nginx`` (Debian's package, tests/install-deps.sh) streams a run's events as they happen (no
buffering) and a client resumes the run through it with Last-Event-ID, losing and repeating
nothing (issue 33)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from agui_engine.protocol.codec import SSEDecoder, decode_event
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.sse_server import start_sse_server
from tests.helpers import free_port

from .transports.scripted import ScriptedAgent, make_input
from .waiting import eventually

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "spec" / "deploy.md"


def guide_nginx_conf() -> str:
    """The nginx block of spec/deploy.md (between its nginx-conf markers)."""
    text = GUIDE.read_text(encoding="utf-8")
    block = re.search(r"<!-- nginx-conf -->\s*```nginx\n(.*?)```\s*<!-- /nginx-conf -->", text, re.S)
    assert block, "spec/deploy.md lost its nginx-conf block"
    return block.group(1)


@pytest.fixture
def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is missing: tests/install-deps.sh installs it")
        pytest.skip("nginx is not installed: run tests/install-deps.sh (apt-get install nginx)")
    return found


async def test_the_guides_nginx_config_streams_and_resumes_a_run(tmp_path: Path, nginx_binary: str) -> None:
    agent = ScriptedAgent(deltas=30, pause=0.02)
    server = await start_sse_server(agent, options=RegistryOptions(grace_seconds=10))
    gateway_port = int(server.url.rstrip("/").rsplit(":", 1)[1])
    listen = free_port()
    site = guide_nginx_conf().replace("127.0.0.1:8000", f"127.0.0.1:{gateway_port}").replace(
        "listen 8080;", f"listen 127.0.0.1:{listen};")
    temp = tmp_path / "tmp"
    temp.mkdir()
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"daemon off;\npid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n access_log off;\n client_body_temp_path {temp};\n proxy_temp_path {temp};\n"
        f" fastcgi_temp_path {temp};\n uwsgi_temp_path {temp};\n scgi_temp_path {temp};\n{site}\n}}\n"
    )
    proc = await asyncio.create_subprocess_exec(nginx_binary, "-c", str(conf), "-p", str(tmp_path),
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    url = f"http://127.0.0.1:{listen}/"

    async def up() -> bool:
        try:
            async with httpx.AsyncClient(timeout=1) as c:
                return (await c.get(url + "healthz")).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        for _ in range(200):
            if await up() or proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        assert proc.returncode is None and await up(), (tmp_path / "error.log").read_text() if (tmp_path / "error.log").exists() else ""
        h = {"Content-Type": "application/json", "Accept": "text/event-stream", "X-AGUI-Resumable": "1"}
        body = msgspec.json.encode(make_input("via-nginx"))
        first: list[Any] = []
        async with httpx.AsyncClient(timeout=30) as c:
            async with c.stream("POST", url, content=body, headers=h) as resp:
                assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
                key = resp.headers["X-AGUI-Run-Key"]
                decoder = SSEDecoder()
                async for chunk in resp.aiter_raw():
                    first += decoder.feed(chunk)
                    if len(first) >= 5:
                        break  # events arrive while the run goes on: nginx does not buffer them
            assert server.registry is not None and server.registry.active == 1  # the run was still running
            resumed = await c.post(url, content=body, headers={**h, "X-AGUI-Run-Key": key,
                                                               "Last-Event-ID": first[-1].id})
        rest = SSEDecoder().feed(resumed.content)
        seqs = [int(m.id.rpartition(":")[2]) for m in first + rest]
        assert seqs == list(range(1, len(seqs) + 1))  # nothing lost, nothing repeated
        assert decode_event(rest[-1].data).type.value == "RUN_FINISHED"
        await eventually(lambda: not agent.cancelled, what="the run to go on")
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        await server.close()
