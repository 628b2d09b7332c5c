//! The in-order reorder buffer.

use std::collections::VecDeque;

/// Holds results that arrived before their turn, keyed by item index.
///
/// Indices waiting here all lie in `[next, next + max_concurrent)` (the
/// permits bound them), so a ring of slots indexed by `index - base` is enough:
/// insertion and taking the front are O(1), and nothing polls. The consumer
/// blocks on the result channel until the index it wants is here.
#[derive(Debug)]
pub(crate) struct ReorderBuffer<T> {
    /// The index of `slots[0]`.
    base: u64,
    slots: VecDeque<Option<T>>,
}

impl<T> ReorderBuffer<T> {
    /// An empty buffer whose first wanted index is `base`.
    pub(crate) fn new(base: u64) -> Self {
        ReorderBuffer {
            base,
            slots: VecDeque::new(),
        }
    }

    /// Stores the result for `index`. Indices already passed are dropped.
    pub(crate) fn insert(&mut self, index: u64, value: T) {
        let Some(pos) = index.checked_sub(self.base) else {
            return;
        };
        let pos = usize::try_from(pos).unwrap_or(usize::MAX);
        if pos >= self.slots.len() {
            self.slots.resize_with(pos + 1, || None);
        }
        self.slots[pos] = Some(value);
    }

    /// Takes the result for `index` if it has arrived. Every slot below
    /// `index` is discarded: the consumer has moved past it (an index that was
    /// skipped on restore never arrives).
    pub(crate) fn take(&mut self, index: u64) -> Option<T> {
        let gap = index.checked_sub(self.base)?;
        if gap > 0 {
            let drop_n = usize::try_from(gap).map_or(self.slots.len(), |g| g.min(self.slots.len()));
            self.slots.drain(..drop_n);
            self.base = index;
        }
        let value = self.slots.front_mut()?.take()?;
        self.slots.pop_front();
        self.base += 1;
        Some(value)
    }

    /// Whether no result waits for its turn.
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    /// How many results are buffered.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_in_index_order() {
        let mut buf = ReorderBuffer::new(10);
        buf.insert(12, 'c');
        buf.insert(11, 'b');
        assert_eq!(buf.take(10), None);
        buf.insert(10, 'a');
        assert_eq!(buf.take(10), Some('a'));
        assert_eq!(buf.take(11), Some('b'));
        assert_eq!(buf.take(12), Some('c'));
        assert_eq!(buf.take(13), None);
        assert_eq!(buf.buffered(), 0);
    }

    #[test]
    fn skipped_indices_are_passed_over_and_stale_ones_dropped() {
        let mut buf = ReorderBuffer::new(0);
        buf.insert(3, 3);
        // Indices 0..3 were skipped: the consumer asks for 3 directly.
        assert_eq!(buf.take(3), Some(3));
        buf.insert(1, 1);
        assert_eq!(buf.buffered(), 0);
        buf.insert(6, 6);
        assert_eq!(buf.take(5), None);
        assert_eq!(buf.take(6), Some(6));
    }
}
