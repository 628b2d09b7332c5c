//! [`Progress`]: how far a pass is through its files, summed from the
//! [`Tally`]s that file nodes attach to their descriptions.
//!
//! A tally is a live counter shared between a node and its description
//! (an `Arc`), so a description taken once (a threaded node keeps its
//! source's) still sees the node move, and reading it costs no state.

use std::fmt;
use std::sync::Arc;

use crate::describe::Description;
use crate::resume::Resume;

/// How far a pass is through its files: what
/// [`Epoch::progress`](crate::Epoch::progress) returns, summed over the
/// pipeline's file listings and readers.
///
/// The counts are of what the readers have read, which a node reading
/// ahead (`prefetch`, `par_map`) may have taken before the loader returned
/// it. Sizes are of the files as stored (compressed bytes for a compressed
/// file). Within an epoch they only grow, and are never ahead of what the
/// readers have read, even while readers on other threads move.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Files read to their end this pass.
    pub files_done: u64,
    /// Files this pass reads (this rank's share), if a listing says.
    pub files_total: Option<u64>,
    /// Bytes read this pass: the files done, plus the part read of each
    /// open one.
    pub bytes_read: u64,
    /// The size of the files this pass reads, if every listing knows its
    /// files' sizes.
    pub bytes_total: Option<u64>,
}

impl Progress {
    /// The fraction done, by bytes where their total is known, else by
    /// files; `None` without a total.
    pub fn fraction(&self) -> Option<f64> {
        let (done, total) = match (self.bytes_total, self.files_total) {
            (Some(total), _) => (self.bytes_read, total),
            (None, Some(total)) => (self.files_done, total),
            (None, None) => return None,
        };
        Some(if total == 0 {
            1.0
        } else {
            done.min(total) as f64 / total as f64
        })
    }
}

/// What one node counts of its pass, for [`Progress`]: a listing its share
/// of the files, a reader the files it finished and the ones it has open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// From a node that lists files: how many of this rank's files it has
    /// handed out this pass, of how many, and their sizes if known.
    pub listed: Option<Listed>,
    /// From a reader: files it read to their end since its last reset.
    pub finished_files: u64,
    /// Their sizes.
    pub finished_bytes: u64,
    /// Files it has open (begun, not finished).
    pub open_files: u64,
    /// Their sizes.
    pub open_size: u64,
    /// The bytes read of them.
    pub open_read: u64,
    /// Readers between asking their source for a file and opening it: its
    /// size is not known yet, so the bytes read are not either.
    pub pulling: u64,
}

/// A listing's share of one pass (see [`Count::listed`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Listed {
    /// Files handed out this pass.
    pub pulled: u64,
    /// Files this pass hands out.
    pub files: u64,
    /// The sizes of those handed out and of all, if the listing knows
    /// every file's size.
    pub bytes: Option<(u64, u64)>,
}

/// A node's live count of its pass (see [`Count`]), attached to its
/// description with [`Description::with_tally`] (a derived node: a
/// `#[node(tally)]` field, an `Arc` of a `Tally`).
pub trait Tally: Send + Sync + fmt::Debug {
    /// The count now. `shard` is `(rank, world_size)` when the node's
    /// parent keeps every `world_size`-th of its items
    /// ([`Resume::Shards`]): a listing then counts that rank's files.
    fn count(&self, shard: Option<(u64, u64)>) -> Count;
}

/// Both counts together.
impl std::ops::Add for Count {
    type Output = Count;

    fn add(self, other: Count) -> Count {
        let listed = match (self.listed, other.listed) {
            (Some(a), Some(b)) => Some(Listed {
                pulled: a.pulled + b.pulled,
                files: a.files + b.files,
                bytes: a.bytes.zip(b.bytes).map(|(a, b)| (a.0 + b.0, a.1 + b.1)),
            }),
            (a, b) => a.or(b),
        };
        Count {
            listed,
            finished_files: self.finished_files + other.finished_files,
            finished_bytes: self.finished_bytes + other.finished_bytes,
            open_files: self.open_files + other.open_files,
            open_size: self.open_size + other.open_size,
            open_read: self.open_read + other.open_read,
            pulling: self.pulling + other.pulling,
        }
    }
}

impl Count {
    /// The progress these counts make. With a listing, files done are the
    /// files it handed out less those still open, which holds after a
    /// restore (a reader's own counts start at its reset); without one, the
    /// readers' own counts. Counts read from listings before readers (as
    /// [`Description::count`] does) are never ahead: a file a reader is
    /// opening counts as not done, and while one is, the bytes read are
    /// the readers' own since their reset (a lower bound).
    pub fn progress(self) -> Progress {
        let read_open = self.open_read.min(self.open_size);
        let own_bytes = self.finished_bytes + read_open;
        let Some(listed) = self.listed else {
            return Progress {
                files_done: self.finished_files,
                files_total: None,
                bytes_read: own_bytes,
                bytes_total: None,
            };
        };
        let bytes_read = match listed.bytes {
            Some((pulled, _)) if self.pulling == 0 => {
                pulled.saturating_sub(self.open_size) + read_open
            }
            _ => own_bytes,
        };
        Progress {
            files_done: listed.pulled.saturating_sub(self.open_files + self.pulling),
            files_total: Some(listed.files),
            bytes_read,
            bytes_total: listed.bytes.map(|(_, total)| total),
        }
    }
}

impl Description {
    /// Attaches a live count of the node's pass (see [`Tally`]): neither
    /// saved, shown nor compared.
    pub fn with_tally(mut self, tally: Arc<dyn Tally>) -> Self {
        self.tallies.push(tally);
        self
    }

    /// The sum of the tallies in this subtree (see [`Tally::count`]), each
    /// node's read after those below it: a listing's before the readers
    /// it feeds, which may only have moved on since.
    pub fn count(&self) -> Count {
        let mut found = Vec::new();
        let mut open = vec![(self, None)];
        while let Some((desc, shard)) = open.pop() {
            found.extend(desc.tallies.iter().map(|tally| (tally, shard)));
            let shard = shard_of(desc);
            open.extend(desc.children().map(|(_, child)| (child, shard)));
        }
        let counts = found
            .into_iter()
            .rev()
            .map(|(tally, shard)| tally.count(shard));
        counts.fold(Count::default(), |sum, count| sum + count)
    }

    /// How far the described pipeline is through its files (see
    /// [`Progress`]).
    pub fn progress(&self) -> Progress {
        self.count().progress()
    }
}

/// `(rank, world_size)` of a node that shards its child's items.
fn shard_of(desc: &Description) -> Option<(u64, u64)> {
    if *desc.resume() != Resume::Shards {
        return None;
    }
    let param = |name| desc.get_param(name)?.parse().ok();
    param("rank").zip(param("world_size"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug, Default)]
    struct Fixed(Mutex<Count>, Mutex<Option<(u64, u64)>>);

    impl Tally for Fixed {
        fn count(&self, shard: Option<(u64, u64)>) -> Count {
            *self.1.lock().unwrap() = shard;
            *self.0.lock().unwrap()
        }
    }

    fn listed(pulled: u64, files: u64, bytes: Option<(u64, u64)>) -> Count {
        let listed = Listed {
            pulled,
            files,
            bytes,
        };
        Count {
            listed: Some(listed),
            ..Count::default()
        }
    }

    fn open(size: u64, read: u64) -> Count {
        Count {
            open_files: 1,
            open_size: size,
            open_read: read,
            ..Count::default()
        }
    }

    #[test]
    fn a_listing_less_its_open_files() {
        // 3 of 5 files handed out, one of them half read.
        let count = listed(3, 5, Some((300, 500))) + open(100, 50);
        let expected = Progress {
            files_done: 2,
            files_total: Some(5),
            bytes_read: 250,
            bytes_total: Some(500),
        };
        assert_eq!(count.progress(), expected);
        assert_eq!(expected.fraction(), Some(0.5));
        // Without sizes, bytes are the readers' own.
        let count = Count {
            finished_files: 2,
            finished_bytes: 120,
            ..listed(3, 5, None) + open(100, 50)
        };
        let progress = count.progress();
        assert_eq!((progress.bytes_read, progress.bytes_total), (170, None));
        assert_eq!(progress.fraction(), Some(0.4));
        // No listing: the readers' counts, no totals.
        let progress = Count {
            finished_files: 4,
            ..open(10, 3)
        }
        .progress();
        assert_eq!(progress.files_done, 4);
        assert_eq!(progress.fraction(), None);
    }

    #[test]
    fn a_file_being_opened_is_not_done_and_its_bytes_not_counted() {
        let finished = Count {
            finished_files: 1,
            finished_bytes: 40,
            ..Count::default()
        };
        // The listing has handed out the third file, the reader is opening it.
        let opening = Count {
            pulling: 1,
            ..finished
        };
        let progress = (listed(3, 5, Some((300, 500))) + opening).progress();
        assert_eq!((progress.files_done, progress.bytes_read), (2, 40));
        // Not yet handed out: still not done.
        let progress = (listed(2, 5, Some((200, 500))) + opening).progress();
        assert_eq!((progress.files_done, progress.bytes_read), (1, 40));
    }

    /// Records the order tallies are read in.
    #[derive(Debug)]
    struct Logged(&'static str, Arc<Mutex<Vec<&'static str>>>);

    impl Tally for Logged {
        fn count(&self, _shard: Option<(u64, u64)>) -> Count {
            self.1.lock().unwrap().push(self.0);
            Count::default()
        }
    }

    #[test]
    fn listings_are_read_before_the_readers_above_them() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let tally = |name| Arc::new(Logged(name, log.clone()));
        let reader = |name, files| {
            Description::new("Reader")
                .with_tally(tally(name))
                .child("source", Description::new("Files").with_tally(tally(files)))
        };
        let mix = Description::new("Mix")
            .child("a", reader("reader a", "files a"))
            .child("b", reader("reader b", "files b"));
        mix.count();
        let log = log.lock().unwrap().clone();
        let at = |name| log.iter().position(|n| *n == name).unwrap();
        assert!(at("files a") < at("reader a"), "{log:?}");
        assert!(at("files b") < at("reader b"), "{log:?}");
    }

    #[test]
    fn one_listing_without_sizes_leaves_the_bytes_unknown() {
        let count = listed(1, 2, Some((10, 20))) + listed(1, 2, None);
        assert_eq!(count.listed.map(|l| (l.files, l.bytes)), Some((4, None)));
    }

    #[test]
    fn a_shard_above_is_passed_to_the_tally() {
        let files = Arc::new(Fixed::default());
        *files.0.lock().unwrap() = listed(1, 2, Some((5, 9)));
        let reader = Arc::new(Fixed::default());
        *reader.0.lock().unwrap() = open(5, 2);
        let desc = Description::new("Reader").with_tally(reader.clone()).child(
            "source",
            Description::new("Sharder")
                .param("rank", 1)
                .param("world_size", 3)
                .with_resume(Resume::Shards)
                .child(
                    "source",
                    Description::new("Files").with_tally(files.clone()),
                ),
        );
        let progress = desc.progress();
        assert_eq!((progress.files_done, progress.bytes_read), (0, 2));
        assert_eq!(*files.1.lock().unwrap(), Some((1, 3)));
        assert_eq!(*reader.1.lock().unwrap(), None);
        // Tallies are live and not part of what a description compares.
        *reader.0.lock().unwrap() = Count::default();
        assert_eq!(desc.progress().files_done, 1);
        assert_eq!(desc, desc.clone().with_tally(reader));
    }
}
