//! [`IterableWrapper`]: any re-iterable collection as a source node.

use std::fmt;

use crate::{Cx, Error, Init, Lazy, Node, Result};

/// A source node over any `IntoIterator + Clone` (a `Vec`, a range, a slice...).
///
/// Each pass iterates a fresh clone of the collection.
///
/// # State
/// `num_yielded`: items returned this pass. Restore re-creates the iterator
/// and skips that many items with [`Iterator::nth`], which is O(1) for
/// iterators that can seek (integer ranges, slices, `Vec`'s iterator, and
/// anything that overrides `nth`) and O(n) otherwise.
///
/// # Errors
/// Restoring a `num_yielded` larger than the collection is a bad state.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::IterableWrapper;
///
/// let items: Vec<u32> = IterableWrapper::new(0..4u32).start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [0, 1, 2, 3]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(init)]
#[must_use = "nodes do nothing until started"]
pub struct IterableWrapper<I: IntoIterator> {
    iterable: I,
    #[node(state)]
    num_yielded: u64,
    #[node(lazy)]
    iter: Lazy<I::IntoIter>,
}

impl<I: IntoIterator> fmt::Debug for IterableWrapper<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IterableWrapper")
            .field("iterable", &std::any::type_name::<I>())
            .field("num_yielded", &self.num_yielded)
            .finish_non_exhaustive()
    }
}

impl<I: IntoIterator> IterableWrapper<I> {
    /// Wraps `iterable`; each pass iterates a clone of it.
    pub fn new(iterable: I) -> Self {
        IterableWrapper {
            iterable,
            num_yielded: 0,
            iter: Lazy::new(),
        }
    }
}

impl<I> Node for IterableWrapper<I>
where
    I: IntoIterator + Clone + Send,
    I::IntoIter: Send,
{
    type Item = I::Item;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<I::Item>> {
        let item = self.iter.get_mut()?.next();
        if item.is_some() {
            self.num_yielded += 1;
        }
        Ok(item)
    }
}

/// Re-creates the iterator and skips what a restored state had yielded.
impl<I: IntoIterator + Clone> Init for IterableWrapper<I> {
    fn init(&mut self, _restored: bool) -> Result<()> {
        let mut iter = self.iterable.clone().into_iter();
        if let Some(last) = self.num_yielded.checked_sub(1) {
            let skipped = usize::try_from(last)
                .ok()
                .and_then(|n| iter.nth(n))
                .is_some();
            if !skipped {
                return Err(Error::bad_state(
                    "num_yielded",
                    format!(
                        "IterableWrapper cannot skip {} items: the iterable is shorter",
                        self.num_yielded
                    ),
                ));
            }
        }
        self.iter.set(iter);
        Ok(())
    }
}
