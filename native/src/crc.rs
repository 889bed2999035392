//! The CRC-32C of v2 record batches (Castagnoli, Kafka's `Crc32C`), the one place the crate
//! computes it (walk.rs, verify.rs).

use crc_fast::{checksum, CrcAlgorithm};

/// CRC-32C of `data` (CRC-32/ISCSI: reflected, init and xor-out 0xFFFFFFFF).
pub fn crc32c(data: &[u8]) -> u32 {
    // The algorithm's width is 32 bits: the checksum always fits.
    checksum(CrcAlgorithm::Crc32Iscsi, data) as u32
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        // RFC 3720 B.4 and the standard check value.
        assert_eq!(super::crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(super::crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(super::crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        assert_eq!(super::crc32c(b""), 0);
    }

    #[test]
    fn continued() {
        let whole = super::crc32c(b"123456789");
        assert_eq!(super::crc32c_continue(super::crc32c(b"1234"), b"56789"), whole);
        assert_eq!(super::crc32c_continue(whole, b""), whole);
        assert_eq!(super::crc32c_continue(0, b"123456789"), whole);
    }
}

/// The CRC-32C of `data` continuing `value`, the CRC-32C of what came before it: the
/// checksum of the two concatenated (`value` 0: of `data` alone).
pub fn crc32c_continue(value: u32, data: &[u8]) -> u32 {
    let crc = crc32c(data);
    if value == 0 {
        return crc;
    }
    // The combination of two 32-bit checksums is a 32-bit checksum.
    crc_fast::checksum_combine(CrcAlgorithm::Crc32Iscsi, u64::from(value), u64::from(crc), data.len() as u64) as u32
}

/// `crc32c(data, value=0) -> int`: the twin of the `crc32c` package's function
/// (formats/crc.py), over any contiguous buffer; a long read-only one is summed without the
/// GIL.
#[pyo3::pyfunction]
#[pyo3(signature = (data, value=0))]
pub fn crc32c_of(py: pyo3::Python<'_>, data: &pyo3::Bound<'_, pyo3::PyAny>, value: u32) -> pyo3::PyResult<u32> {
    crate::guarded(None, || {
        let view = crate::ByteView::new(data)?;
        let bytes = view.bytes();
        Ok(if bytes.len() >= crate::DETACH_THRESHOLD && view.readonly() {
            py.detach(|| crc32c_continue(value, bytes))
        } else {
            crc32c_continue(value, bytes)
        })
    })
}

pub fn register(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    use pyo3::types::PyModuleMethods;
    let f = pyo3::wrap_pyfunction!(crc32c_of, m)?;
    m.add("crc32c", f)
}
