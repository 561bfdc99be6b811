"""A scriptable OpenAI-compatible stub server, for tests, benchmarks and dry runs.

`StubServer` listens on 127.0.0.1 (any free port) in a background thread and answers
``POST /v1/chat/completions`` with whatever its ``responder`` returns for the request: a
completion text, an HTTP error with headers (e.g. 429 + ``Retry-After``), a raw body, or a
delay (to hang past a client's timeout). With no responder it answers every task's prompt with
a well-formed answer derived from a hash of the prompt (deterministic).

Run it alone: ``python -m dualview.synth.testing --latency 0.25`` prints its base URL.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StubReply:
    """What the stub answers: ``text`` as the completion (status 200), or an error."""

    text: str = ""
    status: int = 200
    body: str | bytes | None = None  # raw response body instead of a completion object
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    # Answer only once this event is set (a hang that a test ends when it chooses; the
    # server's loop keeps serving other requests meanwhile).
    hold: threading.Event | None = None


def prompt_of(request: dict[str, Any]) -> str:
    """The text of the last message of a chat request."""
    messages = request.get("messages") or [{}]
    return str(messages[-1].get("content", ""))


def default_reply(request: dict[str, Any]) -> StubReply:
    """A well-formed answer for any dualview task prompt, derived from the prompt's hash."""
    prompt = prompt_of(request)
    tag = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    if "<new_instruction>" in prompt:
        text = f"<answer><new_instruction>Only passages on aspect {tag} count as relevant here."
        text += "</new_instruction></answer>"
    elif "<changed_instruction>" in prompt:
        passage = f"A passage about subject {tag} " + "with plenty of filler words " * 4
        text = (
            f"<answer><changed_instruction>Focus only on case {tag} now.</changed_instruction>"
            f"<changed_instruction_passage>{passage} one</changed_instruction_passage>"
            f"<changed_query>what is item {tag}</changed_query>"
            f"<changed_query_passage>{passage} two</changed_query_passage></answer>"
        )
    elif "<negative>" in prompt:
        first = f"A topical passage about {tag} that breaks the stated condition in one way"
        first += ", with details on dates, places and the people involved."
        second = f"Another text on {tag}: it ignores the requested source type and lists"
        second += " prices, opening hours and customer reviews instead."
        text = (
            f"<answer><instruction>Prefer sources of kind {tag} only.</instruction>"
            f"<negative>{first}</negative><negative>{second}</negative></answer>"
        )
    else:
        text = "<answer>[1]</answer>"
    return StubReply(text)


class StubServer:
    """OpenAI-compatible HTTP stub on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], StubReply] | None = None,
        latency_s: float = 0.0,
        jitter: float = 0.0,
        seed: int = 0,
    ) -> None:
        if not 0.0 <= jitter < 1.0:
            raise ValueError(f"jitter {jitter}: expected a share in [0, 1)")
        self.responder = responder or default_reply
        self.latency_s = latency_s
        # Each answer waits latency_s * U(1 - jitter, 1 + jitter): the mean stays latency_s,
        # and answers stop arriving in lockstep, as they do from a batching LLM server.
        self.jitter = jitter
        self._rng = random.Random(seed)
        self.requests = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> StubServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=1024)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            while True:
                request_line = await reader.readline()
                if not request_line:
                    break
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length) if length else b""
                with self._lock:
                    self.requests += 1
                request = json.loads(body or b"{}")
                reply = self.responder(request)
                await asyncio.sleep(self._latency() + reply.delay_s)
                while reply.hold is not None and not reply.hold.is_set():
                    await asyncio.sleep(0.01)
                writer.write(self._response(reply, request))
                await writer.drain()
        writer.close()

    def _latency(self) -> float:
        if not self.jitter:
            return self.latency_s
        return self.latency_s * self._rng.uniform(1.0 - self.jitter, 1.0 + self.jitter)

    @staticmethod
    def _response(reply: StubReply, request: dict[str, Any]) -> bytes:
        if reply.body is not None:
            payload = reply.body
        elif reply.status == 200:
            payload = json.dumps(
                {
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": reply.text}}
                    ],
                    "usage": {
                        "prompt_tokens": len(prompt_of(request).split()),
                        "completion_tokens": len(reply.text.split()),
                    },
                }
            )
        else:
            payload = json.dumps({"error": {"message": f"stub error {reply.status}"}})
        data = payload if isinstance(payload, bytes) else payload.encode()
        head = [f"HTTP/1.1 {reply.status} STUB", f"Content-Length: {len(data)}"]
        head += ["Content-Type: application/json", "Connection: keep-alive"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    parser.add_argument(
        "--jitter", type=float, default=0.0,
        help="each answer waits latency x U(1-jitter, 1+jitter) (mean unchanged)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="seed of the jitter")
    args = parser.parse_args()
    with StubServer(latency_s=args.latency, jitter=args.jitter, seed=args.seed) as server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
