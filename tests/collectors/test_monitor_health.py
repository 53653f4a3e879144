"""How often the monitor asks /health: every HEALTH_EVERY_S while healthy, every poll while not."""

from __future__ import annotations

from slotop.collectors.monitor import HEALTH_EVERY_S, ReplicaMonitor
from slotop.collectors.replica import ReplicaClient
from tests.support.http_answers import Answer, Request, http_answers
from tests.support.paths import CAPTURES

LOAD = (CAPTURES / "vllm-0.32-cpu-load.txt").read_bytes()


def test_health_is_asked_every_few_seconds_while_healthy_and_each_poll_while_not() -> None:
    healthy = [True]

    def answer(request: Request) -> Answer:
        if request.path == "/health":
            return Answer(200) if healthy[0] else Answer(503, b"engine dead")
        if request.path == "/metrics":
            return Answer(200, LOAD)
        return Answer(404)

    now_s = [100.0]
    with http_answers(answer) as server, ReplicaClient(server.url) as client:
        monitor = ReplicaMonitor(client, clock=lambda: now_s[0])

        def polls(seconds: int) -> list[bool | None]:
            seen = []
            for _ in range(seconds):
                seen.append(monitor.poll().replica.healthy)
                now_s[0] += 1.0
            return seen

        assert polls(11) == [True] * 11
        asked = [r for r in server.requests if r.path == "/health"]
        # the first poll (with who the replica is), then at 5 s and 10 s after it
        assert len(asked) == 1 + int(10 // HEALTH_EVERY_S) == 3
        healthy[0] = False
        assert polls(5) == [True, True, True, True, False]  # the next due check, at 15 s
        healthy[0] = True
        before = len([r for r in server.requests if r.path == "/health"])
        assert polls(2) == [True, True]  # asked again at once while it said unhealthy
        after = len([r for r in server.requests if r.path == "/health"])
        assert after - before == 1  # then healthy again: back to every HEALTH_EVERY_S
