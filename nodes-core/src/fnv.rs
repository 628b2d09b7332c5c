//! [`Fnv1a64`]: the one FNV-1a hash of the workspace, behind every
//! fingerprint, digest and derived seed that is written down or compared
//! across runs.

/// 64-bit FNV-1a: a fixed, portable hash of bytes, the same on every
/// machine, build and run (unlike std's `DefaultHasher`). Pipeline
/// fingerprints, file-list digests and resharded generator streams are FNV-1a
/// over their canonical bytes, so a tool can recompute them.
///
/// ```
/// use std::hash::Hasher;
/// use nodes_core::Fnv1a64;
///
/// let mut hasher = Fnv1a64::default();
/// hasher.write(b"a");
/// assert_eq!(hasher.finish(), 0xaf63_dc4c_8601_ec8c);
/// assert_eq!(Fnv1a64::hash(b"a"), 0xaf63_dc4c_8601_ec8c);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv1a64(u64);

impl Fnv1a64 {
    /// The hash of `bytes` alone.
    pub fn hash(bytes: &[u8]) -> u64 {
        let mut hasher = Fnv1a64::default();
        std::hash::Hasher::write(&mut hasher, bytes);
        hasher.0
    }
}

/// Starts from the FNV-1a 64-bit offset basis.
impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
}

/// Each byte xored in, then a multiplication by the FNV-1a 64-bit prime.
impl std::hash::Hasher for Fnv1a64 {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::Hasher;

    use super::Fnv1a64;

    /// The published FNV-1a 64 test vectors, whole and written in parts.
    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        for (input, expected) in [
            (&b""[..], 0xcbf2_9ce4_8422_2325),
            (b"a", 0xaf63_dc4c_8601_ec8c),
            (b"foobar", 0x8594_4171_f739_67e8),
        ] {
            assert_eq!(Fnv1a64::hash(input), expected);
            let mut parts = Fnv1a64::default();
            let (head, tail) = input.split_at(input.len() / 2);
            parts.write(head);
            parts.write(tail);
            assert_eq!(parts.finish(), expected);
        }
    }
}
