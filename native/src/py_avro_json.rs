//! Python bindings of avro_json.rs: `avro_program`, `avro_render_json`, `avro_extract` and
//! `avro_where`, called by engine/schemas/avro_codec.py and engine/schemas/resolver.py.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::avro_json::{all_hold, extract, render, Cond, Extracted, Node, Op, Scalar};
use crate::{guarded, ByteView};

/// A compiled schema (`avro_program`), held by the Python codec for its life.
#[pyclass(frozen, module = "plog._native")]
pub struct AvroProgram {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: usize,
}

fn node_from(item: &Bound<'_, PyAny>) -> PyResult<Node> {
    let pair = item.cast::<PyTuple>()?;
    if pair.len() != 2 {
        return Err(PyValueError::new_err("avro_program: each node is a (tag, argument) pair"));
    }
    let tag: String = pair.get_item(0)?.extract()?;
    let arg = pair.get_item(1)?;
    Ok(match tag.as_str() {
        "null" => Node::Null,
        "boolean" => Node::Boolean,
        "int" | "long" => Node::Long,
        "float" => Node::Float,
        "double" => Node::Double,
        "bytes" => Node::Bytes,
        "string" => Node::Str,
        "fixed" => Node::Fixed(arg.extract()?),
        "enum" => Node::Enum(arg.extract()?),
        "array" => Node::Array(arg.extract()?),
        "map" => Node::Map(arg.extract()?),
        "union" => Node::Union(arg.extract()?),
        "record" => Node::Record(arg.extract()?),
        other => return Err(PyValueError::new_err(format!("avro_program: unknown node tag {other:?}"))),
    })
}

fn children(node: &Node) -> Vec<usize> {
    match node {
        Node::Array(c) | Node::Map(c) => vec![*c],
        Node::Union(b) => b.iter().map(|(_, c)| *c).collect(),
        Node::Record(f) => f.iter().map(|(_, c)| *c).collect(),
        _ => Vec::new(),
    }
}

/// `avro_program(nodes, root) -> AvroProgram`: `nodes` a list of `(tag, argument)` pairs
/// (tags: null, boolean, int, long, float, double, bytes, string; fixed with its size;
/// enum with `[(symbol as a JSON string, symbol), ...]`; array and map with their item's node index;
/// union with `[(label JSON string or None, node), ...]`; record with `[(name JSON string,
/// node), ...]`), `root` the datum's node.
#[pyfunction]
fn avro_program(nodes: &Bound<'_, PyList>, root: usize) -> PyResult<AvroProgram> {
    guarded(None, || {
        let nodes = nodes.iter().map(|item| node_from(&item)).collect::<PyResult<Vec<Node>>>()?;
        let bad = nodes.iter().flat_map(children).chain([root]).any(|c| c >= nodes.len());
        if bad {
            return Err(PyValueError::new_err("avro_program: a node index is out of range"));
        }
        Ok(AvroProgram { nodes, root })
    })
}

/// `avro_render_json(program, payload, start=0) -> str | None`: the Avro JSON text of the
/// datum at `payload[start:]` (a Confluent prefix skipped without a copy), or None where the
/// reference path must run (module docstring).
#[pyfunction]
#[pyo3(signature = (program, payload, start=0))]
fn avro_render_json(program: &AvroProgram, payload: &Bound<'_, PyAny>, start: usize) -> PyResult<Option<String>> {
    guarded(None, || {
        let view = ByteView::new(payload)?;
        let bytes = view.bytes();
        if start > bytes.len() {
            return Ok(None);
        }
        Ok(render(&program.nodes, program.root, &bytes[start..]))
    })
}

/// `avro_extract(program, payload, start, path) -> (found, value) | None`: the scalar at
/// `path` (a list of names, each as its JSON string: `json.dumps(name, ensure_ascii=False)`) of the rendered datum at `payload[start:]`, as `--where` walks
/// the JSON: `(True, value)` (None, bool, int, float or str), `(False, None)` when the path
/// leads nowhere, None where the caller must take the whole way ([`extract`]).
#[pyfunction]
fn avro_extract<'py>(py: Python<'py>, program: &AvroProgram, payload: &Bound<'py, PyAny>, start: usize,
                     path: Vec<String>) -> PyResult<Option<(bool, Bound<'py, PyAny>)>> {
    guarded(None, || {
        let view = ByteView::new(payload)?;
        let bytes = view.bytes();
        if start > bytes.len() {
            return Ok(None);
        }
        Ok(match extract(&program.nodes, program.root, &bytes[start..], &path) {
            Extracted::Bail => None,
            Extracted::Missing => Some((false, py.None().into_bound(py))),
            Extracted::Value(v) => Some((true, match v {
                Scalar::Null => py.None().into_bound(py),
                Scalar::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
                Scalar::Int(i) => i.into_pyobject(py)?.into_any(),
                Scalar::Float(f) => f.into_pyobject(py)?.into_any(),
                Scalar::Str(s) => PyString::new(py, &s).into_any(),
            })),
        })
    })
}

fn scalar_from(obj: &Bound<'_, PyAny>) -> PyResult<Option<Scalar>> {
    Ok(Some(if obj.is_none() {
        Scalar::Null
    } else if obj.is_instance_of::<PyBool>() {
        Scalar::Bool(obj.extract()?)
    } else if obj.is_instance_of::<PyInt>() {
        match obj.extract::<i64>() {
            Ok(i) => Scalar::Int(i),
            Err(_) => return Ok(None), // beyond 64 bits: the reference compares it
        }
    } else if obj.is_instance_of::<PyFloat>() {
        Scalar::Float(obj.extract()?)
    } else if obj.is_instance_of::<PyString>() {
        Scalar::Str(obj.extract()?)
    } else {
        return Ok(None);
    }))
}

/// `avro_where(programs, values, conditions) -> bytes | None`: for each of `values` (a list:
/// a framed value as bytes, None for a null value, anything else for a record the caller
/// must look at itself, e.g. one with headers), one byte: 0 the conditions do not all hold,
/// 1 they do, 2 the caller decides on the whole way (an id not in `programs`, a payload or
/// path left to the reference). `programs` maps the 4 id bytes of a magic-0 prefix to an
/// `AvroProgram`; `conditions` is a list of `(path as JSON names, op, literal)` with op one of
/// = != < <= > >=. None when a literal is not one this unit compares (an int beyond 64 bits).
#[pyfunction]
fn avro_where<'py>(py: Python<'py>, programs: &Bound<'py, PyDict>, values: &Bound<'py, PyList>,
                   conditions: &Bound<'py, PyList>) -> PyResult<Option<Bound<'py, PyBytes>>> {
    guarded(None, || {
        let mut conds = Vec::new();
        for item in conditions.iter() {
            let (path, op, literal): (Vec<String>, String, Bound<'py, PyAny>) = item.extract()?;
            let op = match op.as_str() {
                "=" => Op::Eq,
                "!=" => Op::Ne,
                "<" => Op::Lt,
                "<=" => Op::Le,
                ">" => Op::Gt,
                ">=" => Op::Ge,
                other => return Err(PyValueError::new_err(format!("avro_where: unknown operator {other:?}"))),
            };
            match scalar_from(&literal)? {
                Some(literal) => conds.push(Cond { path, op, literal }),
                None => return Ok(None),
            }
        }
        let mut table: Vec<([u8; 4], Bound<'py, AvroProgram>)> = Vec::new();
        for (key, program) in programs.iter() {
            let key: [u8; 4] = match key.cast::<PyBytes>()?.as_bytes().try_into() {
                Ok(k) => k,
                Err(_) => continue,
            };
            table.push((key, program.cast_into::<AvroProgram>()?));
        }
        let mut out = Vec::with_capacity(values.len().min(1 << 20));
        for value in values.iter() {
            if value.is_none() {
                out.push(0u8); // a null value: no path leads anywhere
                continue;
            }
            let Ok(data) = value.cast::<PyBytes>() else {
                out.push(2);
                continue;
            };
            let data = data.as_bytes();
            let program = if data.len() >= 5 && data[0] == 0 {
                table.iter().find(|(k, _)| k[..] == data[1..5]).map(|(_, p)| p.get())
            } else {
                None
            };
            out.push(match program.and_then(|p| all_hold(&p.nodes, p.root, &data[5..], &conds)) {
                Some(true) => 1,
                Some(false) => 0,
                None => 2,
            });
        }
        Ok(Some(PyBytes::new(py, &out)))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(avro_where, m)?)?;
    m.add_class::<AvroProgram>()?;
    m.add_function(wrap_pyfunction!(avro_program, m)?)?;
    m.add_function(wrap_pyfunction!(avro_render_json, m)?)?;
    m.add_function(wrap_pyfunction!(avro_extract, m)?)
}

