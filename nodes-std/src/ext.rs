//! [`NodeExt`]: the front door for starting and combining nodes.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::mixing::zip::Zip;
use crate::sources::lines::{ReadJsonl, ReadLines};
use crate::threaded::par_map::{ParallelMapper, ParallelOptions};
use crate::threaded::prefetch::Prefetcher;
use crate::transforms::batch::Batcher;
use crate::transforms::cycle::Cycler;
use crate::transforms::filter::{Filter, FilterMapper};
use crate::transforms::header::Header;
use crate::transforms::map::{Mapper, TryMapper};
use crate::transforms::shard::Sharder;
use crate::transforms::shuffle::Shuffler;
use crate::transforms::unbatch::Unbatcher;
use nodes_core::{BoxError, Node, Result, Running, State};

use crate::mixing::interleave::Interleave;
use crate::transforms::flat_map::FlatMapper;
use crate::transforms::pack::Packer;

/// Combinators and starters for every [`Node`]; implemented for all of them.
///
/// # Errors from user functions
///
/// A user function that can fail returns `Result<U, E>`, where `E` is any
/// error that converts into [`BoxError`]: a std error (`std::io::Error`,
/// `ParseIntError`, ...), `serde_json::Error`, an error type of your own
/// (`std::error::Error + Send + Sync + 'static`), or a `String` / `&str`
/// message. An `Err` reaches the consumer as one
/// [`Error::User`](crate::Error::User) item, naming the node and the item's
/// index, whose `source` is your error value (`downcast_ref` gives it back);
/// an [`ErrorPolicy`](crate::ErrorPolicy) may skip it or end the pass.
///
/// Each entry point takes that error in the shape that lets the closures
/// people write infer without annotations:
///
/// - [`try_map`](NodeExt::try_map) takes `Result<U, E>` for any
///   `E: Into<BoxError>` as it is, so `.try_map(|s: &str| s.parse::<u8>())`
///   and functions with an error type of their own go straight in.
/// - [`par_map`](NodeExt::par_map) takes a function returning
///   `Result<U, BoxError>` (the type [`Dataset::get_item`](crate::Dataset::get_item)
///   and [`Lookup::lookup`](crate::Lookup::lookup) return too), so `|x| Ok(x)`,
///   `Ok` itself, and closures that use `?` on one or several error types
///   infer their error type. A function with an error type of its own goes
///   in through [`boxed_err`](crate::boxed_err):
///   `.par_map(boxed_err(parse), options)`.
///
/// No single signature can do both: Rust does not infer a type parameter
/// from a default, so `|x| Ok(x)` (or a `?`) against a generic `E` is "type
/// annotations needed" (E0282 or E0283). So a `try_map` closure whose error
/// type nothing names, names it (`Ok::<_, BoxError>(x)`, or
/// `|x| -> Result<_, BoxError> { ... }`), and `par_map` takes any other `E`
/// through `boxed_err`.
///
/// The other user functions (`map`, `filter`, `flat_map`, `filter_map`,
/// `interleave`, [`IterableWrapper::from_fn`](crate::IterableWrapper::from_fn),
/// a sampler's `epoch_updater`) cannot fail: to fail per item, `try_map`
/// first.
pub trait NodeExt: Node + Sized {
    /// Resets the pipeline and returns it as a plain iterator of `Result<Item>`.
    fn start(self) -> Result<Running<Self>> {
        Running::start(self)
    }

    /// Resets the pipeline from `state` and returns it as an iterator.
    fn start_from(self, state: &State) -> Result<Running<Self>> {
        Running::start_from(self, state)
    }

    /// Boxes the node, erasing its type (to mix different node types).
    fn boxed<'a>(self) -> Box<dyn Node<Item = Self::Item> + 'a>
    where
        Self: 'a,
    {
        Box::new(self)
    }

    /// Applies `f` to every item, in the caller's thread.
    ///
    /// A panic in `f` is not caught. The state is the source's.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let out: Vec<String> = IterableWrapper::new(1..3).map(|x: i32| x.to_string()).start()?.collect::<Result<_>>()?;
    /// assert_eq!(out, ["1", "2"]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn map<U, F>(self, f: F) -> Mapper<Self, F>
    where
        F: FnMut(Self::Item) -> U + Send,
    {
        Mapper::new(self, f)
    }

    /// Applies a fallible `f` to every item; an `Err` is returned as
    /// [`Error::User`](crate::Error::User) naming `TryMapper` and the item's
    /// index in the pass, and the next call goes on with the next item.
    ///
    /// `f` returns `Result<U, E>` for any `E: Into<BoxError>`, taken as it is
    /// (see [errors from user functions](NodeExt#errors-from-user-functions)).
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let mut running = IterableWrapper::new(["7", "x"]).try_map(|s: &str| s.parse::<u8>()).start()?;
    /// assert_eq!(running.next().transpose()?, Some(7));
    /// assert!(matches!(running.next(), Some(Err(Error::User { index: Some(1), .. }))));
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    ///
    /// An `Err` is one item and the pass goes on after it; to drop bad
    /// records or stop at the first, set an [`ErrorPolicy`](crate::ErrorPolicy)
    /// with [`TryMapper::on_error`].
    fn try_map<U, E, F>(self, f: F) -> TryMapper<Self, F>
    where
        F: FnMut(Self::Item) -> std::result::Result<U, E> + Send,
        E: Into<BoxError>,
    {
        TryMapper::new(self, f)
    }

    /// Keeps the items for which `f` returns `true`.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let odd: Vec<u8> = IterableWrapper::new(0..6u8).filter(|x| x % 2 == 1).start()?.collect::<Result<_>>()?;
    /// assert_eq!(odd, [1, 3, 5]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn filter<F>(self, f: F) -> Filter<Self, F>
    where
        F: FnMut(&Self::Item) -> bool + Send,
    {
        Filter::new(self, f)
    }

    /// Groups items into `Vec`s of `batch_size`; the last batch of a pass
    /// may be shorter (like [`slice::chunks`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) if
    /// `batch_size` is 0.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let b: Vec<Vec<u8>> = IterableWrapper::new(0..3u8).batch(2)?.start()?.collect::<Result<_>>()?;
    /// assert_eq!(b, [vec![0, 1], vec![2]]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn batch(self, batch_size: usize) -> Result<Batcher<Self>> {
        Batcher::new(self, batch_size, false)
    }

    /// Groups items into `Vec`s of exactly `batch_size`; a shorter last
    /// batch is dropped (like [`slice::chunks_exact`]; torchdata's
    /// `drop_last=True`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) if
    /// `batch_size` is 0.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let b: Vec<Vec<u8>> = IterableWrapper::new(0..3u8).batch_exact(2)?.start()?.collect::<Result<_>>()?;
    /// assert_eq!(b, [vec![0, 1]]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn batch_exact(self, batch_size: usize) -> Result<Batcher<Self>> {
        Batcher::new(self, batch_size, true)
    }

    /// Flattens items that are collections into their elements.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let flat: Vec<u8> = IterableWrapper::new(0..5u8).batch(2)?.unbatch().start()?.collect::<Result<_>>()?;
    /// assert_eq!(flat, [0, 1, 2, 3, 4]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn unbatch(self) -> Unbatcher<Self>
    where
        Self::Item: IntoIterator,
        <Self::Item as IntoIterator>::IntoIter: Send,
    {
        Unbatcher::new(self)
    }

    /// The first `n` items of each pass (torchdata's `Header`; `take` in
    /// `std::iter`). `n = 0` yields nothing.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let first: Vec<u8> = IterableWrapper::new(0..100u8).header(2).start()?.collect::<Result<_>>()?;
    /// assert_eq!(first, [0, 1]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn header(self, n: u64) -> Header<Self> {
        Header::new(self, n)
    }

    /// Repeats the source endlessly, resetting it whenever it ends (each pass
    /// is a new epoch of the source). An empty source yields nothing.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let v: Vec<u8> = IterableWrapper::new(0..2u8).cycle().header(5).start()?.collect::<Result<_>>()?;
    /// assert_eq!(v, [0, 1, 0, 1, 0]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn cycle(self) -> Cycler<Self> {
        Cycler::endless(self)
    }

    /// Reads the source `max_cycles` times over (torchdata's `Cycler` with
    /// `max_cycles`), resetting it in between.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) if
    /// `max_cycles` is 0.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let v: Vec<u8> = IterableWrapper::new(0..2u8).cycle_n(3)?.start()?.collect::<Result<_>>()?;
    /// assert_eq!(v, [0, 1, 0, 1, 0, 1]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn cycle_n(self, max_cycles: u64) -> Result<Cycler<Self>> {
        Cycler::with_max_cycles(self, max_cycles)
    }

    /// Shuffles through a buffer of `buffer_size` items with a generator
    /// seeded by `seed`, a new order each epoch. The buffered items are part
    /// of the state, hence the serde bounds (see [`Shuffler`](crate::Shuffler)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) if
    /// `buffer_size` is 0.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let mut v: Vec<u8> = IterableWrapper::new(0..8u8).shuffle(8, 1)?.start()?.collect::<Result<_>>()?;
    /// v.sort();
    /// assert_eq!(v, (0..8).collect::<Vec<_>>());
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn shuffle(self, buffer_size: usize, seed: u64) -> Result<Shuffler<Self>>
    where
        Self::Item: Serialize + DeserializeOwned + Send + 'static,
    {
        Shuffler::new(self, buffer_size, seed)
    }

    /// Pairs each item with one of `other`'s, until either ends.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let z: Vec<(u8, u8)> = IterableWrapper::new(0..3u8).zip(IterableWrapper::new(10..12u8)).start()?.collect::<Result<_>>()?;
    /// assert_eq!(z, [(0, 10), (1, 11)]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn zip<O: Node>(self, other: O) -> Zip<Self, O> {
        Zip::new(self, other)
    }

    /// Keeps every `world_size`-th item, starting at item `rank`: the shard of
    /// one rank in a distributed job. Shards of all ranks are disjoint and
    /// cover the source.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let shard: Vec<u8> = IterableWrapper::new(0..10u8).shard(1, 3)?.start()?.collect::<Result<_>>()?;
    /// assert_eq!(shard, [1, 4, 7]);
    /// assert!(IterableWrapper::new(0..10u8).shard(3, 3).is_err());
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn shard(self, rank: u64, world_size: u64) -> Result<Sharder<Self>> {
        Sharder::new(self, rank, world_size)
    }

    /// [`shard`](NodeExt::shard) with the rank and world size a launcher such
    /// as `torchrun` puts in `RANK` and `WORLD_SIZE` (one shard of one when
    /// neither is set). See [`rank_from_env`](crate::rank_from_env).
    fn shard_from_env(self) -> Result<Sharder<Self>> {
        let (rank, world_size) = crate::rank_from_env()?;
        Sharder::new(self, rank, world_size)
    }

    /// Maps every item with `f` on a pool of worker threads, in source order
    /// by default, with exact checkpoints (see [`ParallelMapper`]).
    ///
    /// `f` returns `Ok(value)`, or `Err` for an item that cannot be mapped;
    /// the error reaches the consumer as [`Error::User`](crate::Error::User)
    /// at that item's position. `options` sets the worker count and the rest
    /// ([`ParallelOptions`]).
    ///
    /// `f` returns `Result<U, BoxError>`, so `|x| Ok(x)` and `?` on any error
    /// infer; pass a function with an error type of its own as
    /// [`boxed_err(f)`](crate::boxed_err) (see [errors from user
    /// functions](NodeExt#errors-from-user-functions)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
    /// `max_concurrent == 0`, `snapshot_frequency == 0` or more than
    /// [`ParallelOptions::MAX_WORKERS`] workers.
    ///
    /// ```
    /// use nodes_std::{IterableWrapper, NodeExt, ParallelOptions, Result};
    ///
    /// let parsed = IterableWrapper::new(0..4u64).par_map(
    ///     |x| Ok(format!("{x}").parse::<u64>()? * 10),
    ///     ParallelOptions::new(2),
    /// )?;
    /// let items: Vec<u64> = parsed.start()?.collect::<Result<_>>()?;
    /// assert_eq!(items, [0, 10, 20, 30]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn par_map<U, F>(self, f: F, options: ParallelOptions) -> Result<ParallelMapper<Self, U>>
    where
        Self: 'static,
        Self::Item: Send + 'static,
        U: Send + 'static,
        F: Fn(Self::Item) -> std::result::Result<U, BoxError> + Send + Sync + 'static,
    {
        ParallelMapper::new(self, f, options)
    }

    /// Reads up to `prefetch_factor` items ahead on a background thread (see
    /// [`Prefetcher`]): the source always runs on the reader thread,
    /// overlapping the consumer's own work. A consumer that only waits may
    /// opt in to running the source itself while that is faster (see
    /// [`Prefetcher::inline_when_faster`](crate::Prefetcher::inline_when_faster)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
    /// `prefetch_factor == 0`.
    ///
    /// ```
    /// use nodes_std::{IterableWrapper, NodeExt, Result};
    ///
    /// let items: Vec<u64> = IterableWrapper::new(0..3u64).prefetch(8)?.start()?.collect::<Result<_>>()?;
    /// assert_eq!(items, [0, 1, 2]);
    /// assert!(IterableWrapper::new(0..3u64).prefetch(0).is_err());
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn prefetch(self, prefetch_factor: usize) -> Result<Prefetcher<Self>>
    where
        Self: 'static,
        Self::Item: Send + 'static,
    {
        Prefetcher::new(self, prefetch_factor)
    }

    /// Maps every item to a collection (anything [`IntoIterator`]) and
    /// yields its elements, in order (tf.data's and Grain's `flat_map`,
    /// `Iterator::flat_map`). A resume stands inside an item's output: it
    /// pulls that item again and skips what was returned (see
    /// [`FlatMapper`](crate::FlatMapper), which also says why a source whose
    /// order varies is refused).
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let twice: Vec<u8> = IterableWrapper::new(0..3u8).flat_map(|x| vec![x, x]).start()?.collect::<Result<_>>()?;
    /// assert_eq!(twice, [0, 0, 1, 1, 2, 2]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn flat_map<I, F>(self, f: F) -> FlatMapper<Self, F, I>
    where
        F: FnMut(Self::Item) -> I + Send,
        I: IntoIterator,
        I::IntoIter: Send,
    {
        FlatMapper::new(self, f)
    }

    /// Maps every item to an [`Option`] and keeps the values in the `Some`s
    /// (`Iterator::filter_map`): a filter and a map in one. The state is the
    /// source's.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let halves: Vec<u8> = IterableWrapper::new(0..6u8).filter_map(|x| (x % 2 == 0).then_some(x / 2)).start()?.collect::<Result<_>>()?;
    /// assert_eq!(halves, [0, 1, 2]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn filter_map<U, F>(self, f: F) -> FilterMapper<Self, F>
    where
        F: FnMut(Self::Item) -> Option<U> + Send,
    {
        FilterMapper::new(self, f)
    }

    /// Makes an inner node from each item with `f` and reads up to
    /// `cycle_length` of them at a time, `block_length` items from each in
    /// turn (tf.data's `interleave`, Grain's `InterleaveIterDataset`): many
    /// files read with both locality and mixing. The open slots' items are
    /// saved in the state, hence the serde bounds (see
    /// [`Interleave`](crate::Interleave)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) if
    /// `cycle_length` or `block_length` is 0.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let ranges = vec![(0u32, 3u32), (10, 12), (20, 21)];
    /// let mixed: Vec<u32> = IterableWrapper::new(ranges)
    ///     .interleave(2, 1, |(a, b)| IterableWrapper::new(a..b))?
    ///     .start()?
    ///     .collect::<Result<_>>()?;
    /// assert_eq!(mixed, [0, 10, 1, 11, 2, 20]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn interleave<N, F>(
        self,
        cycle_length: usize,
        block_length: usize,
        f: F,
    ) -> Result<Interleave<Self, F, N>>
    where
        Self::Item: Serialize + DeserializeOwned + Clone + Send,
        F: FnMut(Self::Item) -> N + Send,
        N: Node,
    {
        Interleave::new(self, cycle_length, block_length, f)
    }

    /// Concatenates token sequences (`Vec<T>` items) and cuts them into
    /// chunks of `seq_len` tokens; the last chunk of a pass may be shorter
    /// (Grain's concat-then-split packing). The tokens carried from one
    /// chunk to the next are in the state, hence the serde bounds. Call
    /// [`with_segments`](crate::Packer::with_segments) on the result for
    /// segment ids and positions (see [`Packer`](crate::Packer)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) if
    /// `seq_len` is 0.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let docs = vec![vec![1u32, 2, 3], vec![4, 5, 6, 7, 8]];
    /// let chunks: Vec<Vec<u32>> = IterableWrapper::new(docs).pack(3)?.start()?.collect::<Result<_>>()?;
    /// assert_eq!(chunks, [vec![1, 2, 3], vec![4, 5, 6], vec![7, 8]]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn pack<T>(self, seq_len: usize) -> Result<Packer<Self, T>>
    where
        Self: Node<Item = Vec<T>>,
        T: Serialize + DeserializeOwned + Send,
    {
        Packer::new(self, seq_len, false)
    }

    /// [`pack`](NodeExt::pack), dropping a short last chunk: every chunk has
    /// exactly `seq_len` tokens.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) if
    /// `seq_len` is 0.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let docs = vec![vec![1u32, 2, 3], vec![4, 5, 6, 7, 8]];
    /// let chunks: Vec<Vec<u32>> = IterableWrapper::new(docs).pack_exact(3)?.start()?.collect::<Result<_>>()?;
    /// assert_eq!(chunks, [vec![1, 2, 3], vec![4, 5, 6]]);
    /// assert!(IterableWrapper::new(vec![vec![1u32]]).pack_exact(0).is_err());
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    fn pack_exact<T>(self, seq_len: usize) -> Result<Packer<Self, T>>
    where
        Self: Node<Item = Vec<T>>,
        T: Serialize + DeserializeOwned + Send,
    {
        Packer::new(self, seq_len, true)
    }

    // Reading files.

    /// Reads the lines of each file this node names (a [`Files`](crate::Files),
    /// or any node of paths), in turn, as `String`s (see [`ReadLines`]:
    /// compressed files, errors, restore by seeking).
    ///
    /// ```
    /// use nodes_std::prelude::*;
    /// use nodes_std::Files;
    ///
    /// let dir = std::env::temp_dir().join(format!("nodes-doc-read-lines-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.txt"), "x\ny\n")?;
    /// let lines: Vec<String> = Files::in_dir(&dir)?.read_lines().start()?.collect::<Result<_>>()?;
    /// assert_eq!(lines, ["x", "y"]);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn read_lines(self) -> ReadLines<Self>
    where
        Self::Item: AsRef<std::path::Path>,
    {
        ReadLines::new(self)
    }

    /// Reads the JSON-lines files this node names, in turn: one `T` per
    /// line, deserialised with `serde_json` (see [`ReadJsonl`]).
    ///
    /// ```
    /// use nodes_std::prelude::*;
    /// use nodes_std::Files;
    ///
    /// let dir = std::env::temp_dir().join(format!("nodes-doc-read-jsonl-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.jsonl"), "[1, 2]\n[3]\n")?;
    /// let rows: Vec<Vec<u8>> = Files::in_dir(&dir)?.read_jsonl::<Vec<u8>>().start()?.collect::<Result<_>>()?;
    /// assert_eq!(rows, [vec![1, 2], vec![3]]);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn read_jsonl<T>(self) -> ReadJsonl<Self, T>
    where
        Self::Item: AsRef<std::path::Path>,
        T: DeserializeOwned + Send,
    {
        ReadJsonl::new(self)
    }

    /// [`read_jsonl`](NodeExt::read_jsonl), each line's `T` made by
    /// `decode` from the line's `serde_json` deserializer: through a serde
    /// [`DeserializeSeed`](serde::de::DeserializeSeed), say, that carries
    /// what is known only at run time (the one field of a record the caller
    /// wants) into the one pass over the line. The reader checks that
    /// nothing but whitespace follows the value.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    /// use nodes_std::Files;
    /// use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
    ///
    /// /// The number of fields of a record, up to a limit known at run time.
    /// struct FieldsUpTo(usize);
    ///
    /// impl<'de> DeserializeSeed<'de> for FieldsUpTo {
    ///     type Value = usize;
    ///     fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
    ///         d.deserialize_map(self)
    ///     }
    /// }
    ///
    /// impl<'de> Visitor<'de> for FieldsUpTo {
    ///     type Value = usize;
    ///     fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         f.write_str("an object")
    ///     }
    ///     fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
    ///         let mut n = 0;
    ///         while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
    ///             n += 1;
    ///         }
    ///         Ok(n.min(self.0))
    ///     }
    /// }
    ///
    /// let dir = std::env::temp_dir().join(format!("nodes-doc-jsonl-with-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.jsonl"), "{\"a\": 1}\n{\"a\": 1, \"b\": 2, \"c\": 3}\n")?;
    /// let limit = 2;
    /// let counts: Vec<usize> = Files::in_dir(&dir)?
    ///     .read_jsonl_with(move |line| FieldsUpTo(limit).deserialize(line))
    ///     .start()?
    ///     .collect::<Result<_>>()?;
    /// assert_eq!(counts, [1, 2]);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn read_jsonl_with<T, F>(self, decode: F) -> ReadJsonl<Self, T, F>
    where
        Self::Item: AsRef<std::path::Path>,
        F: for<'a> Fn(
                &mut serde_json::Deserializer<serde_json::de::StrRead<'a>>,
            ) -> serde_json::Result<T>
            + Send,
        T: Send,
    {
        ReadJsonl::with(self, decode)
    }

    /// Reads the Parquet files (or [`RowGroup`](crate::RowGroup)s) this node
    /// names, in turn: one `T` per row, deserialised with serde from the
    /// Arrow arrays (see
    /// [`ReadParquet`](crate::ReadParquet)).
    /// With the `parquet` feature.
    #[cfg(feature = "parquet")]
    fn read_parquet<T>(self) -> crate::ReadParquet<Self, T>
    where
        Self::Item: crate::ParquetPart,
        T: DeserializeOwned + Send,
    {
        crate::ReadParquet::new(self)
    }

    /// Reads the Parquet files this node names, in turn, as Arrow
    /// `RecordBatch`es of at most `rows` rows, each within a row group (see
    /// [`ReadParquetBatches`](crate::ReadParquetBatches)). With the
    /// `parquet` feature.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) if `rows` is 0.
    #[cfg(feature = "parquet")]
    fn read_parquet_batches(self, rows: usize) -> Result<crate::ReadParquetBatches<Self>>
    where
        Self::Item: crate::ParquetPart,
    {
        crate::ReadParquetBatches::new(self, rows)
    }
}

impl<N: Node> NodeExt for N {}

/// Lets a function with an error type of its own go where a function
/// returning `Result<U, BoxError>` is expected (see [errors from user
/// functions](NodeExt#errors-from-user-functions)): the result calls `f` and
/// boxes its error, which stays the source of the consumer's
/// [`Error::User`](crate::Error::User) (`downcast_ref` gives it back).
///
/// ```
/// use nodes_std::{IterableWrapper, NodeExt, ParallelOptions, Result, boxed_err};
///
/// fn parse(text: &str) -> std::result::Result<u8, std::num::ParseIntError> {
///     text.parse()
/// }
///
/// let node = IterableWrapper::new(["1", "x"]).par_map(boxed_err(parse), ParallelOptions::new(2))?;
/// let items: Vec<Result<u8>> = node.start()?.collect();
/// assert_eq!(items[0].as_ref().ok(), Some(&1));
/// assert!(items[1].is_err());
/// # Ok::<(), nodes_std::Error>(())
/// ```
pub fn boxed_err<T, U, E, F>(f: F) -> impl Fn(T) -> std::result::Result<U, BoxError>
where
    F: Fn(T) -> std::result::Result<U, E>,
    E: Into<BoxError>,
{
    move |item| f(item).map_err(Into::into)
}
