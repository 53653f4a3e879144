"""The header's view: its items in order, each ranked by how long it stays as the screen narrows.

The header is two lines that never wrap. The view says what each line holds and how much each
item matters; the pane fits them to its width, leaving out the least important first (see
`slotop.tui.panes.header.fit`). The freshness and the replica's URL never go: past everything
else, they are cut with an ellipsis.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from slotop import fmt
from slotop.collectors.engines import engine_label, kv_unit
from slotop.collectors.snapshot import uptime_s
from slotop.redact import shown_url
from slotop.tui.views.inputs import Inputs, ReplayHeader, snapshot_of, stale_reason

ALWAYS = 100
"""The rank of an item never left out (cut with an ellipsis only once nothing else can go)."""

# How long each item stays as the header narrows: the lowest goes first.
ATTACHED = 0  # how long slotop has watched: the least news
BLOCK_SIZE = 1
RECORDED = 1  # a replay's file and recording time: in the replay's own words too
DEMO_WORDS = 2  # "SIMULATED replica (slotop demo)" becomes "SIMULATED"
VERSION = 3
READING = 4
BLOCKS = 4
KV_DTYPE = 5
UPTIME = 6  # a fresh uptime is a restart
MODEL = 7


@dataclass(frozen=True, slots=True)
class HeaderPart:
    """One item of a header line: its words and its rank (`keep`: the higher, the longer it
    stays). An item with `short` words takes them at its rank instead of going, and then stays."""

    text: str
    keep: int
    short: str | None = None


@dataclass(frozen=True, slots=True)
class HeaderView:
    """Who the replica is and whether the data is fresh: the first line the freshness then the
    model, the second where the replica is and its cache shape."""

    status: tuple[HeaderPart, ...]
    who: tuple[HeaderPart, ...]
    where: tuple[HeaderPart, ...]
    state: str  # "fresh", "stale", "waiting", "paused" or "replay"

    @property
    def freshness(self) -> str:
        """The freshness words in full."""
        return _joined(self.status)

    @property
    def title(self) -> str:
        """The model and vLLM version in full."""
        return _joined(self.who)

    @property
    def cache(self) -> str:
        """The second line in full."""
        return _joined(self.where)


def _joined(parts: tuple[HeaderPart, ...]) -> str:
    return "  ".join(part.text for part in parts)


def header_view(inputs: Inputs) -> HeaderView:
    """Model, vLLM version, URL, cache shape, uptime, and freshness with the reason."""
    snapshot = snapshot_of(inputs)
    url = shown_url(inputs.settings.replica.url)
    where: list[HeaderPart] = []
    if inputs.simulated:
        where.append(HeaderPart("SIMULATED replica (slotop demo)", DEMO_WORDS, short="SIMULATED"))
    attached = HeaderPart(
        f"attached {fmt.coarse_duration(inputs.now_s - inputs.started_s)}", ATTACHED
    )
    if snapshot is None:
        who = (HeaderPart("model N/A", MODEL), HeaderPart("vLLM N/A", VERSION))
        where += [HeaderPart(url, ALWAYS), HeaderPart("KV N/A", KV_DTYPE), attached]
    else:
        replica, kv = snapshot.replica, snapshot.kv
        one, many = kv_unit(replica.engine, kv.block_size_tokens)
        who = (
            HeaderPart(replica.model_name or "model N/A", MODEL),
            HeaderPart(f"{engine_label(replica.engine)} {replica.version or 'N/A'}", VERSION),
        )
        where += [
            HeaderPart(shown_url(replica.url) if replica.url else url, ALWAYS),
            HeaderPart(f"KV {kv.cache_dtype or 'N/A'}", KV_DTYPE),
            *(
                (HeaderPart(f"{one} {fmt.number(kv.block_size_tokens)} tok", BLOCK_SIZE),)
                if one != "token"
                else ()
            ),
            HeaderPart(f"{fmt.number(kv.blocks_total)} {many}", BLOCKS),
            HeaderPart(fmt.uptime(uptime_s(replica.started_at_s, inputs.now_s)), UPTIME),
            attached,
        ]
    if inputs.replay is not None:
        return replay_header(inputs, inputs.replay, who, tuple(where[:-1]))
    if inputs.paused:
        return HeaderView(_status("PAUSED (p resumes)"), who, tuple(where), "paused")
    if inputs.poll is None:
        return HeaderView(_status("waiting for the first scrape…"), who, tuple(where), "waiting")
    reason = stale_reason(inputs)
    if reason is not None:
        return HeaderView(_status(f"STALE: {reason}"), who, tuple(where), "stale")
    return HeaderView(_status("fresh"), who, tuple(where), "fresh")


def _status(words: str) -> tuple[HeaderPart, ...]:
    return (HeaderPart(words, ALWAYS),)


def replay_header(
    inputs: Inputs,
    replay: ReplayHeader,
    who: tuple[HeaderPart, ...],
    where: tuple[HeaderPart, ...],
) -> HeaderView:
    """A replay's header: REPLAY, where in the recording and how fast, when it was recorded, and
    whether the data was stale at that instant (the replay has no attached time)."""
    at = inputs.now_s
    state = "▶" if replay.playing else "paused"
    position = (
        f"{time.strftime('%H:%M:%S', time.localtime(at))} "
        f"({fmt.clock_span(at - replay.start_s)} of "
        f"{fmt.clock_span(replay.end_s - replay.start_s)})"
    )
    status = [HeaderPart(f"REPLAY {state} {replay.speed:g}×", ALWAYS), HeaderPart(position, ALWAYS)]
    if replay.reading:
        status.append(HeaderPart("reading…", READING))
    reason = stale_reason(inputs)
    if inputs.poll is None:
        status.append(HeaderPart("no poll yet", ALWAYS))
    elif reason is not None:
        status.append(HeaderPart(f"STALE: {reason}", ALWAYS))
    recorded = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(replay.recorded_at_s))
    source = HeaderPart(f"recorded {recorded} in {replay.source}", RECORDED)
    return HeaderView(tuple(status), who, (source, *where), "replay")
