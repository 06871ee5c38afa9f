"""The live rows' decode inputs, kept on the device for the life of a slot
engine (slots.SlotEngine): each row's last sampled token, the position it
is decoded at, its block table, its adapter and its temperature. Row i of
every tensor is the scheduler's i-th live row; the rows past the live ones
are padding (token 0 at position 0 under no adapter, over the pool's
scratch block), which is what a bucket's padded rows decode (graphs.py).

The host writes them only when rows change, never per step: append writes
the rows an admission round adds, extend one table entry per block a row
grows into, keep moves the rows that go on to the front (one gather per
tensor) and pads the rest, and a decode step advances the positions and
stores its sampled tokens on the device (advance). So a step copies no
table and reads no token to decode the next one; the scheduler reads the
tokens one step late, for stop detection only (slots.py). On cuda every
copy from the host is asynchronous (to_device), so none of them waits for
the step under way."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .kvpool import BLOCK


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """t (on the host) on device without waiting for the device: on cuda
    through pinned memory with an asynchronous copy (a copy from pageable
    memory would synchronise the stream, i.e. wait for the step under way),
    elsewhere t itself moved."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


class DecodeRows:
    """Up to rows live rows of max_blocks blocks each (see the module doc);
    adapters: the names a row may run under, each given its index (1 on,
    0 is no adapter) in name order."""

    def __init__(self, rows: int, max_blocks: int, scratch: int, adapters: Sequence[str], device: torch.device) -> None:
        if rows < 1 or max_blocks < 1:
            raise ValueError("decode rows need at least one row and one block, got %d and %d" % (rows, max_blocks))
        self.n = rows
        self.max_blocks = max_blocks
        self.scratch = scratch
        """The block that padded rows read and write (the pool's reserved one, else any valid id)."""
        self.names = sorted({a for a in adapters if a})
        self.index = {a: i + 1 for i, a in enumerate(self.names)}
        self.device = device
        self.tokens = torch.zeros(rows, dtype=torch.long, device=device)
        self.pos = torch.zeros(rows, dtype=torch.long, device=device)
        """The position each row decodes next: its cached tokens."""
        self.tables = torch.full((rows, max_blocks), scratch, dtype=torch.long, device=device)
        self.adapter = torch.zeros(rows, dtype=torch.long, device=device)
        self.temps = torch.ones(rows, dtype=torch.float64, device=device)
        self.live = 0

    def adapter_index(self, name: str) -> int:
        """The index of an adapter name (0 for none); an unknown one is an error."""
        if not name:
            return 0
        i = self.index.get(name)
        if i is None:
            raise ValueError("adapter %r is not one of the decode rows' %s" % (name, self.names))
        return i

    def _pad(self, lo: int, hi: int) -> None:
        if hi > lo:
            self.tokens[lo:hi] = 0
            self.pos[lo:hi] = 0
            self.tables[lo:hi] = self.scratch
            self.adapter[lo:hi] = 0
            self.temps[lo:hi] = 1.0

    def reset(self) -> None:
        """No live row (a generate call's start, or its end)."""
        self._pad(0, self.live)
        self.live = 0

    def append(
        self,
        tables: Sequence[Sequence[int]],
        pos: Sequence[int],
        adapters: Sequence[str],
        temps: Sequence[float],
        tokens: Sequence[int],
    ) -> None:
        """Adds rows after the live ones: their block tables, positions,
        adapters, temperatures and last tokens (a row whose first token is
        still to be drawn takes it later from set_tokens), in one copy."""
        k = len(tables)
        if k == 0:
            return
        i0 = self.live
        if i0 + k > self.n:
            raise ValueError("%d live rows + %d new exceed the %d decode rows" % (i0, k, self.n))
        nb = max(len(t) for t in tables)
        if nb > self.max_blocks:
            raise ValueError("a row holds %d blocks, the decode rows were sized for %d" % (nb, self.max_blocks))
        host = np.full((k, 3 + nb), self.scratch, dtype=np.int64)
        host[:, 0] = pos
        host[:, 1] = [self.adapter_index(a) for a in adapters]
        host[:, 2] = tokens
        for j, t in enumerate(tables):
            host[j, 3 : 3 + len(t)] = t
        dev = to_device(torch.from_numpy(host), self.device)
        self.pos[i0 : i0 + k] = dev[:, 0]
        self.adapter[i0 : i0 + k] = dev[:, 1]
        self.tokens[i0 : i0 + k] = dev[:, 2]
        self.tables[i0 : i0 + k, :nb] = dev[:, 3:]
        self.temps[i0 : i0 + k] = to_device(torch.tensor(list(temps), dtype=torch.float64), self.device)
        self.live += k

    def set_tokens(self, rows: Sequence[int], tokens: torch.Tensor) -> None:
        """Stores tokens ([len(rows)], on the device) as the last tokens of rows."""
        if not rows:
            return
        lo = rows[0]
        if list(rows) == list(range(lo, lo + len(rows))):
            self.tokens[lo : lo + len(rows)] = tokens
        else:
            self.tokens.index_copy_(0, to_device(torch.tensor(list(rows), dtype=torch.long), self.device), tokens)

    def extend(self, entries: Sequence[tuple[int, int, int]]) -> None:
        """Table entries (row, column, block) of the blocks rows grew into, in one copy."""
        if not entries:
            return
        e = to_device(torch.tensor(entries, dtype=torch.long), self.device)
        self.tables.index_put_((e[:, 0], e[:, 1]), e[:, 2])

    def keep(self, rows: Sequence[int]) -> None:
        """Keeps the live rows rows (ascending), moved to the front in that
        order, and pads the others."""
        k, old = len(rows), self.live
        if list(rows) != list(range(k)):
            idx = to_device(torch.tensor(list(rows), dtype=torch.long), self.device)
            for t in (self.tokens, self.pos, self.tables, self.adapter, self.temps):
                t[:k] = t.index_select(0, idx)
        self._pad(k, old)
        self.live = k

    def advance(self, tokens: torch.Tensor) -> None:
        """After a decode step of the first len(tokens) rows: their sampled tokens, and their next positions."""
        B = tokens.shape[0]
        self.tokens[:B] = tokens
        self.pos[:B] += 1

    def slots_into(self, out: torch.Tensor) -> torch.Tensor:
        """The flat pool slot each of the first len(out) rows writes its key
        and value to (the block of its position, the offset in it), into out."""
        n = out.shape[0]
        pos = self.pos[:n]
        blk = self.tables[:n].gather(1, torch.div(pos, BLOCK, rounding_mode="floor").unsqueeze(1)).squeeze(1)
        torch.add(blk * BLOCK, torch.remainder(pos, BLOCK), out=out)
        return out

    def slots(self, n: int) -> torch.Tensor:
        """slots_into a fresh tensor of the first n rows."""
        return self.slots_into(torch.empty(n, dtype=torch.long, device=self.device))
