"""What a unary call to Siphon costs in the three ways a client can make it safe from Ctrl-C,
side by side against one simulator server: gRPC's blocking call as it is, the same with the
signals held until it returns (the client's way for short calls), and waiting on its future
(the client's way for long ones, which a signal cancels).

A blocking unary call cut by a signal is never finished and the channel's close() then waits for
it for ever; this measures what each way out of that costs a call.

  python -m benchmarks.bench_unary_call --calls 300 --rounds 5
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from env.common.cli import parse_settings, run_command
from env.common.fields import check_fields, checked, whole
from env.common.machine import describe


def main(argv: list[str] | None = None) -> int:
    (args,) = parse_settings(
        "python -m benchmarks.bench_unary_call", __doc__, UnaryCallArgs, argv=argv, epilog=__doc__.split("\n\n", 2)[2]
    )
    return run_command(lambda: benchmark(args))


@dataclass(frozen=True)
class UnaryCallArgs:
    """How many calls ``python -m benchmarks.bench_unary_call`` times each way: each field its flag."""

    calls: int = checked(300, whole(1, 1_000_000), "calls per round and way")
    rounds: int = checked(5, whole(1, 1000), "rounds, the two ways taking turns")

    def __post_init__(self) -> None:
        check_fields(self)


def benchmark(args: UnaryCallArgs) -> None:
    from pysiphon.generated import siphon_service_pb2 as pb2

    from env.common import interrupts
    from env.sim.launcher import SimServer
    from env.siphon.client import SiphonClient

    timings: dict[str, list[float]] = {}
    with SimServer(size=(84, 84)) as server:
        client = SiphonClient(server.host)
        request = pb2.GetServerStatusRequest()
        status = client._stub.GetServerStatus

        def held() -> None:
            with interrupts.deferred():
                status(request, timeout=5)

        ways = {
            "blocking": lambda: status(request, timeout=5),
            "blocking, signals held": held,
            "future": lambda: status.future(request, timeout=5).result(),
        }
        try:
            for _ in range(args.rounds):
                for name, call in ways.items():
                    started = time.perf_counter()
                    for _ in range(args.calls):
                        call()
                    timings.setdefault(name, []).append((time.perf_counter() - started) / args.calls * 1e6)
        finally:
            client.close()
    print(describe())
    for name, values in timings.items():
        print(f"{name:>22}: {statistics.median(values):7.0f} us a call (median of {args.rounds} rounds)")


if __name__ == "__main__":
    raise SystemExit(main())
