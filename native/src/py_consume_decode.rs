//! `ConsumeDecoders`: the Confluent schemas `plog consume` has compiled so far, for the
//! batch renderer's decoded keys and values (consume_render.rs, `Op::KeyDecoded` and
//! `Op::ValueDecoded`). Built by engine/clients/console_io.py from the schema resolver's
//! shortcut table (engine/schemas/resolver.py, `_prefixed`): a magic-0 prefix's 4 id bytes
//! to an Avro program or a Protobuf plan, and the schema id the line names. A field renders
//! here exactly as the resolver's shortcut renders it (the same native renderers on the same
//! bytes); anything else is the reference's.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::consume_render::FieldDecoders;
use crate::py_avro_json::AvroProgram;
use crate::py_protobuf_json::ProtobufPlan;
use crate::{avro_json, protobuf_json};

/// A compiled schema of either kind.
enum Schema {
    Avro(Py<AvroProgram>),
    Protobuf(Py<ProtobufPlan>),
}

/// The schemas a key or a value may be decoded with (4 id bytes -> schema, schema id).
type Table = HashMap<[u8; 4], (Schema, i64)>;

/// `ConsumeDecoders(keys, values)`: each a list of `(id bytes, AvroProgram | ProtobufPlan,
/// schema id)`; an empty list leaves that field to the reference.
#[pyclass(frozen, module = "plog._native")]
pub struct ConsumeDecoders {
    keys: Table,
    values: Table,
}

fn table(items: &Bound<'_, PyList>) -> PyResult<Table> {
    let mut out = Table::new();
    for item in items.iter() {
        let (id, schema, schema_id): (Vec<u8>, Bound<'_, PyAny>, i64) = item.extract()?;
        let id: [u8; 4] =
            id.try_into().map_err(|_| PyValueError::new_err("ConsumeDecoders: an id is 4 bytes"))?;
        let schema = if let Ok(p) = schema.cast::<AvroProgram>() {
            Schema::Avro(p.clone().unbind())
        } else {
            Schema::Protobuf(schema.cast::<ProtobufPlan>()?.clone().unbind())
        };
        out.insert(id, (schema, schema_id));
    }
    Ok(out)
}

#[pymethods]
impl ConsumeDecoders {
    #[new]
    fn new(keys: &Bound<'_, PyList>, values: &Bound<'_, PyList>) -> PyResult<ConsumeDecoders> {
        Ok(ConsumeDecoders { keys: table(keys)?, values: table(values)? })
    }
}

impl FieldDecoders for ConsumeDecoders {
    fn push(&self, is_key: bool, field: &[u8], out: &mut Vec<u8>, scratch: &mut String) -> Option<i64> {
        let id: [u8; 4] = field.get(1..5)?.try_into().ok()?;
        if field[0] != 0 {
            return None;
        }
        let (schema, schema_id) = (if is_key { &self.keys } else { &self.values }).get(&id)?;
        scratch.clear();
        match schema {
            // Frozen, Sync classes: their data is read without the GIL (the region may
            // render with it released).
            Schema::Avro(p) => {
                let p = p.get();
                avro_json::render_into(&p.nodes, p.root, &field[5..], scratch)?
            }
            Schema::Protobuf(p) => {
                let plan = &p.get().plan;
                let mut pos = 5;
                let root = protobuf_json::root_of(plan, field, &mut pos)?;
                protobuf_json::render_into(plan, root, &field[pos..], scratch)?
            }
        };
        out.extend_from_slice(scratch.as_bytes());
        Some(*schema_id)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConsumeDecoders>()
}
