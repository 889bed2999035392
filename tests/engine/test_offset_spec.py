"""The offset/time language (``engine/offset_spec.py``): every form, the bad ones, ranges,
and resolution against a partition's bounds and a sorted-list ListOffsets oracle."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plog.engine.errors import InvalidOffsetSpecError, NoOffsetForPartitionError
from plog.engine.offset_spec import (
    INT64_MAX,
    OFFSET_FORMS,
    OffsetRange,
    OffsetSpec,
    parse_offset,
    parse_offset_range,
    resolve_offset,
    resolve_range,
)

NOW = 1_700_000_000_000  # 2023-11-14T22:13:20Z
DAY = 86_400_000
JAN1 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def S(kind: str, value: int = 0) -> OffsetSpec:
    return OffsetSpec(kind, value)


# -- single positions ----------------------------------------------------------------------

FORMS = [
    ("earliest", S("earliest")),
    ("beginning", S("earliest")),
    ("start", S("earliest")),
    ("oldest", S("earliest")),
    ("EARLIEST", S("earliest")),
    ("latest", S("latest")),
    ("end", S("latest")),
    ("newest", S("latest")),
    ("Latest", S("latest")),
    ("committed", S("committed")),
    ("stored", S("committed")),
    ("0", S("offset", 0)),
    ("42", S("offset", 42)),
    ("007", S("offset", 7)),
    (str(INT64_MAX), S("offset", INT64_MAX)),
    ("+0", S("from_start", 0)),
    ("+5", S("from_start", 5)),
    ("-0", S("from_end", 0)),
    ("-5", S("from_end", 5)),
    ("  17  ", S("offset", 17)),
    ("@0", S("timestamp", 0)),
    ("@1700000000000", S("timestamp", 1_700_000_000_000)),
    ("@2024-01-01", S("timestamp", JAN1)),
    ("@2024-01-01T00:00:00Z", S("timestamp", JAN1)),
    ("@2024-01-01T10:00", S("timestamp", JAN1 + 10 * 3_600_000)),
    ("@2024-01-01T10:00:00.123", S("timestamp", JAN1 + 10 * 3_600_000 + 123)),
    ("@2024-01-01T10:00:00+02:00", S("timestamp", JAN1 + 8 * 3_600_000)),
    ("@2024-01-01T00:00:00-05:00", S("timestamp", JAN1 + 5 * 3_600_000)),
    ("@2024-01-01 10:00", S("timestamp", JAN1 + 10 * 3_600_000)),
    ("@-15m", S("timestamp", NOW - 15 * 60_000)),
    ("@-500ms", S("timestamp", NOW - 500)),
    ("@-30s", S("timestamp", NOW - 30_000)),
    ("@-2h", S("timestamp", NOW - 2 * 3_600_000)),
    ("@-7d", S("timestamp", NOW - 7 * DAY)),
    ("@-1h30m", S("timestamp", NOW - 90 * 60_000)),
    ("@-1d2h3m4s5ms", S("timestamp", NOW - (DAY + 2 * 3_600_000 + 3 * 60_000 + 4_000 + 5))),
    ("@-0s", S("timestamp", NOW)),
    # before the epoch: every record is at or after it, i.e. @0
    ("@-100000d", S("timestamp", 0)),
    ("@1969-12-31", S("timestamp", 0)),
]


@pytest.mark.parametrize("text,expected", FORMS)
def test_every_form(text, expected):
    assert parse_offset(text, now_ms=NOW) == expected
    # Any position is also a range with no end.
    assert parse_offset_range(text, now_ms=NOW) == OffsetRange(expected, None)


def test_now_defaults_to_the_clock():
    import time

    before = int(time.time() * 1000)
    spec = parse_offset("@-1m")
    after = int(time.time() * 1000)
    assert spec.kind == "timestamp"
    assert before - 60_000 <= spec.value <= after - 60_000


BAD = [
    "", "   ", "x", "first", "earliest2", "+", "-", "++1", "--1", "+-1", "1.5", "1e3", "0x10", "1_000",
    "١٢", "@١٢",  # digits of other scripts: ASCII only
    "@", "@x", "@now", "@-", "@-1", "@-15", "@-15x", "@-m", "@-1h30", "@+15m", "@ 5",
    "@2024-13-01", "@2024-01-01T25:00", "@2024-01-01garbage",
    str(INT64_MAX + 1), "+" + str(INT64_MAX + 1), "@" + str(INT64_MAX + 1), "9" * 5000, "@-" + "9" * 5000 + "d",
    "10:20", "10:", ":5", "earliest:latest",
]


@pytest.mark.parametrize("text", BAD)
def test_bad_positions(text):
    with pytest.raises(InvalidOffsetSpecError) as e:
        parse_offset(text, now_ms=NOW)
    message = str(e.value)
    assert "\n" not in message
    assert OFFSET_FORMS in message  # lists every accepted form
    assert isinstance(e.value, ValueError)


def test_a_range_given_where_a_position_is_expected_says_so():
    with pytest.raises(InvalidOffsetSpecError, match="a range A:B is not accepted here"):
        parse_offset("10:20")
    with pytest.raises(InvalidOffsetSpecError) as e:
        parse_offset("1:2:3")
    assert "not accepted here" not in str(e.value)  # not a valid range either


def test_non_string_input_is_the_typed_error():
    with pytest.raises(InvalidOffsetSpecError):
        parse_offset(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidOffsetSpecError):
        parse_offset_range(12)  # type: ignore[arg-type]


# -- ranges ------------------------------------------------------------------------------

RANGES = [
    ("10:20", S("offset", 10), S("offset", 20)),
    ("10:", S("offset", 10), None),
    (":20", S("earliest"), S("offset", 20)),
    (":", S("earliest"), None),
    ("100:+5", S("offset", 100), S("count", 5)),
    ("+100:+5", S("from_start", 100), S("count", 5)),
    ("-10:-5", S("from_end", 10), S("from_end", 5)),
    ("earliest:latest", S("earliest"), S("latest")),
    ("start:end", S("earliest"), S("latest")),
    (":end", S("earliest"), S("latest")),  # rpk's "up to the current end"
    ("committed:+10", S("committed"), S("count", 10)),
    ("latest:", S("latest"), None),
    (" 10 : 20 ", S("offset", 10), S("offset", 20)),
    ("10:10", S("offset", 10), S("offset", 10)),  # empty, not an error
    ("@1700000000000:@1700000100000", S("timestamp", 1_700_000_000_000), S("timestamp", 1_700_000_100_000)),
    ("@2024-01-01:@2024-01-02", S("timestamp", JAN1), S("timestamp", JAN1 + DAY)),
    ("@2024-01-01T10:00:@2024-01-01T11:30", S("timestamp", JAN1 + 10 * 3_600_000),
     S("timestamp", JAN1 + 11 * 3_600_000 + 30 * 60_000)),
    ("@2024-01-01T10:00:00+02:00:@2024-01-01T11:00:00Z", S("timestamp", JAN1 + 8 * 3_600_000),
     S("timestamp", JAN1 + 11 * 3_600_000)),
    ("@2024-01-01T10:00:", S("timestamp", JAN1 + 10 * 3_600_000), None),
    (":@2024-01-01T10:00", S("earliest"), S("timestamp", JAN1 + 10 * 3_600_000)),
    ("@-48h:@-24h", S("timestamp", NOW - 2 * DAY), S("timestamp", NOW - DAY)),
    ("@-1h:+100", S("timestamp", NOW - 3_600_000), S("count", 100)),
    ("@2024-01-01:500", S("timestamp", JAN1), S("offset", 500)),  # a time start, an offset end
    ("5:@2024-01-01", S("offset", 5), S("timestamp", JAN1)),
]


@pytest.mark.parametrize("text,start,end", RANGES)
def test_ranges(text, start, end):
    assert parse_offset_range(text, now_ms=NOW) == OffsetRange(start, end)


def test_a_text_that_is_one_time_is_not_split_at_its_colons():
    # "@2024-01-01T10" is a valid time too, but the whole text is one.
    assert parse_offset_range("@2024-01-01T10:00", now_ms=NOW) == OffsetRange(S("timestamp", JAN1 + 36_000_000), None)
    assert parse_offset_range("@2024-01-01T10:00:30", now_ms=NOW).end is None


def test_range_default_start_can_be_chosen():
    assert parse_offset_range(":20", default_start=S("latest")) == OffsetRange(S("latest"), S("offset", 20))


def test_one_now_for_both_sides():
    rng = parse_offset_range("@-2h:@-1h")
    assert rng.end.value - rng.start.value == 3_600_000


BAD_RANGES = [
    "", "x:y", "1:2:3", "10:x", "x:10", "a:", ":b", "10::20", "@x:@y", "10:+", "10:@-", "@2024-01-01:@nope",
    "@-48h:-24h",  # rpk's relative end: write @-24h
]


@pytest.mark.parametrize("text", BAD_RANGES)
def test_bad_ranges(text):
    with pytest.raises(InvalidOffsetSpecError) as e:
        parse_offset_range(text, now_ms=NOW)
    message = str(e.value)
    assert "\n" not in message
    assert "exclusive" in message and OFFSET_FORMS in message


@pytest.mark.parametrize("text", ["20:10", "@1700000100000:@1700000000000", "@2024-01-02:@2024-01-01"])
def test_ranges_ending_before_they_start(text):
    with pytest.raises(InvalidOffsetSpecError, match="before the start .*exclusive"):
        parse_offset_range(text, now_ms=NOW)


# -- no text raises anything but the typed error ------------------------------------------

GRAMMAR_CHARS = "0123456789+-@:TZ. msdhx" + "earliestcommittednewb"


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=GRAMMAR_CHARS, max_size=30)))
def test_random_text_only_raises_the_typed_error(text):
    for parse in (parse_offset, parse_offset_range):
        try:
            result = parse(text, now_ms=NOW)
        except InvalidOffsetSpecError as e:
            assert "\n" not in str(e)
            continue
        specs = [result] if isinstance(result, OffsetSpec) else [result.start, result.end]
        for spec in specs:
            if spec is not None:
                assert spec.kind in ("earliest", "latest", "committed", "offset", "from_start", "from_end",
                                     "timestamp", "count")
                assert 0 <= spec.value <= INT64_MAX


@settings(max_examples=200, deadline=None)
@given(st.integers(0, INT64_MAX), st.integers(0, INT64_MAX))
def test_numeric_ranges(a, b):
    text = f"{a}:{b}"
    if b < a:
        with pytest.raises(InvalidOffsetSpecError):
            parse_offset_range(text)
    else:
        assert parse_offset_range(text) == OffsetRange(S("offset", a), S("offset", b))
    assert parse_offset_range(f"{a}:+{b}") == OffsetRange(S("offset", a), S("count", b))


# -- resolution --------------------------------------------------------------------------


class Log:
    """A partition as a sorted list of (offset, timestamp); ListOffsets by scanning."""

    def __init__(self, start: int, end: int, timestamps: dict[int, int] | None = None):
        self.start, self.end = start, end
        self.ts = timestamps or {o: 1000 + 10 * o for o in range(start, end)}
        self.calls: list[int] = []

    def offset_for_timestamp(self, ms: int) -> int | None:
        self.calls.append(ms)
        for o in range(self.start, self.end):
            if self.ts[o] >= ms:
                return o
        return None

    def resolve(self, text: str, **kw) -> int:
        return resolve_offset(parse_offset(text, now_ms=NOW), log_start_offset=self.start, log_end_offset=self.end,
                              offset_for_timestamp=self.offset_for_timestamp, **kw)

    def range(self, text: str, **kw) -> tuple[int, int | None]:
        return resolve_range(parse_offset_range(text, now_ms=NOW), log_start_offset=self.start,
                             log_end_offset=self.end, offset_for_timestamp=self.offset_for_timestamp, **kw)


LOG = Log(100, 200)  # offsets 100..199, timestamps 2000..2990


@pytest.mark.parametrize("text,expected", [
    ("earliest", 100), ("latest", 200),
    ("150", 150), ("100", 100), ("200", 200),
    ("5", 100), ("500", 200),  # absolute offsets are clamped too (ConsumerGroupCommand.checkOffsetsRange)
    ("+0", 100), ("+10", 110), ("+100", 200), ("+1000", 200),
    ("-0", 200), ("-10", 190), ("-100", 100), ("-1000", 100),  # kcat: -N past the start is the start
    ("@0", 100), ("@2000", 100), ("@2001", 101), ("@2990", 199), ("@2991", 200),  # none at/after: the end
    ("@1700000000000", 200),
])
def test_resolve(text, expected):
    assert LOG.resolve(text) == expected


def test_resolve_committed():
    assert LOG.resolve("committed", committed=150) == 150
    assert LOG.resolve("stored", committed=50) == 100  # clamped like every reset target
    assert LOG.resolve("committed", committed=999) == 200
    with pytest.raises(NoOffsetForPartitionError):
        LOG.resolve("committed")


def test_resolve_count_needs_a_start():
    count = S("count", 5)
    kw = dict(log_start_offset=100, log_end_offset=200, offset_for_timestamp=LOG.offset_for_timestamp)
    with pytest.raises(InvalidOffsetSpecError, match="only valid as the end of a range"):
        resolve_offset(count, **kw)
    assert resolve_offset(count, start=150, **kw) == 155
    assert resolve_offset(count, start=198, **kw) == 200


def test_listoffsets_minus_one_is_the_end():
    # A ListOffsets answer of -1 (no such record) reads as "none": the log end.
    assert resolve_offset(S("timestamp", 5), log_start_offset=0, log_end_offset=10,
                          offset_for_timestamp=lambda ms: -1) == 10


def test_unknown_kind():
    with pytest.raises(InvalidOffsetSpecError):
        resolve_offset(S("sideways"), log_start_offset=0, log_end_offset=1, offset_for_timestamp=lambda ms: None)


@pytest.mark.parametrize("text,expected", [
    ("110:120", (110, 120)),
    ("110:", (110, None)),
    (":120", (100, 120)),
    (":", (100, None)),
    ("150:+5", (150, 155)),  # "read 5 from offset 150"
    ("150:+0", (150, 150)),
    ("195:+10", (195, 200)),  # clamped at the log end
    ("+10:+5", (110, 115)),
    ("-10:+5", (190, 195)),
    ("-10:", (190, None)),
    ("earliest:-5", (100, 195)),  # all but the last five
    ("-5:-10", (195, 195)),  # an end before the start: empty
    ("0:50", (100, 100)),  # wholly before the log: empty at the start
    ("300:400", (200, 200)),  # wholly after: empty at the end
    ("@2100:@2200", (110, 120)),  # the end is the first record at/after t2, exclusive
    ("@2105:@2195", (111, 120)),
    ("@2100:+3", (110, 113)),
    ("@2100:@9999", (110, 200)),  # no record at/after t2: up to the end
    ("@9999:", (200, None)),
    (":@2100", (100, 110)),
    ("@2100:end", (110, 200)),
])
def test_resolve_range(text, expected):
    assert LOG.range(text) == expected


def test_resolve_range_committed():
    assert LOG.range("committed:+3", committed=120) == (120, 123)
    with pytest.raises(NoOffsetForPartitionError):
        LOG.range("earliest:committed")


def test_timestamps_are_passed_in_ms():
    log = Log(0, 3)
    log.range("@2023-01-01:@-1h")
    assert log.calls == [JAN1 - 365 * DAY, NOW - 3_600_000]


def test_empty_log():
    log = Log(7, 7)
    for text in ("earliest", "latest", "0", "+3", "-3", "@0"):
        assert log.resolve(text) == 7
    assert log.range("0:+5") == (7, 7)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), st.lists(st.integers(0, 500), max_size=50),
       st.sampled_from(["earliest", "latest", "committed", "N", "+N", "-N", "@T"]),
       st.sampled_from([None, "latest", "N", "+N", "-N", "@T"]),
       st.integers(0, 120), st.integers(0, 600), st.integers(0, 120))
def test_resolution_stays_in_the_log(start, length, tss, a_form, b_form, n, t, committed):
    """Against an oracle: every answer is in [log start, log end], end >= start, and a
    timestamp resolves to the first offset whose timestamp is >= it (bisect on the
    running maximum, which is what ListOffsets answers for non-monotonic timestamps)."""
    end = start + length
    ts = {o: tss[(o - start) % len(tss)] if tss else 0 for o in range(start, end)}
    log = Log(start, end, ts)

    def text(form):
        return {"N": str(n), "+N": f"+{n}", "-N": f"-{n}", "@T": f"@{t}"}.get(form, form)

    rng = f"{text(a_form)}:{text(b_form) if b_form else ''}"
    begin, stop = log.range(rng, committed=committed)  # never statically inverted: same n and t
    assert start <= begin <= end
    assert stop is None or begin <= stop <= end
    if a_form == "@T":
        running = []
        for o in range(start, end):
            running.append(max(running[-1], ts[o]) if running else ts[o])
        expected = start + bisect.bisect_left(running, t) if running else end
        assert begin == min(expected, end)


def test_the_language_depends_on_no_inspect_module():
    """offset_spec is below lookup, dump and scan: importing it loads none of engine.inspect."""
    import subprocess
    import sys

    code = ("import sys, plog.engine.offset_spec; "
            "print(sorted(m for m in sys.modules if m.startswith('plog.engine.inspect')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
