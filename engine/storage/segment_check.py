"""Checking one segment as ``plog verify`` does: its ``.log`` walked batch by batch with its
indexes merged in, without modifying anything (the checks by name are listed in
:mod:`plog.engine.inspect.verify`; ``plog recover`` runs them on the segments it keeps).

* :func:`verify_segment`: one segment (its ``.log`` with ``.index``/``.timeindex``/``.txnindex``);
* :func:`segment_findings`: the same for a caller that owns the :class:`Reporter` and
  learns each segment's offsets (:class:`SegmentResult`);
* :func:`verify_batch_file`: a file of batches that is not a segment (a KRaft ``.checkpoint``).

Nothing is written, no ``.lock`` is taken, and no file is mapped: every file is read with
``pread`` into reused buffers (a broker truncating a segment under us gives a short read,
not a SIGBUS), so memory stays at one log chunk (``chunk_size``, about 1 MiB) plus one index
chunk (1 MiB) whatever the file sizes. A batch longer than the chunk is CRC-checked in
pieces; a hostile length field never sizes an allocation.

Speed. The walk works on batch headers only: one ``struct`` unpack of the fields it needs
and one ``crc32c`` call on a memoryview slice of the chunk per batch, with the offset and
time index entries merged in as the walk passes their positions/offsets
(:class:`~plog.engine.storage.index_check.IndexMerge`). Every batch that is clean, in order
and whose index entries agree is handled by a tight loop (:meth:`SegmentWalk._hot`);
anything else falls through to the general per-batch code (:meth:`SegmentWalk._step`),
which is the reference behaviour. With the native core active (formats/native.py), the hot
loop is its Rust twin (``plog._native.verify_hot``): one call per buffered chunk, the same
batches consumed and the same state left, so findings are identical on both paths
(tests/native/test_verify_twins.py). Records are never decoded (v0/v1 compressed wrappers
are, when a time index entry needs their max timestamp).
"""

from __future__ import annotations

import bisect
import os
import zlib
from typing import Iterator, NamedTuple

from plog.formats.crc import crc32c

from plog.formats.batch_header import ENTRY_HEAD, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_OFFSET, MIN_V2_SIZE
from plog.formats.batch_header import LEGACY_CRC_START, LEGACY_ENTRY_HEAD, RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1
from plog.formats.batch_header import CODEC_MASK, V2_CHECK_HEAD, V2_CRC_START, V2_HEADER, V2_HEADER_SIZE
from plog.formats.batch_header import legacy_min_size, v1_timestamp, v2_header_plausible
from plog.formats import native
from plog.formats.errors import FormatError

from plog.engine.storage.batch_resync import EntryRules, all_zero, find_next_entry, stream_crc
from plog.engine.storage.discovery import SegmentFiles
from plog.engine.storage.file_names import INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, sibling_file
from plog.engine.storage.findings import ERROR, MIN_CHUNK_SIZE, WARNING, Finding, Progress, Repair, Reporter
from plog.engine.storage.findings import VerifyOptions, VerifyStats, io_finding
from plog.engine.storage.index_check import INDEX_CHUNK_BYTES, INF, NO_PENDING, IndexMerge, check_txn_index, open_index
from plog.engine.storage.index_file import IndexFile

#: The native hot loop (None on the reference path).
_verify_hot = native.module.verify_hot if native.active() else None

INT32_MAX = (1 << 31) - 1
#: v0/v1 compressed wrappers larger than this are not decompressed for a timestamp check.
MAX_LEGACY_DECODE = 64 << 20


class SegmentWalk(IndexMerge):
    """One pass over a ``.log`` (or a KRaft ``.checkpoint``) with its indexes merged in.

    State between batches: the last valid batch (``prev_*``), the byte ranges found corrupt
    (``bad``), inside which index entries are not judged, and the buffer (``buf`` holds the
    file's bytes from ``bp``; ``n`` are valid, the cursor is ``p``); the index entries'
    state is :class:`~plog.engine.storage.index_check.IndexMerge`'s.
    """

    def __init__(self, path: str, seg_base: int, next_base: int | None, is_last: bool, rep: Reporter,
                 stats: VerifyStats, options: VerifyOptions, progress: Progress | None,
                 offset_index: IndexFile | None = None, time_index: IndexFile | None = None,
                 kind: str = "segment", index_chunk_bytes: int = INDEX_CHUNK_BYTES):
        self.path = path
        self.seg_base = seg_base
        self.next_base = next_base
        self.is_last = is_last
        self.rep = rep
        self.stats = stats
        self.options = options
        self.progress = progress
        self.kind = kind
        if kind == "segment":
            self.seg_max = seg_base + INT32_MAX if next_base is None else min(seg_base + INT32_MAX, next_base - 1)
        else:
            self.seg_max = INF
        # last valid batch
        self.prev_base = None
        self.prev_last = seg_base - 1
        self.prev_mts = -1
        self.prev_pos = -1
        self.first_offset: int | None = None
        self.batches = 0
        self.seen_legacy = False
        self.bad: list[tuple[int, int]] = []
        self.gap_bad = False
        self._init_indexes(offset_index, time_index, index_chunk_bytes)
        # buffer
        self.fd = -1
        self.fsize = 0
        self.buf = bytearray()
        self.mv = memoryview(self.buf)
        self.bp = 0  # file position of buf[0]
        self.n = 0  # valid bytes in buf
        self.p = 0  # cursor in buf
        self.reported = 0

    # -- driver ------------------------------------------------------------------------------

    def run(self) -> Iterator[Finding]:
        rep = self.rep
        try:
            self.fd = os.open(self.path, os.O_RDONLY)
        except OSError as e:
            io_finding(rep, self.path, e, "open")
            yield from rep.take()
            return
        try:
            self.fsize = os.fstat(self.fd).st_size
            self.stats.files += 1
            self.stats.bytes += self.fsize
            if self.fsize > INT32_MAX:
                rep(ERROR, "segment-size", self.path, None, None,
                    f"the file is {self.fsize} bytes, above Kafka's limit of {INT32_MAX} bytes per segment")
            if self.fsize:
                size = min(max(self.options.chunk_size, MIN_CHUNK_SIZE), self.fsize)
                self.buf = bytearray(size)
                self.mv = memoryview(self.buf)
                more = True
                while more:
                    if self.first_offset is not None:
                        self._hot()
                    more = self._step()
                    if rep.out:
                        yield from rep.take()
            self._finish_indexes()
            self._progress_to(self.fsize)
            self.stats.batches += self.batches
            yield from rep.take()
        except OSError as e:
            io_finding(rep, self.path, e)
            yield from rep.take()
        finally:
            try:
                self.mv.release()
            except BufferError:  # a view still exported (only on an exception path): let GC free it
                pass
            os.close(self.fd)

    @property
    def next_offset(self) -> int:
        """The segment's next offset (Kafka's ``readNextOffset``): after its last valid batch."""
        return self.prev_last + 1

    # -- buffer ------------------------------------------------------------------------------

    def _progress_to(self, pos: int) -> None:
        if self.progress is not None and pos > self.reported:
            self.progress(pos - self.reported)
            self.reported = pos

    def _seek(self, pos: int) -> None:
        if self.bp <= pos <= self.bp + self.n:
            self.p = pos - self.bp
        else:
            self.bp, self.n, self.p = pos, 0, 0

    def _ensure(self, k: int) -> bool:
        """Make ``k`` bytes available at the cursor, refilling the buffer from the file."""
        if self.n - self.p >= k:
            return True
        start = self.bp + self.p
        if start + k > self.fsize or k > len(self.buf):
            return False
        got = os.preadv(self.fd, [self.mv], start)
        want = min(len(self.buf), self.fsize - start)
        if got < want:  # the file shrank under us: what was read is all there is
            self.fsize = start + got
        self.bp, self.n, self.p = start, got, 0
        self._progress_to(start)
        return got >= k

    def _read_at(self, pos: int, size: int) -> bytes:
        """A small read that does not disturb the buffer."""
        return os.pread(self.fd, size, pos)

    # -- the hot loop ----------------------------------------------------------------------------

    def _hot_native(self) -> None:
        """:meth:`_hot_reference` by the native twin (``plog._native.verify_hot``,
        native/src/verify.rs): the same loop over the whole buffered chunk in one call,
        which hands back how far it got and the index entries' state there."""
        bp = self.bp
        iprel = self.ipos - bp if not self.bad_pend and self.last_ioff == self.pend_off else -1
        ii0, ti0 = self.ii, self.ti
        count, p, prev_last, lastp, ii, pend_off, ti = _verify_hot(
            self.mv, self.p, self.n, bp, self.prev_last, self.seg_max, self.seg_base, self.pend_off,
            iprel, ii0, self.ioff, self.apos, self.arel, ti0, self.toff, self.tts, self.prev_tts,
            self.trel, self.ats)
        if count:
            ipos, ioff = (self.apos[ii], self.seg_base + self.arel[ii]) if ii != ii0 else (self.ipos, self.ioff)
            toff, tts = (self.seg_base + self.trel[ti], self.ats[ti]) if ti != ti0 else (self.toff, self.tts)
            self._hot_done(count, p, prev_last, lastp, ii0, ii, ipos, ioff, pend_off, ti0, ti, toff, tts)

    def _hot_reference(self) -> None:
        """Consume, in the current buffer, every batch that is a whole valid v2 batch, in
        offset order and range, whose index entries agree. Stops (without consuming) at the
        first batch that needs anything else; :meth:`_step` handles that one.

        The loop keeps only what its checks need in locals (the layout's sizes too: a global
        lookup per batch is measurable); the rest of the state (previous batch's base offset
        and max timestamp, slots, the pending entry's position) is derived from the buffer
        and the entry lists once, on exit.
        """
        mv, n, p, bp = self.mv, self.n, self.p, self.bp
        prev_last, seg_max = self.prev_last, self.seg_max
        apos, arel, ii, ipos, ioff = self.apos, self.arel, self.ii, self.ipos, self.ioff
        sb = self.seg_base
        pend_off = self.pend_off
        # The entry's position relative to the buffer. Opening an entry here needs the last
        # entry looked at to be the pending one, and no corruption since it: otherwise -1,
        # which sends the batch at the entry's position (or any batch) to the general code.
        iprel = ipos - bp if not self.bad_pend and self.last_ioff == pend_off else -1
        trel, ats, ti, toff, tts, prev_tts = self.trel, self.ats, self.ti, self.toff, self.tts, self.prev_tts
        ii0, ti0 = ii, ti
        unpack = V2_CHECK_HEAD.unpack_from
        crc = crc32c
        overhead, min_size, crc_start = LOG_OVERHEAD, MIN_V2_SIZE, V2_CRC_START
        count = 0
        lastp = -1
        lim = n - V2_HEADER_SIZE  # a whole v2 header must be in the buffer
        while p <= lim:
            base, length, magic, stored, lod, mts = unpack(mv, p)
            stop = p + overhead + length
            if magic != 2 or length < min_size or stop > n or crc(mv[p + crc_start:stop]) != stored:
                break
            last = base + lod
            if base <= prev_last or lod < 0 or last > seg_max:
                break
            timed = last >= toff  # the next time index entry's offset is in this batch
            if timed and (toff < base or tts != mts or tts <= prev_tts):
                break
            if p >= iprel:  # the next offset index entry is at (or before) this batch
                if p != iprel or ioff < base or pend_off > prev_last:
                    break
                pend_off = ioff
                ii += 1
                ipos = apos[ii]
                ioff = sb + arel[ii]
                iprel = ipos - bp
            if timed:
                prev_tts = tts
                ti += 1
                toff = sb + trel[ti]
                tts = ats[ti]
            prev_last = last
            lastp = p
            count += 1
            p = stop
        if count:
            self._hot_done(count, p, prev_last, lastp, ii0, ii, ipos, ioff, pend_off, ti0, ti, toff, tts)

    def _hot_done(self, count: int, p: int, prev_last: int, lastp: int, ii0: int, ii: int, ipos: int, ioff: int,
                  pend_off: int, ti0: int, ti: int, toff: int, tts: int) -> None:
        """The walk's state after the hot loop consumed ``count`` (> 0) batches, the last at
        ``lastp``, and moved the index entries from ``ii0``/``ti0`` to ``ii``/``ti``."""
        sb, apos, trel, ats = self.seg_base, self.apos, self.trel, self.ats
        self.p = p
        self.prev_last = prev_last
        self.prev_pos = self.bp + lastp
        self.prev_base, _, _, _, _, self.prev_mts = V2_CHECK_HEAD.unpack_from(self.mv, lastp)
        self.batches += count
        self.gap_bad = False
        if ii != ii0:
            self.islot += ii - ii0
            self.ii, self.ipos, self.ioff = ii, ipos, ioff
            self.pend_off = pend_off
            self.pend_pos = apos[ii - 1]
            self.pend_slot = self.islot - 1
            self.last_ipos, self.last_ioff = self.pend_pos, pend_off
        if ti != ti0:
            self.tslot += ti - ti0
            self.ti, self.toff, self.tts = ti, toff, tts
            self.prev_toff, self.prev_tts = sb + trel[ti - 1], ats[ti - 1]

    # One loop for the life of the process (formats/native.py decides, PLOG_NATIVE=0 picks the
    # reference); both consume the same batches and leave the same state.
    _hot = _hot_native if native.active() else _hot_reference

    # -- one entry, every case -------------------------------------------------------------------

    def _step(self) -> bool:
        """Check the entry at the cursor in full. Returns False when the walk is over."""
        self._refill_indexes()
        if not self._ensure(HEADER_SIZE_UP_TO_MAGIC + 1):
            pos = self.bp + self.p
            left = self.fsize - pos
            if left > 0:
                self._corrupt(pos, f"{left} bytes are too few for an entry header")
            return False
        mv, p = self.mv, self.p
        pos = self.bp + p
        _, size = ENTRY_HEAD.unpack_from(mv, p)
        magic = mv[p + MAGIC_OFFSET]
        if size < RECORD_OVERHEAD_V0:
            return self._corrupt(pos, f"the size field is {size}, below the minimum entry size of "
                                      f"{RECORD_OVERHEAD_V0}")
        if magic > 2:
            return self._corrupt(pos, f"the magic byte is {magic - 256 if magic > 127 else magic}, not 0, 1 or 2")
        if magic == 2 and size < MIN_V2_SIZE:
            return self._corrupt(pos, f"the v2 batch size {size + LOG_OVERHEAD} is below the minimum of "
                                      f"{V2_HEADER_SIZE} bytes")
        length = LOG_OVERHEAD + size
        if pos + length > self.fsize:
            what = "batch" if magic == 2 else "message"
            return self._corrupt(pos, f"a {what} of {length} bytes runs past the end of the file "
                                      f"({self.fsize - pos} bytes left)")
        if magic == 2:
            return self._v2(pos, length)
        return self._legacy(pos, length, magic)

    def _v2(self, pos: int, length: int) -> bool:
        if self._ensure(length):
            p = self.p
            header = V2_CHECK_HEAD.unpack_from(self.mv, p)
            computed = crc32c(self.mv[p + V2_CRC_START:p + length])
        elif self._ensure(V2_HEADER_SIZE) and self.bp + self.n < pos + length:
            p = self.p
            header = V2_CHECK_HEAD.unpack_from(self.mv, p)
            computed = stream_crc(self.fd, self.bp + self.n, pos + length, crc32c,
                                  crc32c(self.mv[p + V2_CRC_START:self.n]))
        else:  # the file shrank under us
            return self._corrupt(pos, "the file ended inside the batch")
        base, _, _, stored, lod, mts = header
        if computed != stored:
            return self._bad_crc(pos, length, base, base + lod,
                                 f"CRC-32C mismatch: stored {stored}, computed {computed & 0xFFFFFFFF}")
        self._accept(pos, length, base, base + lod, lod, mts)
        self._seek(pos + length)
        return True

    def _legacy(self, pos: int, length: int, magic: int) -> bool:
        if length < LOG_OVERHEAD + RECORD_OVERHEAD_V1 and magic == 1:
            return self._corrupt(pos, f"a v1 message of {length} bytes is below the minimum of "
                                      f"{LOG_OVERHEAD + RECORD_OVERHEAD_V1} bytes")
        whole = self._ensure(length)
        if not whole and not self._ensure(LOG_OVERHEAD + legacy_min_size(magic)):
            return self._corrupt(pos, "the file ended inside the message")
        mv, p = self.mv, self.p
        offset, _, stored, _, attributes = LEGACY_ENTRY_HEAD.unpack_from(mv, p)
        mts = v1_timestamp(mv, p) if magic == 1 else -1
        if whole:
            computed = zlib.crc32(mv[p + LEGACY_CRC_START:p + length])
        else:
            computed = stream_crc(self.fd, self.bp + self.n, pos + length, zlib.crc32,
                                  zlib.crc32(mv[p + LEGACY_CRC_START:self.n]))
        if computed != stored:
            return self._bad_crc(pos, length, offset, offset,
                                 f"CRC-32 mismatch: stored {stored}, computed {computed & 0xFFFFFFFF}")
        self.seen_legacy = True
        self._accept(pos, length, offset, offset, 0, mts, legacy_compressed=bool(attributes & CODEC_MASK))
        self._seek(pos + length)
        return True

    def _plausible(self, pos: int, *, whole: bool) -> bool:
        """Whether the bytes at ``pos`` start like an entry (sizes, magic, v2 attributes; CRC
        not checked). ``whole``: the entry also ends within the file. Otherwise its offset
        must be in this segment's range, however long the file is (a v2 header cut by the
        end of the file counts): a torn first batch passes, random bytes almost never."""
        head = self._read_at(pos, V2_HEADER_SIZE)
        if len(head) < HEADER_SIZE_UP_TO_MAGIC + 1:
            return False
        offset, size = ENTRY_HEAD.unpack_from(head, 0)
        magic = head[MAGIC_OFFSET]
        if size < RECORD_OVERHEAD_V0 or magic > 2:
            return False
        if whole:
            if pos + LOG_OVERHEAD + size > self.fsize:
                return False
        elif offset < self.seg_base or offset > self.seg_max:
            return False
        if magic != 2:
            return True
        if len(head) < V2_HEADER_SIZE:
            return not whole
        attributes, lod = V2_HEADER.unpack_from(head, 0)[5:7]
        return size >= MIN_V2_SIZE and v2_header_plausible(attributes, lod)

    def _bad_crc(self, pos: int, length: int, base: int, last: int, reason: str) -> bool:
        stop = pos + length
        if stop < self.fsize and not self._plausible(stop, whole=True):
            return self._corrupt(pos, f"{reason}, and no entry header follows at position {stop}")
        if stop >= self.fsize:
            return self._damage(ERROR, "torn-tail", pos, base,
                                f"the last batch (offsets {base}..{last}, {length} bytes) fails its check ({reason}): "
                                f"a torn write at the end of the file")
        return self._damage(ERROR, "crc", pos, base, f"the batch of {length} bytes at this position (offsets "
                            f"{base}..{last}) is corrupt: {reason}", end=stop)

    def _damage(self, severity: str, check: str, pos: int, offset: int | None, message: str,
                end: int | None = None) -> bool:
        """Report damage at ``pos`` and mark ``[pos, end)`` corrupt. ``end`` None: the damage
        runs to the end of the file and the walk is over (False); else the walk goes on at
        ``end`` (True)."""
        self.rep(severity, check, self.path, pos, offset, message)
        if end is None:
            self._mark_bad(pos, self.fsize)
            return False
        self._mark_bad(pos, end)
        self._seek(end)
        return True

    def _mark_bad(self, start: int, end: int) -> None:
        self.bad.append((start, end))
        self.gap_bad = True
        if self.pend_off != NO_PENDING:
            self.bad_pend = True

    def _in_bad(self, pos: int) -> bool:
        i = bisect.bisect_right(self.bad, (pos, INF)) - 1
        return i >= 0 and self.bad[i][0] <= pos < self.bad[i][1]

    def _corrupt(self, pos: int, reason: str) -> bool:
        """Bytes at ``pos`` are not a valid entry: classify the damage and resynchronise."""
        left = self.fsize - pos
        if all_zero(self.fd, pos, self.fsize):
            if self.is_last and self.kind == "segment":
                return self._damage(WARNING, "torn-tail", pos, None,
                                    f"the last {left} bytes of the active segment are zeros: a preallocated segment "
                                    f"(log.preallocate=true) not trimmed after an unclean shutdown; recovery "
                                    f"truncates them")
            return self._damage(ERROR, "torn-tail", pos, None, f"the last {left} bytes are zeros, not batches "
                                f"({reason})")
        found = self._resync(pos + 1)
        if found is None:
            if (pos == 0 and self.first_offset is None and left > HEADER_SIZE_UP_TO_MAGIC
                    and not self._plausible(0, whole=False)):
                # Nothing in the file is a batch, not even its first bytes: not a torn write.
                return self._damage(ERROR, "not-a-segment", 0, None,
                                    f"no valid batch anywhere in the file's {left} bytes, and its first bytes are no "
                                    f"entry header ({reason}): this is not a Kafka segment (random or foreign data)")
            return self._damage(ERROR, "torn-tail", pos, None,
                                f"the last {left} bytes are not valid batches ({reason}) and nothing valid follows: "
                                f"a torn write at the end of the file")
        return self._damage(ERROR, "framing", pos, None,
                            f"{found - pos} bytes (positions {pos}..{found - 1}) are not valid batches ({reason}); "
                            f"resynchronised on the valid batch at position {found}", end=found)

    def _resync(self, start: int) -> int | None:
        """The position of the next whole entry with a valid checksum at or after ``start``
        (legacy entries too once the segment held one), or None."""
        found = find_next_entry(self.fd, start, self.fsize, EntryRules(legacy=self.seen_legacy))
        if found is None:
            self.bp, self.n, self.p = self.fsize, 0, 0
        return found

    # -- a valid entry ---------------------------------------------------------------------------

    def _accept(self, pos: int, length: int, base: int, last: int, lod: int, mts: int,
                legacy_compressed: bool = False) -> None:
        if self.first_offset is None:
            self.first_offset = base
        if lod < 0:
            self.rep(ERROR, "offsets", self.path, pos, base, f"the batch's last offset delta is {lod}, negative")
            last = base
        self.batches += 1
        if not self._offsets_in_range(pos, base, last):
            # Offsets that cannot be right (the base offset is outside the CRC): the batch is
            # a hole of unknown offsets for the index checks, as a corrupt range is.
            self._mark_bad(pos, pos + length)
            while self.ipos <= pos:
                self._index_stray(self.islot, self.ipos, self.ioff, pos)
                self._index_next()
            return
        if self.ipos <= pos:
            self._index_at(pos, base, last)
        if self.toff <= last:
            self._time_at(pos, base, last, mts, legacy_compressed)
        self.prev_base, self.prev_last, self.prev_mts, self.prev_pos = base, last, mts, pos
        self.gap_bad = False

    def _offsets_in_range(self, pos: int, base: int, last: int) -> bool:
        """Report offsets outside the segment's range (False) or not above the previous
        batch's (still in range)."""
        rep, path = self.rep, self.path
        if base < self.seg_base:
            rep(ERROR, "offsets", path, pos, base,
                f"base offset {base} is below the segment's base offset {self.seg_base} (its file name)")
            return False
        if last > self.seg_max:
            if self.next_base is not None and last >= self.next_base:
                why = f"reaches the next segment's base offset {self.next_base}"
            else:
                why = (f"is more than {INT32_MAX} above the segment's base offset {self.seg_base} "
                       f"(index offsets are 32-bit)")
            rep(ERROR, "offsets", path, pos, base, f"the batch's last offset {last} {why}")
            return False
        if base <= self.prev_last and self.prev_pos >= 0:
            rep(ERROR, "offsets", path, pos, base,
                f"base offset {base} is not above the last offset {self.prev_last} of the previous batch "
                f"(at position {self.prev_pos})")
        return True

    def _legacy_max_timestamp(self, pos: int, fallback: int) -> int:
        """The max record timestamp of the v0/v1 entry at ``pos`` (decompressing a wrapper)."""
        head = self._read_at(pos, LOG_OVERHEAD + 5)
        if len(head) < LOG_OVERHEAD + 5 or head[MAGIC_OFFSET] > 1:
            return fallback
        size = ENTRY_HEAD.unpack_from(head, 0)[1]
        if size > MAX_LEGACY_DECODE:
            return fallback
        from plog.formats.legacy import LegacyBatch  # only for v0/v1 logs with a time index

        data = self._read_at(pos, LOG_OVERHEAD + size)
        try:
            timestamps = [r.timestamp for r in LegacyBatch(memoryview(data), pos).records()]
        except (FormatError, ValueError):
            return fallback
        return max(timestamps, default=fallback)


# -- segments --------------------------------------------------------------------------------


class SegmentResult(NamedTuple):
    """What a segment walk learnt: offsets of its first and after its last valid batch."""

    first_offset: int | None
    next_offset: int


def segment_findings(seg: SegmentFiles, rep: Reporter, stats: VerifyStats, options: VerifyOptions, *,
                     is_last: bool, next_base: int | None, progress: Progress | None,
                     result: list, repair: Repair | None = None,
                     index_chunk_bytes: int = INDEX_CHUNK_BYTES) -> Iterator[Finding]:
    """Verify one segment; appends its :class:`SegmentResult` to ``result``. ``repair``:
    what a broker's start-up does about this segment's damage (said in each damage
    finding); ``index_chunk_bytes``: bytes of index entries read at a time."""
    stats.segments += 1
    base = seg.base_offset
    oidx = tidx = None
    rep.repair = repair
    try:
        if seg.index is None:
            rep(WARNING, "index-missing", sibling_file(seg.log, INDEX_FILE_SUFFIX), None, None,
                "the segment has no offset index; Kafka rebuilds it (recovers the segment) on load")
        else:
            oidx = open_index(seg.index, "offset", base, is_last, rep, stats)
        if seg.timeindex is None:
            rep(WARNING, "timeindex-missing", sibling_file(seg.log, TIME_INDEX_FILE_SUFFIX), None, None,
                "the segment has no time index; Kafka creates an empty one on load")
        else:
            tidx = open_index(seg.timeindex, "time", base, is_last, rep, stats)
        yield from rep.take()
        walk = SegmentWalk(seg.log, base, next_base, is_last, rep, stats, options, progress, oidx, tidx,
                           index_chunk_bytes=index_chunk_bytes)
        yield from walk.run()
        if seg.txnindex is not None:
            check_txn_index(seg.txnindex, base, walk.next_offset, rep, stats, index_chunk_bytes)
            yield from rep.take()
    finally:
        rep.repair = None
        if oidx is not None:
            oidx.close()
        if tidx is not None:
            tidx.close()
    result.append(SegmentResult(walk.first_offset, walk.next_offset))


def verify_segment(seg: SegmentFiles, options: VerifyOptions | None = None, *, is_last: bool = True,
                   next_base_offset: int | None = None, stats: VerifyStats | None = None,
                   progress: Progress | None = None) -> Iterator[Finding]:
    """Verify one segment: its ``.log`` against its indexes (no partition-level checks).

    ``is_last``: the segment is the partition's active one (a zero-filled tail is then a
    warning); ``next_base_offset``: the next segment's base offset, which no offset here may reach.
    """
    options = options or VerifyOptions()
    stats = stats if stats is not None else VerifyStats()
    rep = Reporter(stats, options.max_findings_per_check)
    yield from segment_findings(seg, rep, stats, options, is_last=is_last, next_base=next_base_offset,
                                progress=progress, result=[])
    yield from rep.overflow()


def verify_batch_file(path: str, rep: Reporter, stats: VerifyStats, options: VerifyOptions,
                      progress: Progress | None) -> Iterator[Finding]:
    """A file of batches that is not a segment: a KRaft snapshot (``.checkpoint``)."""
    walk = SegmentWalk(path, 0, None, False, rep, stats, options, progress, kind="batches")
    yield from walk.run()


__all__ = [
    "SegmentResult",
    "SegmentWalk",
    "segment_findings",
    "verify_batch_file",
    "verify_segment",
]
