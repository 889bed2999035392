//! Python bindings of produce.rs: `RecordsBuilder` (an open producer batch, encoded as its
//! records arrive), `ProduceFill` (the producer's accumulate loop over input lines or a list
//! of records, up to the next event the Python producer must act on) and `murmur2`.
//! The caller is engine/clients/producer.py (native mode); the reference is its pure-Python
//! `send`/`send_values` and formats/record_batch.py's `encode_batch`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString, PyTuple};

use crate::append_follower::increment_sequence;
use crate::fault::Fault;
use crate::produce::{self, BatchHead, Builder, Header};
use crate::{guarded, raise, ByteView};

/// An open batch of the producer (see produce.rs's `Builder`).
#[pyclass(module = "plog._native")]
pub struct RecordsBuilder {
    b: Builder,
}

/// A key, value or header value as bytes: None, bytes, or another buffer (bytearray,
/// copied); None for anything else (a memoryview, a str...: the reference path takes it).
enum Field<'a> {
    Null,
    Slice(&'a [u8]),
    Owned(Vec<u8>),
}

impl Field<'_> {
    fn get(&self) -> Option<&[u8]> {
        match self {
            Field::Null => None,
            Field::Slice(s) => Some(s),
            Field::Owned(v) => Some(v),
        }
    }
}

fn field<'a>(obj: &'a Bound<'_, PyAny>) -> Option<Field<'a>> {
    if obj.is_none() {
        return Some(Field::Null);
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Some(Field::Slice(b.as_bytes()));
    }
    if obj.cast::<PyByteArray>().is_ok() {
        let view = ByteView::new(obj).ok()?;
        return Some(Field::Owned(view.bytes().to_vec()));
    }
    None
}

/// Headers copied out of their Python objects: key bytes and a nullable value.
type OwnedHeaders = Vec<(Vec<u8>, Field<'static>)>;

/// Header pairs `(str | bytes, bytes | None)` of a sequence, with the reference's size
/// estimate (`2 + len(key) + len(value)`, len of a str key in code points); None for
/// anything the reference path must handle.
fn headers_of(obj: &Bound<'_, PyAny>) -> Option<(OwnedHeaders, i64)> {
    let mut out = Vec::new();
    let mut size = 0i64;
    let seq: Vec<Bound<'_, PyAny>> = if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else {
        return None;
    };
    for item in seq {
        let pair = item.cast::<PyTuple>().ok()?;
        if pair.len() != 2 {
            return None;
        }
        let hk = pair.get_item(0).ok()?;
        let hv = pair.get_item(1).ok()?;
        let (kb, klen) = if let Ok(s) = hk.cast::<PyString>() {
            let text = s.to_str().ok()?; // a str with lone surrogates: the reference's encoding
            (text.as_bytes().to_vec(), text.chars().count() as i64)
        } else if let Ok(b) = hk.cast::<PyBytes>() {
            (b.as_bytes().to_vec(), b.as_bytes().len() as i64)
        } else {
            return None;
        };
        let v = if hv.is_none() {
            Field::Null
        } else if let Ok(b) = hv.cast::<PyBytes>() {
            Field::Owned(b.as_bytes().to_vec())
        } else {
            return None;
        };
        size += 2 + klen + v.get().map_or(0, |x| x.len() as i64);
        out.push((kb, v));
    }
    Some((out, size))
}

fn header_refs<'a>(hs: &'a [(Vec<u8>, Field<'static>)]) -> Vec<Header<'a>> {
    hs.iter().map(|(k, v)| (k.as_slice(), v.get())).collect()
}

#[pymethods]
impl RecordsBuilder {
    #[new]
    fn new() -> RecordsBuilder {
        RecordsBuilder { b: Builder::default() }
    }

    #[getter]
    fn count(&self) -> i64 {
        self.b.count
    }

    /// The producer's size estimate of the batch (`_Batch.size`).
    #[getter]
    fn size(&self) -> i64 {
        self.b.size
    }

    #[getter]
    fn base_timestamp(&self) -> i64 {
        self.b.base_ts
    }

    /// Append a record stamped `ts` whose estimate is `size`; False (nothing changed) when
    /// the caller must encode it on the reference path (then `append_raw`).
    #[pyo3(signature = (ts, key, value, headers, size))]
    fn append(
        &mut self,
        ts: i64,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        headers: &Bound<'_, PyAny>,
        size: i64,
    ) -> PyResult<bool> {
        guarded(None, || {
            let (Some(k), Some(v)) = (field(key), field(value)) else { return Ok(false) };
            let hs = if headers.is_none() {
                Vec::new()
            } else {
                match headers_of(headers) {
                    Some((hs, _)) => hs,
                    None => return Ok(false),
                }
            };
            if !self.b.append(ts, k.get(), v.get(), &header_refs(&hs)) {
                return Ok(false);
            }
            self.b.size += size;
            Ok(true)
        })
    }

    /// Append one record's bytes encoded by the reference (`encode_records`), stamped `ts`.
    fn append_raw(&mut self, ts: i64, raw: &Bound<'_, PyAny>, size: i64) -> PyResult<()> {
        let view = ByteView::new(raw)?;
        guarded(None, || {
            self.b.buf.extend_from_slice(view.bytes());
            self.b.push_meta(ts);
            self.b.size += size;
            Ok(())
        })
    }

    /// The records region (to compress).
    fn records<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.b.buf)
    }

    /// The whole v2 batch: `encode_batch(records, compression_codec=attributes & 7, ...)`
    /// with `payload` the compressed records region, or this builder's own records.
    #[pyo3(signature = (attributes, producer_id, producer_epoch, base_sequence, payload=None))]
    fn batch<'py>(
        &self,
        py: Python<'py>,
        attributes: i16,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        payload: Option<&Bound<'py, PyBytes>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        guarded(None, || {
            if self.b.count == 0 {
                return Ok(PyBytes::new(py, b""));
            }
            let head = batch_head(&self.b, attributes, producer_id, producer_epoch, base_sequence)?;
            let body = payload.map_or(self.b.buf.as_slice(), |p| p.as_bytes());
            let size = produce::batch_size(body).ok_or_else(|| raise(Fault::invalid("batch too large", None)))?;
            // Written in place: the batch is the bytes object's own buffer, not a copy of one.
            PyBytes::new_with(py, size, |out| {
                produce::assemble_into(&head, body, out);
                Ok(())
            })
        })
    }
}

/// The batch fields of `b`'s records (non-empty) with the producer's.
fn batch_head(
    b: &Builder,
    attributes: i16,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> PyResult<BatchHead> {
    let too_many = |_| PyValueError::new_err("too many records");
    Ok(BatchHead {
        attributes,
        last_offset_delta: i32::try_from(b.count - 1).map_err(too_many)?,
        base_timestamp: b.base_ts,
        max_timestamp: b.max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count: i32::try_from(b.count).map_err(too_many)?,
    })
}

/// What `encode_batches` returns: `(buffer, batch sizes, base sequences, next sequence)`.
type EncodedRequest<'py> = (Bound<'py, PyByteArray>, Vec<usize>, Vec<i64>, i64);

/// The uncompressed batches of `builders` (non-empty `RecordsBuilder`s, in order) for one
/// produce request, back to back in one bytearray: `(buffer, each batch's size, their base
/// sequences, the sequence after them)`. Batch by batch the same bytes as
/// `builder.batch(0, producer_id, producer_epoch, seq)` with `seq` following
/// `increment_sequence` when `idempotent` (else -1 for every batch); one buffer because the
/// leader's append stamps the request in place (formats/memory_records.py).
#[pyfunction]
#[pyo3(signature = (builders, producer_id, producer_epoch, sequence, idempotent))]
fn encode_batches<'py>(
    py: Python<'py>,
    builders: &Bound<'py, PyList>,
    producer_id: i64,
    producer_epoch: i16,
    sequence: i64,
    idempotent: bool,
) -> PyResult<EncodedRequest<'py>> {
    let cells = builders
        .iter()
        .map(|item| item.cast_into::<RecordsBuilder>().map_err(PyErr::from))
        .collect::<PyResult<Vec<_>>>()?;
    let held = cells.iter().map(|c| c.try_borrow().map_err(PyErr::from)).collect::<PyResult<Vec<_>>>()?;
    let mut heads = Vec::with_capacity(held.len());
    let mut sizes = Vec::with_capacity(held.len());
    let mut seqs = Vec::with_capacity(held.len());
    let mut seq = sequence;
    let mut total = 0usize;
    for builder in &held {
        let b = &builder.b;
        if b.count == 0 {
            return Err(PyValueError::new_err("an empty batch"));
        }
        let base_sequence = i32::try_from(seq).map_err(|_| PyValueError::new_err("sequence out of range"))?;
        let size = produce::batch_size(&b.buf).ok_or_else(|| raise(Fault::invalid("batch too large", None)))?;
        heads.push(batch_head(b, 0, producer_id, producer_epoch, base_sequence)?);
        sizes.push(size);
        seqs.push(seq);
        total = total.checked_add(size).ok_or_else(|| PyValueError::new_err("request too large"))?;
        if idempotent {
            seq = increment_sequence(seq, b.count);
        }
    }
    let len = isize::try_from(total).map_err(|_| PyValueError::new_err("request too large"))?;
    // SAFETY: PyByteArray_FromStringAndSize(NULL, len) returns a new bytearray of `len`
    // bytes, uninitialised (PyByteArray::new_with would zero them first), or NULL with the
    // error set; the pointer is owned. Every byte is written below before Python sees it:
    // the batches tile the buffer (`total` is the sum of `sizes`).
    let buffer = unsafe {
        Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyByteArray_FromStringAndSize(std::ptr::null(), len))?
            .cast_into_unchecked::<PyByteArray>()
    };
    guarded(None, || {
        // SAFETY: the GIL is held and no Python code runs while the slice is in use, and the
        // bytearray is new: nothing else can resize or read it meanwhile.
        let out = unsafe { buffer.as_bytes_mut() };
        let mut at = 0;
        for ((builder, head), size) in held.iter().zip(&heads).zip(&sizes) {
            produce::assemble_into(head, &builder.b.buf, &mut out[at..at + size]);
            at += size;
        }
        Ok(())
    })?;
    Ok((buffer, sizes, seqs, seq))
}

/// Kafka's murmur2 of `data` (a Java int).
#[pyfunction]
fn murmur2(data: &Bound<'_, PyAny>) -> PyResult<i32> {
    let view = ByteView::new(data)?;
    guarded(None, || Ok(produce::murmur2(view.bytes())))
}

// -------------------------------------------------------------------------------------
// The fill loop

/// What `ProduceFill.run` stopped for (the Python caller acts, then calls again).
const DONE: u8 = 0; // max_records taken, or the input is over
const NEED_MORE: u8 = 1; // lines: no whole line left and the input goes on
const APPENDED: u8 = 2; // a record went in; the sticky partition switches, or the closed batches fill the round
const NEED_STICKY: u8 = 3; // the sticky partition is not chosen yet
const TOO_LARGE: u8 = 4; // the next record is larger than the limit (extra: its size)
const FALLBACK: u8 = 5; // the next record needs the reference path

/// Input modes (2: a list of `send_many` items).
const PLAIN_LINES: u8 = 0;
const KEYED_LINES: u8 = 1;
const VALUES: u8 = 3;

/// One producer loop's settings: `ProduceFill(mode, partitions, partition, ignore_keys,
/// batch_size, limit, key_separator, null_marker, ignore_error, clock)`. `limit`: the
/// largest record estimate taken (`size > limit` is TOO_LARGE). `clock`: None for the
/// system clock, else a callable as `time.time` (seconds), called once per record.
#[pyclass(module = "plog._native")]
pub struct ProduceFill {
    mode: u8,
    partitions: i64,
    partition: Option<i64>,
    ignore_keys: bool,
    batch_size: i64,
    limit: i64,
    key_separator: Option<Vec<u8>>,
    null_marker: Option<Vec<u8>>,
    ignore_error: bool,
    clock: Option<Py<PyAny>>,
}

struct Rec<'a> {
    key: Field<'a>,
    value: Field<'a>,
    headers: OwnedHeaders,
    size: i64,
    next: usize,
}

impl ProduceFill {
    fn now(&self, py: Python<'_>) -> PyResult<i64> {
        match &self.clock {
            None => {
                let d = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_err(|_| PyValueError::new_err("the system clock is before 1970"))?;
                Ok(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }
            Some(c) => {
                let secs: f64 = c.call0(py)?.extract(py)?;
                // int(clock() * 1000): truncation toward zero, as Python's int(float).
                Ok((secs * 1000.0) as i64)
            }
        }
    }

    /// The record at `pos`: Ok(None) when there is none yet (or the input is over),
    /// Err(()) when the reference path must take it.
    fn next_rec<'a>(
        &self,
        data: Option<&'a [u8]>,
        items: Option<&'a Bound<'_, PyList>>,
        pos: usize,
        last: bool,
    ) -> Result<Option<Rec<'a>>, ()> {
        match self.mode {
            PLAIN_LINES | KEYED_LINES => {
                let data = data.ok_or(())?;
                let Some((line, next)) = produce::next_line(data, pos, last) else { return Ok(None) };
                let null = self.null_marker.as_deref();
                let (key, value) = if self.mode == PLAIN_LINES {
                    (None, Some(line))
                } else {
                    let mut key = None;
                    let mut value = line;
                    if let Some(sep) = &self.key_separator {
                        match produce::find(line, sep) {
                            Some(i) => {
                                key = Some(&line[..i]);
                                value = &line[i + sep.len()..];
                                if key == null {
                                    key = None;
                                }
                            }
                            None if self.ignore_error => {}
                            None => return Err(()),
                        }
                    }
                    (key, if Some(value) == null { None } else { Some(value) })
                };
                let size =
                    produce::RECORD_OVERHEAD + key.map_or(0, |k| k.len() as i64) + value.map_or(0, |v| v.len() as i64);
                let key = key.map_or(Field::Null, Field::Slice);
                let value = value.map_or(Field::Null, Field::Slice);
                Ok(Some(Rec { key, value, headers: Vec::new(), size, next }))
            }
            _ => {
                let items = items.ok_or(())?;
                if pos >= items.len() {
                    return Ok(None);
                }
                let item = items.get_item(pos).map_err(|_| ())?;
                let rec = if self.mode == VALUES {
                    match field(&item) {
                        Some(Field::Null) | None => return Err(()),
                        Some(v) => (Field::Null, own(v), Vec::new(), 0),
                    }
                } else if let Ok(t) = item.cast::<PyTuple>() {
                    if t.len() != 2 && t.len() != 3 {
                        return Err(());
                    }
                    let k = t.get_item(0).map_err(|_| ())?;
                    let v = t.get_item(1).map_err(|_| ())?;
                    let (hs, hsize) = if t.len() == 3 {
                        let h = t.get_item(2).map_err(|_| ())?;
                        if h.is_none() {
                            (Vec::new(), 0)
                        } else {
                            headers_of(&h).ok_or(())?
                        }
                    } else {
                        (Vec::new(), 0)
                    };
                    let key = own(field(&k).ok_or(())?);
                    let value = own(field(&v).ok_or(())?);
                    (key, value, hs, hsize)
                } else {
                    (Field::Null, own(field(&item).ok_or(())?), Vec::new(), 0)
                };
                let (key, value, headers, hsize) = rec;
                let size = produce::RECORD_OVERHEAD
                    + key.get().map_or(0, |k| k.len() as i64)
                    + value.get().map_or(0, |v| v.len() as i64)
                    + hsize;
                Ok(Some(Rec { key, value, headers, size, next: pos + 1 }))
            }
        }
    }
}

/// The most a new batch reserves up front (a batch.size of hundreds of MiB is legal).
const MAX_RESERVE: usize = 1 << 20;

/// A new batch in slot `p`, told on `events` as `(p, builder)`. Its buffer is reserved for
/// `capacity` bytes at once (batch.size, as Kafka's producer takes a batch.size buffer from
/// its pool), not grown record by record.
fn open_batch<'py>(
    py: Python<'py>,
    builders: &Bound<'py, PyList>,
    events: &Bound<'py, PyList>,
    p: i64,
    capacity: i64,
) -> PyResult<Bound<'py, RecordsBuilder>> {
    let mut b = Builder::default();
    b.buf.reserve(usize::try_from(capacity).unwrap_or(0).min(MAX_RESERVE));
    let builder = Bound::new(py, RecordsBuilder { b })?;
    builders.set_item(p as usize, &builder)?;
    events.append((p, &builder))?;
    Ok(builder)
}

/// A field detached from the Python object it was read from (the item may be dropped).
fn own(f: Field<'_>) -> Field<'static> {
    match f {
        Field::Null => Field::Null,
        Field::Slice(s) => Field::Owned(s.to_vec()),
        Field::Owned(v) => Field::Owned(v),
    }
}

type RunResult = (usize, i64, u8, i64, i64, bool, i64);

/// Records stamped by one read of the system clock (see `run`).
const CLOCK_EVERY: u32 = 16;

#[pymethods]
impl ProduceFill {
    #[new]
    #[pyo3(signature = (mode, partitions, partition, ignore_keys, batch_size, limit, key_separator=None,
                        null_marker=None, ignore_error=false, clock=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        mode: u8,
        partitions: i64,
        partition: Option<i64>,
        ignore_keys: bool,
        batch_size: i64,
        limit: i64,
        key_separator: Option<Vec<u8>>,
        null_marker: Option<Vec<u8>>,
        ignore_error: bool,
        clock: Option<Py<PyAny>>,
    ) -> PyResult<ProduceFill> {
        if mode > VALUES || partitions < 1 || batch_size < 1 || key_separator.as_deref() == Some(b"") {
            return Err(PyValueError::new_err("bad ProduceFill settings"));
        }
        Ok(ProduceFill {
            mode,
            partitions,
            partition,
            ignore_keys,
            batch_size,
            limit,
            key_separator,
            null_marker,
            ignore_error,
            clock,
        })
    }

    /// Take records from `source` (bytes of lines, or a list) at `pos` into `builders` (a
    /// list with one open `RecordsBuilder` or None per partition) until an event:
    /// `(pos, records, event, partition, produced, switch, extra)`. `sticky` (-1: none) and
    /// `produced` are the sticky partitioner's state, handed back updated; `switch`: it
    /// must draw a new partition now. `last`: no more input follows `source`.
    ///
    /// Batches are opened and closed here, and each is told on `events`, in order, for the
    /// caller to mirror: `(partition, builder)` a batch opened in that slot (a slot without
    /// one, or after a close), `partition` the slot's batch closed (full, or unable to take
    /// the next record) and its slot None. Once the batches closed reach `room` bytes (what
    /// the producer's round had left when the call began), the call returns (APPENDED) after
    /// the record that brought them there (or after the first record, when `room` was not
    /// positive), so that the round goes before the next record: what send checks after
    /// each record. With one partition, a sticky switch can only land on it again: it is
    /// made here (the draw's value could not matter).
    #[pyo3(signature = (builders, source, pos, last, max_records, sticky, produced, events, room))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        builders: &Bound<'_, PyList>,
        source: &Bound<'_, PyAny>,
        pos: usize,
        last: bool,
        max_records: i64,
        sticky: i64,
        produced: i64,
        events: &Bound<'_, PyList>,
        room: i64,
    ) -> PyResult<RunResult> {
        guarded(None, || {
            let lines = self.mode == PLAIN_LINES || self.mode == KEYED_LINES;
            let view = if lines { Some(ByteView::new(source)?) } else { None };
            let items = if lines { None } else { Some(source.cast::<PyList>()?) };
            let data = view.as_ref().map(|v| v.bytes());
            if builders.len() as i64 != self.partitions {
                return Err(PyValueError::new_err("one builder slot per partition"));
            }
            let mut pos = pos;
            let mut produced = produced;
            let mut records = 0i64;
            let mut current: Option<(i64, PyRefMut<'_, RecordsBuilder>)> = None;
            let mut closed_bytes = 0i64;
            let (mut clock_ms, mut clock_left) = (0i64, 0u32);
            loop {
                if records >= max_records {
                    return Ok((pos, records, DONE, -1, produced, false, 0));
                }
                let rec = match self.next_rec(data, items, pos, last) {
                    Ok(Some(r)) => r,
                    Ok(None) => {
                        let event = if lines && !last { NEED_MORE } else { DONE };
                        return Ok((pos, records, event, -1, produced, false, 0));
                    }
                    Err(()) => return Ok((pos, records, FALLBACK, -1, produced, false, 0)),
                };
                if rec.size > self.limit {
                    return Ok((pos, records, TOO_LARGE, -1, produced, false, rec.size));
                }
                let keyed = rec.key.get().is_some() && !self.ignore_keys;
                let (p, by_sticky) = match self.partition {
                    Some(p) => (p, false),
                    None if keyed && self.mode != VALUES => {
                        (produce::partition_for_key(rec.key.get().unwrap_or(b""), self.partitions), false)
                    }
                    None if sticky < 0 => return Ok((pos, records, NEED_STICKY, -1, produced, false, 0)),
                    None => (sticky, true),
                };
                // The partition's builder stays borrowed while records keep going to it.
                if current.as_ref().is_none_or(|(cp, _)| *cp != p) {
                    drop(current.take());
                    let slot = builders.get_item(p as usize)?;
                    let builder = if slot.is_none() {
                        open_batch(py, builders, events, p, self.batch_size)?
                    } else {
                        slot.cast_into::<RecordsBuilder>()?
                    };
                    current = Some((p, builder.try_borrow_mut()?));
                }
                let Some((_, builder)) = current.as_mut() else { unreachable!() };
                if builder.b.count > 0 && builder.b.size + rec.size > self.batch_size {
                    // Closed before this record, which goes into a new batch.
                    closed_bytes += builder.b.size;
                    drop(current.take());
                    events.append(p)?;
                    current = Some((p, open_batch(py, builders, events, p, self.batch_size)?.try_borrow_mut()?));
                }
                let Some((_, builder)) = current.as_mut() else { unreachable!() };
                let ts = match &self.clock {
                    // The system clock is read once per CLOCK_EVERY records of a call: the
                    // records between are stamped well within the millisecond they went in
                    // (a few hundred nanoseconds apart), and the read was a tenth of the loop.
                    None => {
                        if clock_left == 0 {
                            clock_ms = self.now(py)?;
                            clock_left = CLOCK_EVERY;
                        }
                        clock_left -= 1;
                        clock_ms
                    }
                    Some(_) => self.now(py)?,
                };
                let hs = header_refs(&rec.headers);
                if !builder.b.append(ts, rec.key.get(), rec.value.get(), &hs) {
                    // The reference path takes the record with this timestamp.
                    return Ok((pos, records, FALLBACK, p, produced, false, ts));
                }
                builder.b.size += rec.size;
                let full = builder.b.size >= self.batch_size;
                pos = rec.next;
                records += 1;
                let mut switch = false;
                if by_sticky {
                    produced += rec.size;
                    switch = (produced >= self.batch_size && full) || produced >= 2 * self.batch_size;
                }
                if full {
                    closed_bytes += builder.b.size;
                    drop(current.take());
                    events.append(p)?;
                    builders.set_item(p as usize, py.None())?;
                }
                if switch && self.partitions == 1 {
                    produced = 0;
                    switch = false;
                }
                // send's check after each record: a full round goes before the next record.
                if switch || closed_bytes >= room {
                    return Ok((pos, records, APPENDED, p, produced, switch, 0));
                }
            }
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecordsBuilder>()?;
    m.add_class::<ProduceFill>()?;
    m.add_function(wrap_pyfunction!(murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batches, m)?)?;
    Ok(())
}
