"""The KV block pool with vLLM V1's automatic prefix caching: hashed full blocks, LRU eviction.

It follows vLLM 0.32's `BlockPool` and `KVCacheManager` in counts rather than block objects:

- a full block of a prompt is named by a chained hash, hash(parent block's hash, its tokens),
  so a block matches only when every token before it matches too (`block_hashes`);
- once computed, a full prompt block is cached under its hash; a later request whose prompt
  starts with the same blocks shares them (a hit: no blocks drawn, no prefill compute);
- a freed block keeps its content: cached blocks wait in LRU order among the free blocks (a
  request's last block first, as vLLM frees tail-first), and are evicted only when a new block is
  needed and no uncached free block is left (vLLM reuses uncached free blocks first);
- free cached blocks count as free, so KV usage is `1 - free / total` as vLLM reports it.

Only prompt blocks are hashed: the sim's generated tokens have no ids, and no new prompt can
repeat them. When two requests compute the same block at once, vLLM caches both copies; here the
second stays uncached (what later requests hit is the same, only that copy is reused sooner).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

ROOT_HASH = hash("slotop.sim.prefix_cache")
"""The parent hash of a prompt's first block (vLLM's NONE_HASH)."""


def block_hashes(token_ids: Sequence[int], block_size: int) -> tuple[int, ...]:
    """The chained hash of every full block of `token_ids`; a partial last block has none."""
    hashes: list[int] = []
    append = hashes.append
    parent = ROOT_HASH
    for block in zip(*[iter(token_ids)] * block_size, strict=False):  # whole blocks only
        parent = hash((parent, block))
        append(parent)
    return tuple(hashes)


class BlockPool:
    """Free-block accounting plus the cache of full blocks by hash, with their reference counts.

    `free_blocks` counts every block no request holds, cached or not; `cached_free_blocks` the
    cached ones among them (always at most `free_blocks`). With caching off, nothing is cached
    and the pool is a plain counter.
    """

    __slots__ = ("_lru", "_refs", "enabled", "free_blocks")

    def __init__(self, num_blocks: int, enabled: bool) -> None:
        self.enabled = enabled
        self.free_blocks = num_blocks
        self._refs: dict[int, int] = {}
        self._lru: OrderedDict[int, None] = OrderedDict()

    @property
    def cached_free_blocks(self) -> int:
        """Free blocks that still hold a cached prefix (eviction candidates)."""
        return len(self._lru)

    @property
    def cached_blocks(self) -> int:
        """Blocks cached under a hash, held by a request or free."""
        return len(self._refs)

    def longest_hit(self, hashes: Sequence[int], max_blocks: int) -> tuple[int, int]:
        """(leading blocks of `hashes` in the cache, how many of them are free), up to `max_blocks`."""
        refs = self._refs
        hit = evictable = 0
        for block_hash in hashes[:max_blocks]:
            count = refs.get(block_hash)
            if count is None:
                break
            hit += 1
            if count == 0:
                evictable += 1
        return hit, evictable

    def touch(self, hashes: Sequence[int]) -> None:
        """Take a reference on cached blocks a request reuses, moving free ones out of the LRU."""
        refs = self._refs
        for block_hash in hashes:
            count = refs[block_hash]
            if count == 0:
                del self._lru[block_hash]
                self.free_blocks -= 1
            refs[block_hash] = count + 1

    def allocate(self, count: int) -> None:
        """Draw `count` new blocks: uncached free ones first, then evict the least recently freed."""
        self.free_blocks -= count
        lru = self._lru
        excess = len(lru) - self.free_blocks
        if excess > 0:
            refs = self._refs
            for _ in range(excess):
                block_hash, _ = lru.popitem(last=False)
                del refs[block_hash]

    def cache(self, hashes: Sequence[int]) -> list[int]:
        """Cache blocks a request just filled and return those it now holds (one reference each).

        A hash already cached keeps its first copy; the request's copy stays uncached.
        """
        refs = self._refs
        held: list[int] = []
        for block_hash in hashes:
            if block_hash not in refs:
                refs[block_hash] = 1
                held.append(block_hash)
        return held

    def release(self, uncached: int, held: Sequence[int]) -> None:
        """Free a request's blocks: `uncached` plain ones, and its references on `held` (block order)."""
        refs = self._refs
        lru = self._lru
        freed = uncached
        for block_hash in reversed(held):
            count = refs[block_hash] - 1
            refs[block_hash] = count
            if not count:
                lru[block_hash] = None
                freed += 1
        self.free_blocks += freed
