//! [`IterableWrapper`]: any re-iterable collection (or a closure that makes
//! a fresh iterator) as a source node, and [`SeekableIterator`] for
//! iterators that can jump ahead.

use std::fmt;

use crate::{Cx, Error, Hint, Init, Lazy, Node, NodeId, NodeName, Result, State, Validate};

/// A source node over any `IntoIterator + Clone` (a `Vec`, a range, a
/// slice...), or over the iterators a closure makes.
///
/// Built with [`IterableWrapper::new`] (or [`seekable`](IterableWrapper::seekable)),
/// each pass (every `reset`) iterates a fresh clone of the collection: cheap
/// for ranges and slices, a full copy for an owned `Vec` (share large data
/// through a slice, or through a [`Dataset`](crate::Dataset) and
/// [`MapStyleWrapper`](crate::MapStyleWrapper)). Built with
/// [`IterableWrapper::from_fn`], each pass calls the closure for a fresh
/// iterator: for iterators that are not `Clone` (`BufRead::lines()`, database
/// cursors, generators). To read lines or JSON records from files, with an
/// O(1) restore, use [`Files`](crate::Files) and
/// [`read_lines`](crate::NodeExt::read_lines) instead.
///
/// # State
/// `num_yielded`: items returned this pass.
///
/// # Restoring
/// Restore re-creates the iterator and skips `num_yielded` items:
/// - built with [`IterableWrapper::new`], by [`Iterator::nth`]. That is O(1)
///   for the iterators std lets jump (integer ranges, slice iterators and
///   their `copied()`, `Vec`'s `IntoIter` apart from dropping the skipped
///   items, and any iterator of yours that overrides `nth`) and an O(n)
///   replay otherwise (`map`, `filter`, `chain`... re-run their closures);
/// - built with [`IterableWrapper::seekable`], by
///   [`SeekableIterator::skip_ahead`]: O(1) by contract, checked at compile
///   time, and no item is produced while skipping.
///
/// # Errors
/// The iterator cannot fail; a panic in it is not caught (it unwinds through
/// `next`). If a node above catches it, the item that panicked counts as
/// returned: a state taken afterwards resumes after it, where the iterator
/// itself stands.
///
/// Restoring a `num_yielded` larger than the collection is a bad state.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::IterableWrapper;
///
/// let items: Vec<u32> = IterableWrapper::new(0..4u32).start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [0, 1, 2, 3]);
///
/// // Resume after two items: the range jumps straight there.
/// let state = State::new().with("num_yielded", 2u64)?;
/// let rest: Vec<u32> = IterableWrapper::seekable(0..4u32).start_from(&state)?.collect::<Result<_>>()?;
/// assert_eq!(rest, [2, 3]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(init, validate, size_hint)]
#[must_use = "nodes do nothing until started"]
pub struct IterableWrapper<I: IntoIterator> {
    #[node(config)]
    iterable: I,
    /// How `init` makes the pass's iterator (a clone, or a call of the closure).
    #[node(config)]
    make: fn(&mut I) -> I::IntoIter,
    /// How `init` skips the items a restored state had already returned.
    #[node(config)]
    skip: fn(&mut I::IntoIter, u64) -> u64,
    #[node(state, counts_items)]
    num_yielded: u64,
    /// The number of items of a pass, when the iterator of the last pass
    /// started knew it exactly: a restore past it is refused before anything
    /// is applied (see `Validate`), otherwise when the skip falls short.
    #[node(config)]
    len: Option<u64>,
    #[node(lazy)]
    iter: Lazy<I::IntoIter>,
}

impl<I: IntoIterator> fmt::Debug for IterableWrapper<I> {
    crate::transforms::debug_fields!("IterableWrapper", finish_non_exhaustive;
        iterable = {std::any::type_name::<I>()}, num_yielded);
}

impl<I: IntoIterator> IterableWrapper<I> {
    /// Wraps `iterable`; each pass iterates a clone of it. Restore skips with
    /// [`Iterator::nth`] (see the type's docs for its cost).
    ///
    /// An iterable that is not `Clone` does not compile here: use
    /// [`IterableWrapper::from_fn`].
    pub fn new(iterable: I) -> Self
    where
        I: ReIterable,
    {
        IterableWrapper::with(iterable, clone_into_iter::<I>, skip_by_nth::<I::IntoIter>)
    }

    /// Wraps `iterable` whose iterator can seek: restoring is O(1) whatever
    /// the position, and skips without producing items.
    pub fn seekable(iterable: I) -> Self
    where
        I: ReIterable,
        I::IntoIter: SeekableIterator,
    {
        IterableWrapper::with(iterable, clone_into_iter::<I>, I::IntoIter::skip_ahead)
    }

    /// A wrapper that makes each pass's iterator with `make` and skips with
    /// `skip`.
    fn with(
        iterable: I,
        make: fn(&mut I) -> I::IntoIter,
        skip: fn(&mut I::IntoIter, u64) -> u64,
    ) -> Self {
        IterableWrapper {
            iterable,
            make,
            skip,
            num_yielded: 0,
            len: None,
            iter: Lazy::new(),
        }
    }

    /// Items returned this pass.
    pub fn num_yielded(&self) -> u64 {
        self.num_yielded
    }
}

impl<F, T> IterableWrapper<FromFn<F>>
where
    F: FnMut() -> T,
    T: IntoIterator,
{
    /// A source whose every pass iterates a fresh iterator from `make`: for
    /// iterators that are not `Clone` (`BufRead::lines()`, cursors,
    /// generators).
    ///
    /// `make` runs at every reset (the start of each epoch, and a restore).
    /// Restore calls it and skips the items already returned with
    /// [`Iterator::nth`]: a replay, O(items skipped), unless the iterator's
    /// `nth` jumps. `make` must give the same items in the same order every
    /// time for a resume to be exact.
    ///
    /// ```
    /// use std::io::BufRead;
    /// use nodes_std::prelude::*;
    ///
    /// let text = "a\nb\nc\n";
    /// // `Lines<&[u8]>` is not `Clone`: make a fresh one each pass.
    /// let lines = IterableWrapper::from_fn(move || text.as_bytes().lines().map(|l| l.unwrap()));
    /// let mut running = lines.start()?;
    /// assert_eq!(running.next().transpose()?.as_deref(), Some("a"));
    /// let state = running.get_state()?;
    ///
    /// let lines = IterableWrapper::from_fn(move || text.as_bytes().lines().map(|l| l.unwrap()));
    /// let rest: Vec<String> = lines.start_from(&state)?.collect::<Result<_>>()?;
    /// assert_eq!(rest, ["b", "c"]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    pub fn from_fn(make: F) -> Self {
        let call = |make: &mut FromFn<F>| (make.0)().into_iter();
        IterableWrapper::with(FromFn(make), call, skip_by_nth::<T::IntoIter>)
    }
}

/// The closure of an [`IterableWrapper::from_fn`]; as an `IntoIterator`, it
/// calls the closure once.
pub struct FromFn<F>(F);

impl<F> fmt::Debug for FromFn<F> {
    crate::transforms::debug_fields!("FromFn", finish_non_exhaustive);
}

impl<F, T> IntoIterator for FromFn<F>
where
    F: FnMut() -> T,
    T: IntoIterator,
{
    type Item = T::Item;
    type IntoIter = T::IntoIter;

    fn into_iter(mut self) -> T::IntoIter {
        (self.0)().into_iter()
    }
}

/// A collection [`IterableWrapper::new`] can iterate again each pass: any
/// `IntoIterator + Clone`. Implemented for all of them; its only role is to
/// say, where `new` is called, what to use for an iterable that is not
/// `Clone`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `Clone`, so `IterableWrapper` cannot iterate it again each pass",
    label = "not `Clone`: `IterableWrapper::new` and `seekable` clone the iterable at every reset",
    note = "for an iterator that cannot be cloned (`BufRead::lines()`, a cursor, a generator), make a fresh one each pass: `IterableWrapper::from_fn(|| ...)`",
    note = "to read lines or JSON records from files with an O(1) restore, use `Files` with `.read_lines()` or `.read_jsonl()`"
)]
pub trait ReIterable: IntoIterator + Clone {}

impl<T: IntoIterator + Clone> ReIterable for T {}

/// A pass's iterator for [`IterableWrapper::new`]: a clone's.
fn clone_into_iter<I: IntoIterator + Clone>(iterable: &mut I) -> I::IntoIter {
    iterable.clone().into_iter()
}

impl<I> Node for IterableWrapper<I>
where
    I: IntoIterator + Send,
    I::IntoIter: Send,
{
    type Item = I::Item;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<I::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |_cx| {
            let iter = self.iter.get_mut()?;
            // Counted before the call: if the iterator panics and the panic
            // is caught above, the failed item stays consumed (a state taken
            // afterwards resumes after it, as the iterator itself does).
            let before = self.num_yielded;
            self.num_yielded = before.saturating_add(1);
            let item = iter.next();
            if item.is_none() {
                self.num_yielded = before;
            }
            Ok(item)
        })
    }
}

/// The pass's iterator's own [`Iterator::size_hint`] (after a restore, of
/// the iterator that skipped what was returned): as sound as the
/// iterator's, which the standard library's are. It never fails.
impl<I: IntoIterator> crate::SizeHint for IterableWrapper<I> {
    fn size_hint(&self) -> Hint {
        self.iter
            .get_opt()
            .map_or(Hint::UNKNOWN, |iter| Hint::from_iterator(iter.size_hint()))
    }
}

/// Re-creates the iterator and skips what a restored state had yielded.
impl<I: IntoIterator> Init for IterableWrapper<I> {
    fn init(&mut self, _restored: bool) -> Result<()> {
        let mut iter = (self.make)(&mut self.iterable);
        // The length, where the iterator knows it: a skip by `nth` only
        // says that it ended, not where.
        self.len = match iter.size_hint() {
            (low, Some(high)) if low == high => u64::try_from(low).ok(),
            _ => None,
        };
        if self.num_yielded > 0 {
            let skipped = (self.skip)(&mut iter, self.num_yielded);
            if skipped < self.num_yielded {
                return Err(past_the_end("num_yielded", self.num_yielded, self.len));
            }
        }
        self.iter.set(iter);
        Ok(())
    }
}

/// A restore beyond the last pass's length, where it was known exactly.
impl<I: IntoIterator> Validate for IterableWrapper<I> {
    fn validate(&self, state: &State) -> Result<()> {
        let num_yielded: u64 = state.get("num_yielded")?;
        if self.len.is_some_and(|len| num_yielded > len) {
            return Err(past_the_end(
                &state.path_of("num_yielded"),
                num_yielded,
                self.len,
            ));
        }
        Ok(())
    }
}

fn past_the_end(path: &str, num_yielded: u64, len: Option<u64>) -> Error {
    let has = match len {
        Some(len) => format!("has only {len} items"),
        None => "has fewer items".to_owned(),
    };
    let why = format!("IterableWrapper cannot skip {num_yielded} items: the iterable {has}");
    Error::bad_state(path, why)
}

/// An iterator that can skip ahead in O(1), without producing the items it
/// skips.
///
/// [`IterableWrapper::seekable`] requires it, so a wrapper built that way
/// restores a checkpoint in O(1) whatever its position, by construction.
///
/// # Relation to [`Iterator::nth`]
/// std already makes `nth` jump in O(1) for integer ranges, slice iterators
/// and `Vec`'s `IntoIter`, and [`IterableWrapper::new`] skips with `nth`, so
/// those restore in O(1) either way. This trait adds what `nth` cannot say:
/// - a compile-time promise: a type implements it only if skipping costs
///   O(1), so `IterableWrapper::seekable(iter.map(f))` does not compile
///   rather than silently replaying `f` on restore;
/// - skipping without producing: `nth(k - 1)` returns item `k - 1`, which is
///   real work for an iterator that decodes or loads its items.
///
/// Implement it for your own iterators over data with computed offsets (fixed
/// size records, an index of a file...). It is implemented here for integer
/// ranges (`a..b`, `a..=b`, `a..`), `slice::Iter` and its `copied()`, and
/// `vec::IntoIter` (which still drops the skipped items).
///
/// ```
/// use nodes_std::SeekableIterator;
///
/// let mut it = 10..20u32;
/// assert_eq!(it.skip_ahead(4), 4);
/// assert_eq!(it.next(), Some(14));
/// assert_eq!(it.skip_ahead(100), 5); // only five were left
/// assert_eq!(it.next(), None);
/// ```
pub trait SeekableIterator: Iterator {
    /// Skips the next `n` items without producing them, in O(1). Returns how
    /// many were skipped: `n`, or fewer if the iterator ended first.
    fn skip_ahead(&mut self, n: u64) -> u64;
}

/// Skips `n` items with `nth`; O(1) where `nth` is, a replay otherwise.
fn skip_by_nth<T: Iterator>(iter: &mut T, n: u64) -> u64 {
    let mut skipped = 0;
    while skipped < n {
        let step = usize::try_from(n - skipped).unwrap_or(usize::MAX);
        if iter.nth(step - 1).is_none() {
            // `nth` does not say how far it got; exactness only matters for
            // the error message, so report what certainly was skipped.
            return skipped;
        }
        skipped += step as u64;
    }
    skipped
}

/// Skips `n` items with `nth`, for iterators whose `nth` is O(1), counting
/// exactly where the iterator's size hint has an upper bound (one without
/// holds more than `usize::MAX` items).
fn skip_known<T: Iterator>(iter: &mut T, n: u64) -> u64 {
    let remaining = iter.size_hint().1.map_or(n, |r| n.min(r as u64));
    skip_by_nth(iter, remaining)
}

/// `SeekableIterator` by [`skip_known`], for each `[generics] type`.
macro_rules! seekable {
    ($([$($gen:tt)*] $ty:ty),* $(,)?) => {$(
        impl<$($gen)*> SeekableIterator for $ty {
            fn skip_ahead(&mut self, n: u64) -> u64 {
                skip_known(self, n)
            }
        }
    )*};
}

/// Integer ranges; an unbounded one always skips `n` (overflowing the type
/// panics in debug builds, as iterating that far would).
macro_rules! seekable_ranges {
    ($($t:ty)*) => {$(
        seekable!([] std::ops::Range<$t>, [] std::ops::RangeInclusive<$t>, [] std::ops::RangeFrom<$t>);
    )*};
}

seekable_ranges!(u8 u16 u32 u64 usize i8 i16 i32 i64 isize);

seekable!(
    ['a, T] std::slice::Iter<'a, T>,
    ['a, T: Copy] std::iter::Copied<std::slice::Iter<'a, T>>,
    [T] std::vec::IntoIter<T>,
);
