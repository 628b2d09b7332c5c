//! Seeding: the one home of how a seeded node turns its seed, the epoch and
//! its rank into random numbers.
//!
//! Every draw that decides the order of the data goes through [`PassRng`]:
//! the seed expansion, the stream of each pass, the uniform integer draw and
//! the uniform float draw are written here, so a seeded stream depends only
//! on ChaCha8's block function (a published cipher) and this file, not on
//! the value-stream policy of `rand`'s minor versions. The golden streams in
//! `tests/golden/` pin them: a change here that moves a stream fails there.

use nodes_core::{Error, Result, State};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::rank::Rank;

/// The epoch a seeded node's `reset(None)` moves to: the next one if the
/// last pass was started (a `next` reached the node), else the same one, as
/// torchdata's samplers do (a pass that never started is not an epoch).
pub(crate) fn epoch_after(epoch: u64, started: bool) -> u64 {
    epoch.wrapping_add(u64::from(started))
}

/// The largest generator position a restored state may hold: no pass draws
/// anywhere near 2^62 times, and the position must fit in the state's
/// 64-bit field when it is saved again.
pub(crate) const MAX_WORD_POS: u64 = i64::MAX as u64;

/// The first of the streams [`reshard_stream`] hands out: no pass of a
/// node that numbers its streams by epoch reaches it (2^63 epochs).
const RESHARD_STREAMS: u64 = 1 << 63;

/// The stream a node's generator continues on, on new rank `rank` of
/// `world_size`, after `elastic::reshard` in `epoch`: a hash of the three
/// (FNV-1a), in the upper half of the stream numbers, so that it is never
/// the stream of an epoch (`PassRng::new(seed, epoch)`) and new ranks of one
/// reshard draw from distinct streams. The seed is kept.
pub(crate) fn reshard_stream(epoch: u64, rank: u64, world_size: u64) -> u64 {
    RESHARD_STREAMS | hash_words(&[epoch, rank, world_size])
}

/// FNV-1a over `words` as little-endian bytes: the same on every platform
/// and in every run.
pub(crate) fn hash_words(words: &[u64]) -> u64 {
    let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
    nodes_core::Fnv1a64::hash(&bytes)
}

/// Whether `stream` is one [`reshard_stream`] hands out.
pub(crate) fn is_reshard_stream(stream: u64) -> bool {
    stream >= RESHARD_STREAMS
}

/// The random numbers of one pass of one seeded node: ChaCha8 keyed by the
/// expanded seed, on a stream chosen by the pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PassRng {
    rng: ChaCha8Rng,
    seed: u64,
    stream: u64,
}

impl PassRng {
    /// The generator for `(seed, stream)`.
    pub(crate) fn new(seed: u64, stream: u64) -> PassRng {
        let mut rng = ChaCha8Rng::from_seed(expand(seed));
        rng.set_stream(stream);
        PassRng { rng, seed, stream }
    }

    /// The generator of `epoch` for `rank`: ranks of one epoch, and epochs of
    /// one rank, draw from distinct streams.
    pub(crate) fn for_pass(seed: u64, epoch: u64, rank: Rank) -> PassRng {
        PassRng::new(seed, Self::pass_stream(epoch, rank))
    }

    /// The stream of `epoch` on `rank`: one per rank and epoch.
    pub(crate) fn pass_stream(epoch: u64, rank: Rank) -> u64 {
        epoch.wrapping_mul(rank.world_size).wrapping_add(rank.rank)
    }

    pub(crate) fn stream(&self) -> u64 {
        self.stream
    }

    /// The next 64 random bits.
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// A uniform draw from `0..n` (`n >= 1`) by Canon's method: the high
    /// half of a widening multiply, with a second draw only when the low
    /// half is close enough to carry (bias below 2^-32 per draw). A range
    /// that fits in 32 bits draws 32-bit words, a wider one 64-bit words:
    /// the method and word sizes of `rand` 0.9's default, so the shuffles of
    /// earlier releases are kept.
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0, "below(0)");
        if n <= u64::from(u32::MAX) {
            self.canon::<32>(n)
        } else {
            self.canon::<64>(n)
        }
    }

    /// Canon's method on `BITS`-bit words: the high `BITS` of the widening
    /// multiply are the draw, the low ones decide whether a second draw
    /// could carry into it.
    #[inline]
    fn canon<const BITS: u32>(&mut self, n: u64) -> u64 {
        let mut draw = || {
            let word = match BITS {
                32 => u64::from(self.rng.next_u32()),
                _ => self.rng.next_u64(),
            };
            u128::from(word) * u128::from(n)
        };
        let mask = u128::MAX >> (128 - BITS);
        let first = draw();
        let (high, low) = ((first >> BITS) as u64, first & mask);
        if low <= u128::from(n.wrapping_neg()) & mask {
            return high;
        }
        high + u64::from(low + (draw() >> BITS) > mask)
    }

    /// A uniform float in `[0, 1)` from the top 53 bits of one draw.
    #[inline]
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// How many 32-bit words this generator has drawn in its stream.
    pub(crate) fn word_pos(&self) -> u64 {
        // `seek` and `below`/`unit` keep it far below 2^64 (see MAX_WORD_POS).
        u64::try_from(self.rng.get_word_pos()).unwrap_or(u64::MAX)
    }

    /// Moves to `word_pos` in this stream, in O(1).
    pub(crate) fn seek(&mut self, word_pos: u64) {
        self.rng.set_word_pos(u128::from(word_pos));
    }

    /// What a state records of this generator.
    fn saved(&self) -> Saved {
        Saved {
            seed: self.seed,
            stream: self.stream,
            word_pos: self.word_pos(),
        }
    }

    /// Checks a saved generator (`rng`, a [`Saved`]) against the seed and
    /// stream its `node` uses for this pass (a stream `elastic::reshard` gave
    /// a rank is taken as it is) and its position against any pass, naming
    /// the path; returns the position.
    pub(crate) fn check_saved(node: &str, rng: &State, seed: u64, stream: u64) -> Result<u64> {
        let (saved_seed, saved_stream) = (rng.get::<u64>("seed")?, rng.get::<u64>("stream")?);
        let word_pos: u64 = rng.get("word_pos")?;
        let (key, why) = if saved_seed != seed {
            let why =
                format!("the state was taken with seed {saved_seed}, this {node} has seed {seed}");
            ("seed", why)
        } else if saved_stream != stream && !is_reshard_stream(saved_stream) {
            let why = format!("generator stream {saved_stream} is not this pass's ({stream})");
            ("stream", why)
        } else if word_pos > MAX_WORD_POS {
            let why = format!(
                "generator position {word_pos} is beyond any pass (at most {MAX_WORD_POS} words)"
            );
            ("word_pos", why)
        } else {
            return Ok(word_pos);
        };
        Err(Error::bad_state(rng.path_of(key), why))
    }
}

/// The 32-byte ChaCha key of a 64-bit seed: eight outputs of PCG32 (XSH-RR)
/// started at the seed, little-endian. This is the expansion `rand_core` 0.9
/// uses for `seed_from_u64`, so the orders of earlier releases are kept; it
/// is written here so that a `rand_core` upgrade cannot move them.
fn expand(seed: u64) -> [u8; 32] {
    const MULTIPLIER: u64 = 6_364_136_223_846_793_005;
    const INCREMENT: u64 = 11_634_580_027_462_260_723;
    let mut state = seed;
    let mut key = [0u8; 32];
    for word in key.chunks_exact_mut(4) {
        // Step first, so a seed with few bits set still starts well mixed.
        state = state.wrapping_mul(MULTIPLIER).wrapping_add(INCREMENT);
        let xorshifted = (((state >> 18) ^ state) >> 27) as u32;
        let output = xorshifted.rotate_right((state >> 59) as u32);
        word.copy_from_slice(&output.to_le_bytes());
    }
    key
}

/// What a state records of a generator: the seed and stream it was made
/// with and its position (which the owning node checks with
/// [`PassRng::check_saved`] before applying a state, naming the path).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Saved {
    seed: u64,
    stream: u64,
    word_pos: u64,
}

/// Saved as a deferred state entry (`#[node(state, deferred)]`): taking a
/// state copies three numbers, and the JSON object is built only when the
/// state is serialised or read.
impl nodes_core::Snapshot for PassRng {
    type Frozen = Saved;

    fn snapshot(&self) -> Saved {
        self.saved()
    }
}

impl<'de> Deserialize<'de> for PassRng {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let saved = Saved::deserialize(deserializer).map_err(|e| {
            serde::de::Error::custom(format_args!(
                "{e} (a generator saved by nodes 0.1 holds a 32-byte key; such a \
                 checkpoint cannot be resumed by this version: see CHANGELOG.md)"
            ))
        })?;
        let mut rng = PassRng::new(saved.seed, saved.stream);
        rng.seek(saved.word_pos);
        Ok(rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshard_streams_are_never_an_epochs_and_differ_by_rank() {
        for epoch in [0, 1, 7, 1 << 40] {
            let streams: Vec<u64> = (0..8).map(|r| reshard_stream(epoch, r, 8)).collect();
            assert!(streams.iter().all(|&s| is_reshard_stream(s) && s != epoch));
            let mut unique = streams.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), streams.len(), "{streams:?}");
            assert_ne!(reshard_stream(epoch, 0, 8), reshard_stream(epoch, 0, 4));
            assert!(!is_reshard_stream(epoch));
        }
    }

    #[test]
    fn below_is_uniform_and_in_range() {
        let mut rng = PassRng::new(7, 0);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[rng.below(6) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
        assert_eq!(rng.below(1), 0);
        let wide = 3 << 40;
        assert!((0..1000).all(|_| rng.below(wide) < wide));
        assert!(
            (0..1000)
                .map(|_| rng.below(wide))
                .any(|x| x > u64::from(u32::MAX))
        );
    }

    #[test]
    fn expansion_keeps_the_orders_of_earlier_releases() {
        for seed in [0, 1, 42, u64::MAX] {
            let ours = PassRng::new(seed, 3).next_u64();
            let mut theirs = ChaCha8Rng::seed_from_u64(seed);
            theirs.set_stream(3);
            assert_eq!(ours, theirs.next_u64(), "seed {seed}");
        }
    }

    #[test]
    fn draws_keep_the_shuffles_of_earlier_releases() {
        use rand::Rng;
        let mut ours = PassRng::new(9, 1);
        let mut theirs = ChaCha8Rng::seed_from_u64(9);
        theirs.set_stream(1);
        for n in (1..2000u64).chain([u64::from(u32::MAX), 1 << 32, (1 << 32) + 1, 3 << 40]) {
            assert_eq!(
                ours.below(n),
                theirs.random_range(0..n as usize) as u64,
                "n = {n}"
            );
            assert_eq!(ours.word_pos(), theirs.get_word_pos() as u64, "n = {n}");
        }
    }

    #[test]
    fn seek_replays_the_stream() {
        let mut a = PassRng::new(3, 9);
        let _ = (a.next_u64(), a.unit(), a.below(1000));
        let pos = a.word_pos();
        let rest: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let mut b = PassRng::new(3, 9);
        b.seek(pos);
        assert_eq!(rest, (0..5).map(|_| b.next_u64()).collect::<Vec<_>>());
    }

    #[test]
    fn streams_and_seeds_differ() {
        let first = |seed, stream| PassRng::new(seed, stream).next_u64();
        assert_ne!(first(0, 0), first(0, 1));
        assert_ne!(first(0, 0), first(1, 0));
        let r = |rank| Rank {
            rank,
            world_size: 4,
        };
        assert_ne!(
            PassRng::for_pass(5, 0, r(1)).next_u64(),
            PassRng::for_pass(5, 1, r(0)).next_u64()
        );
    }

    #[test]
    fn state_round_trips_and_far_positions_are_refused() {
        let mut rng = PassRng::new(11, 2);
        let _ = rng.below(10);
        let json = serde_json::to_value(nodes_core::Snapshot::snapshot(&rng)).unwrap();
        assert_eq!(json["seed"], 11);
        let back: PassRng = serde_json::from_value(json).unwrap();
        assert_eq!(back, rng);
        let saved = |word_pos: u64| {
            let json = serde_json::json!({"seed": 11, "stream": 2, "word_pos": word_pos});
            PassRng::check_saved("Shuffler", &State::from_value(json).unwrap(), 11, 2)
        };
        let err = saved(u64::MAX).unwrap_err();
        assert!(err.to_string().contains("beyond any pass"), "{err}");
        assert_eq!(saved(back.word_pos()).unwrap(), back.word_pos());
    }
}
