//! Python bindings of protobuf_json.rs: `protobuf_plan` and `protobuf_render_json`, called
//! by engine/schemas/protobuf_codec.py.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::protobuf_json::{render, root_of, Field, Kind, Message, Plan};
use crate::{guarded, run_region, ByteView};

/// A compiled schema (`protobuf_plan`), held by the Python codec for its life.
#[pyclass(frozen, module = "plog._native")]
pub struct ProtobufPlan {
    pub(crate) plan: Plan,
}

fn kind_from(tag: &str, arg: Option<usize>) -> PyResult<Kind> {
    let need = || arg.ok_or_else(|| PyValueError::new_err(format!("protobuf_plan: {tag} needs its index")));
    Ok(match tag {
        "int32" => Kind::Int32,
        "int64" => Kind::Int64,
        "uint32" => Kind::UInt32,
        "uint64" => Kind::UInt64,
        "sint32" => Kind::SInt32,
        "sint64" => Kind::SInt64,
        "fixed32" => Kind::Fixed32,
        "fixed64" => Kind::Fixed64,
        "sfixed32" => Kind::SFixed32,
        "sfixed64" => Kind::SFixed64,
        "bool" => Kind::Bool,
        "float" => Kind::Float,
        "double" => Kind::Double,
        "string" => Kind::Str,
        "bytes" => Kind::Bytes,
        "enum" => Kind::Enum(need()?),
        "message" => Kind::Message(need()?),
        "unsupported" => Kind::Unsupported,
        other => return Err(PyValueError::new_err(format!("protobuf_plan: unknown kind {other:?}"))),
    })
}

type FieldTuple = (u32, String, String, Option<usize>, bool, bool, bool, Option<usize>);

fn message_from(item: &Bound<'_, PyAny>) -> PyResult<Message> {
    let pair = item.cast::<PyTuple>()?;
    let supported: bool = pair.get_item(0)?.extract()?;
    let mut fields = Vec::new();
    for f in pair.get_item(1)?.cast::<PyList>()?.iter() {
        let (number, name, tag, arg, repeated, map, presence, oneof): FieldTuple = f.extract()?;
        fields.push(Field { number, name, kind: kind_from(&tag, arg)?, repeated, map, presence, oneof });
    }
    Ok(Message::new(supported, fields))
}

fn check(plan: &Plan) -> PyResult<()> {
    let bad = |what: &str| Err(PyValueError::new_err(format!("protobuf_plan: {what}")));
    for m in &plan.messages {
        if m.by_number.windows(2).any(|w| w[0].0 == w[1].0) {
            return bad("a message has two fields of one number");
        }
        for f in &m.fields {
            match f.kind {
                Kind::Message(i) if i >= plan.messages.len() => return bad("a message index is out of range"),
                Kind::Enum(i) if i >= plan.enums.len() => return bad("an enum index is out of range"),
                _ => {}
            }
            if f.map && !matches!(f.kind, Kind::Message(_)) {
                return bad("a map field's kind is not its entry message");
            }
        }
    }
    if plan.roots.iter().any(|(_, m)| *m >= plan.messages.len()) {
        return bad("a root index is out of range");
    }
    Ok(())
}

/// `protobuf_plan(messages, enums, roots) -> ProtobufPlan`: `messages` a list of
/// `(supported, fields)`, each field `(number, name as a JSON string, kind, index, repeated,
/// map, presence, oneof)` in declaration order (kind: int32, int64, uint32, uint64, sint32,
/// sint64, fixed32, fixed64, sfixed32, sfixed64, bool, float, double, string, bytes, enum and
/// message with their index, unsupported; oneof the index of a real or synthetic oneof in
/// its message, or None); `enums` a list of `[(number, name as a JSON string), ...]`; `roots`
/// a list of `(message-index path, message)`.
#[pyfunction]
fn protobuf_plan(messages: &Bound<'_, PyList>, enums: &Bound<'_, PyList>, roots: &Bound<'_, PyList>)
    -> PyResult<ProtobufPlan> {
    guarded(None, || {
        let messages = messages.iter().map(|m| message_from(&m)).collect::<PyResult<Vec<Message>>>()?;
        let mut enum_table = Vec::new();
        for e in enums.iter() {
            let mut values: Vec<(i32, String)> = e.extract()?;
            values.sort_by_key(|(n, _)| *n);
            values.dedup_by_key(|(n, _)| *n);
            enum_table.push(values);
        }
        let roots: Vec<(Vec<u64>, usize)> = roots.extract()?;
        let plan = Plan { messages, enums: enum_table, roots };
        check(&plan)?;
        Ok(ProtobufPlan { plan })
    })
}

/// `protobuf_render_json(plan, payload, start=0, root=None) -> str | None`: the JSON text of
/// the message at `payload[start:]`, of type `root` (a message of the plan) or, when root is
/// None, the type its Confluent message indexes (first, at `start`) name; None where the
/// reference path must run (protobuf_json.rs's module docstring).
#[pyfunction]
#[pyo3(signature = (plan, payload, start=0, root=None))]
fn protobuf_render_json(py: Python<'_>, plan: &ProtobufPlan, payload: &Bound<'_, PyAny>, start: usize,
                        root: Option<usize>) -> PyResult<Option<String>> {
    guarded(None, || {
        let view = ByteView::new(payload)?;
        let bytes = view.bytes();
        if start > bytes.len() {
            return Ok(None);
        }
        let mut pos = start;
        let root = match root {
            Some(r) => r,
            None => match root_of(&plan.plan, bytes, &mut pos) {
                Some(r) => r,
                None => return Ok(None),
            },
        };
        let plan = &plan.plan;
        if view.readonly() {
            // A long payload renders with the GIL released (its exporter hands it out read-only).
            return Ok(run_region(py, &bytes[pos..], |body| render(plan, root, body)));
        }
        Ok(render(plan, root, &bytes[pos..]))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ProtobufPlan>()?;
    m.add_function(wrap_pyfunction!(protobuf_plan, m)?)?;
    m.add_function(wrap_pyfunction!(protobuf_render_json, m)?)
}
