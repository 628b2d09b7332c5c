//! [`Epoch`]: one pass over a loader's pipeline, as an iterator, with the
//! checkpoint taken between its items.

use super::*;

/// One pass over a [`Loader`]'s pipeline: an iterator of `Result<Item>`.
///
/// Created by [`Loader::epoch`]. It borrows the loader; take checkpoints
/// through [`Epoch::state_dict`].
pub struct Epoch<'a, N: Node> {
    pub(super) loader: &'a mut Loader<N>,
    pub(super) pending_error: Option<Error>,
    pub(super) done: bool,
    /// The last [`progress`](Epoch::progress) returned: the next is never
    /// below it.
    pub(super) progress: std::cell::Cell<crate::Progress>,
}

impl<N: Node> fmt::Debug for Epoch<'_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Epoch")
            .field("loader", &self.loader)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<N: Node> Epoch<'_, N> {
    /// The loader's state right now: resuming from it continues after the last
    /// item this epoch returned.
    pub fn state_dict(&mut self) -> Result<State> {
        self.loader.state_dict()
    }

    /// This epoch's number, counting from 0: the loader's first epoch is 0,
    /// and each later one adds 1.
    ///
    /// It survives checkpoints. An epoch resumed from a state taken in its
    /// middle has the number it had when the state was taken; a state taken
    /// at the end of epoch `k` starts epoch `k + 1`. So drive a training
    /// loop by it rather than by a counter of your own, which would run one
    /// epoch too many after resuming an end-of-epoch checkpoint:
    ///
    /// ```
    /// use nodes_core::{Cx, Description, Loader, Node, Result, State, Stateful};
    /// # struct Count { n: u64 }
    /// # impl Node for Count {
    /// #     type Item = u64;
    /// #     fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
    /// #         if self.n == 3 { return Ok(None) }
    /// #         self.n += 1;
    /// #         Ok(Some(self.n - 1))
    /// #     }
    /// # }
    /// # impl Stateful for Count {
    /// #     fn reset(&mut self, s: Option<&State>) -> Result<()> {
    /// #         self.n = s.map_or(Ok(0), |s| s.get("n"))?;
    /// #         Ok(())
    /// #     }
    /// #     fn get_state(&self, _cx: &Cx) -> Result<State> { State::new().with("n", self.n) }
    /// #     fn describe(&self) -> Description { Description::new("Count") }
    /// # }
    /// const EPOCHS: u64 = 2;
    /// // `Count` yields 0, 1, 2. Run epoch 0 to its end and save.
    /// let mut loader = Loader::new(Count { n: 0 });
    /// let mut epoch = loader.epoch();
    /// while let Some(item) = epoch.next() { item?; }
    /// let saved = epoch.state_dict()?.to_json()?;
    ///
    /// // Another process resumes: the loop sees epoch 1 only.
    /// let mut loader = Loader::new(Count { n: 0 });
    /// loader.load_state_dict(&State::from_json(&saved)?)?;
    /// let mut seen = Vec::new();
    /// loop {
    ///     let mut epoch = loader.epoch();
    ///     if epoch.index() >= EPOCHS {
    ///         break;
    ///     }
    ///     while let Some(item) = epoch.next() {
    ///         seen.push((epoch.index(), item?));
    ///     }
    /// }
    /// assert_eq!(seen, [(1, 0), (1, 1), (1, 2)]);
    /// # Ok::<(), nodes_core::Error>(())
    /// ```
    pub fn index(&self) -> u64 {
        self.loader.epoch_index
    }

    /// How many more items this epoch returns, `Err` items included: a lower
    /// bound and, if known, an upper bound, from the root's
    /// [`Stateful::size_hint`](crate::Stateful::size_hint). In a resumed
    /// epoch it is what is left after the restored position, so
    /// `num_yielded() + remaining().0` is where a progress bar ends.
    /// [`Iterator::size_hint`] reports the same, clamped to `usize`.
    pub fn remaining(&self) -> (u64, Option<u64>) {
        if self.pending_error.is_some() {
            return (1, Some(1));
        }
        if self.done {
            return (0, Some(0));
        }
        // An item the loader looked ahead at (a restore at an epoch's end) is
        // no longer in the root's count.
        let peeked = crate::Hint::exact(u64::from(self.loader.peeked.is_some()));
        let hint = peeked.then(self.loader.root.size_hint());
        (hint.lower, hint.upper)
    }

    /// How far this epoch is through its files: files done of their total,
    /// bytes read of theirs, summed over the pipeline's file listings and
    /// readers, local or remote (see [`Progress`](crate::Progress)). Where
    /// [`remaining`](Epoch::remaining) knows no count (a pass over files),
    /// this is what a progress bar shows. Its counts only grow: a reading
    /// taken while a reader on another thread is between files is a lower
    /// bound, and then the last one stands. It walks the pipeline's
    /// description: call it every so many items, not on every one.
    pub fn progress(&self) -> crate::Progress {
        let now = self.loader.root.describe().progress();
        let last = self.progress.get();
        let progress = crate::Progress {
            files_done: now.files_done.max(last.files_done),
            bytes_read: now.bytes_read.max(last.bytes_read),
            ..now
        };
        self.progress.set(progress);
        progress
    }

    /// How many items this epoch has returned, `Err` items included (counting
    /// those before a restore).
    pub fn num_yielded(&self) -> u64 {
        self.loader.num_yielded
    }
}

impl<N: Node> Iterator for Epoch<'_, N> {
    type Item = Result<N::Item>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        // Checked before taken: `take` would copy the whole (large) option
        // on every item, to find it empty.
        if self.pending_error.is_some() {
            self.done = true;
            return self.pending_error.take().map(Err);
        }
        if self.done {
            return None;
        }
        let item = self.loader.next_in_epoch();
        if item.is_none() {
            self.done = true;
            trace::epoch_ended(self.loader.epoch_index, self.loader.num_yielded);
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (lower, upper) = self.remaining();
        crate::hint::usize_bounds(lower, upper)
    }
}
