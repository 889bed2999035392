//! Typed faults: what plog's formats layer raises for bytes that do not decode.
//!
//! The core never builds Python objects; it returns a [`Fault`] whose kind names the
//! Python class (`plog.formats.errors`) the binding's caller raises: `corrupt` is
//! `CorruptRecordError`, `invalid` is `InvalidRecordError`, `varint` is `VarintError`.
//! Reasons are the exact sentences the pure-Python reference writes.

/// The Python error class a fault maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Corrupt,
    Invalid,
    Varint,
}

impl Kind {
    /// The name formats/native.py maps to a class.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Corrupt => "corrupt",
            Kind::Invalid => "invalid",
            Kind::Varint => "varint",
        }
    }
}

/// One typed fault: kind, one-line reason, and the byte position when it has one
/// (relative to the buffer the caller handed in, `None` when only the caller knows it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: Kind,
    pub reason: String,
    pub position: Option<i64>,
}

impl Fault {
    pub fn corrupt(reason: impl Into<String>, position: Option<i64>) -> Fault {
        Fault { kind: Kind::Corrupt, reason: reason.into(), position }
    }

    pub fn invalid(reason: impl Into<String>, position: Option<i64>) -> Fault {
        Fault { kind: Kind::Invalid, reason: reason.into(), position }
    }

    pub fn varint(reason: impl Into<String>, position: i64) -> Fault {
        Fault { kind: Kind::Varint, reason: reason.into(), position: Some(position) }
    }
}
