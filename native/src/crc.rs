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
}
