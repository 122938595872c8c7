"""A TCP relay that holds every byte for a fixed one-way delay in each direction.

``tc netem`` is how a link's delay is usually emulated; a kernel built without ``sch_netem``
(some containers and VMs) has only the rate (``tbf``). This relay gives such a link its delay:
it runs beside the server, accepts the client's connections and forwards each chunk read, in
order, once ``delay`` has passed since it arrived. Chunks are queued, not waited on, so the relay
adds the delay without limiting the rate: the link's rate stays ``tbf``'s. The queue is short
(``QUEUED`` chunks): a sender faster than the link still meets the link's backpressure, as the
real server's latest-frame-wins stream does. Python's event loop sleeps in whole milliseconds,
so a delay under one is at least one: the benchmark measures the round trip it got.

    python -m benchmarks.delay_proxy --listen 10.200.0.2:50052 --to 127.0.0.1:50051 --delay-ms 2
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from env.common.cli import flag, parse_settings, ruled, run_command
from env.common.fields import number


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings("python -m benchmarks.delay_proxy", __doc__, ProxyArgs, argv=argv)
    return run_command(lambda: relay(args))


log = logging.getLogger("delay_proxy")

CHUNK = 256 * 1024
QUEUED = 4
"""Chunks in flight per direction: far above a delay's worth of bytes at these rates (1 Gbit/s for
2 ms is 250 kB), and little enough that the sender feels the link."""


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay_s`` after it was read, in order, until
    the reader's end (then ``writer`` is closed). A writer whose peer went away gets nothing more:
    the rest is read and dropped, and the other direction's end closes this one's reader."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUED)

    async def deliver() -> None:
        peer_gone = False
        while True:
            due, data = await queue.get()
            if not data:
                break
            if peer_gone:
                continue
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                writer.write(data)
                await writer.drain()
            except ConnectionError:
                peer_gone = True
        writer.close()

    delivering = asyncio.create_task(deliver())
    try:
        while data := await reader.read(CHUNK):
            await queue.put((time.monotonic() + delay_s, data))
    except ConnectionError:
        pass
    await queue.put((0.0, b""))  # the end, after what came before it
    await delivering


async def serve(listen: tuple[str, int], target: tuple[str, int], delay_s: float) -> None:
    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*target)
        except OSError as e:
            log.warning("cannot reach %s:%d: %s", *target, e)
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, server_writer, delay_s), pump(server_reader, client_writer, delay_s))

    server = await asyncio.start_server(relay, *listen)
    log.info("relaying %s:%d -> %s:%d, %.1f ms each way", *listen, *target, delay_s * 1000)
    async with server:
        await server.serve_forever()


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


@dataclass(frozen=True)
class ProxyArgs:
    """Where ``python -m benchmarks.delay_proxy`` listens, where it relays to, and its delay: each field
    its flag, every one required."""

    listen: tuple[str, int] = field(metadata=flag("HOST:PORT the clients connect to", type=address, required=True))
    to: tuple[str, int] = field(metadata=flag("HOST:PORT of the server", type=address, required=True))
    delay_ms: float = field(
        metadata=flag("one-way delay added in each direction", type=ruled(float, number(0, 60_000)), required=True)
    )


def relay(args: ProxyArgs) -> None:
    """Relay until stopped: SIGTERM (how ``bench_link`` ends it) or Ctrl-C, which ``run_command`` says in one line."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(args.listen, args.to, args.delay_ms / 1000))


if __name__ == "__main__":
    raise SystemExit(main())
