//! A seeded pseudo-random permutation of `0..n` that is never materialised:
//! `get(i)` is computed in O(1) expected time and O(1) memory.
//!
//! A balanced Feistel network permutes the `2h`-bit integers, where `2^(2h)`
//! is the smallest even power of two `>= n` (so at most `4n`); cycle-walking
//! (re-applying the network until the value lands below `n`) restricts it to
//! a bijection of `0..n`. A Feistel network is a bijection whatever its round
//! function, so the result is a permutation by construction; the round
//! function only decides how well shuffled it looks. Each lookup applies the
//! network fewer than 4 times on average.

use crate::seed::PassRng;

const ROUNDS: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Permutation {
    n: u64,
    half_bits: u32,
    mask: u64,
    keys: [u64; ROUNDS],
}

impl Permutation {
    /// The permutation of `0..n` for `(seed, stream)`; different streams give
    /// independent-looking permutations.
    pub(crate) fn new(n: u64, seed: u64, stream: u64) -> Self {
        let mut rng = PassRng::new(seed, stream);
        let keys = std::array::from_fn(|_| rng.next_u64());
        // Bits needed for the values 0..n, rounded up to an even number
        // (so at most 32 per half).
        let bits = u64::BITS - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2);
        let mask = (1 << half_bits) - 1;
        Permutation {
            n,
            half_bits,
            mask,
            keys,
        }
    }

    /// The size of the permuted range.
    pub(crate) fn len(&self) -> u64 {
        self.n
    }

    /// The image of `i` (`i < n`).
    #[inline]
    pub(crate) fn get(&self, i: u64) -> u64 {
        let n = self.n;
        debug_assert!(i < n, "index {i} outside the permuted range 0..{n}");
        let mut x = i;
        loop {
            x = self.feistel(x);
            if x < n {
                return x;
            }
        }
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let (mut left, mut right) = (x >> self.half_bits, x & self.mask);
        for &key in &self.keys {
            let f = mix(right ^ key) & self.mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half_bits) | right
    }
}

/// The splitmix64 finaliser: a cheap 64-bit mixing function.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_permutation_for_many_sizes() {
        for n in (0..70).chain([127, 128, 129, 1000, 4097]) {
            for seed in 0..3 {
                let p = Permutation::new(n, seed, 5);
                let mut seen = vec![false; n as usize];
                for i in 0..n {
                    let j = p.get(i);
                    assert!(j < n && !seen[j as usize], "n={n} seed={seed} i={i} -> {j}");
                    seen[j as usize] = true;
                }
            }
        }
    }

    #[test]
    fn depends_on_seed_and_stream() {
        let order = |seed, stream| {
            let p = Permutation::new(50, seed, stream);
            (0..50).map(|i| p.get(i)).collect::<Vec<_>>()
        };
        assert_eq!(order(1, 0), order(1, 0));
        assert_ne!(order(1, 0), order(1, 1));
        assert_ne!(order(1, 0), order(2, 0));
        assert_ne!(order(1, 0), (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn large_domains_do_not_overflow() {
        let p = Permutation::new(u64::MAX, 3, 0);
        for i in [0, 1, u64::MAX / 2, u64::MAX - 1] {
            assert!(p.get(i) < u64::MAX);
        }
        let p = Permutation::new(1 << 40, 3, 0);
        assert!(p.get((1 << 40) - 1) < 1 << 40);
    }
}
