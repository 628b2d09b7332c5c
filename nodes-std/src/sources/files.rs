//! [`Files`]: a source of file paths from a directory, a glob pattern or a
//! list, in a fixed order, with a digest of the list in its state.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::elastic::Plan;
use crate::sources::glob;
use crate::sources::open::is_remote;
use crate::sources::permute::Permutation;
use crate::transforms::debug_fields;
use crate::{Cx, Error, Init, Lazy, Node, NodeId, NodeName, Result, State, Validate};
use nodes_core::{Count, Listed, Tally};

/// A source node of file paths: the files of a directory
/// ([`Files::in_dir`]), the files a glob pattern matches ([`Files::glob`]),
/// or a list ([`Files::list`]). Read them with
/// [`read_lines`](crate::NodeExt::read_lines) or
/// [`read_jsonl`](crate::NodeExt::read_jsonl).
///
/// The list is taken when the node is built, and is the same every epoch:
/// files added later are not seen until the node is built again, and a file
/// deleted later is an error where a reader opens it. Directory and glob
/// listings are sorted by the bytes of their names (relative to the
/// directory, `/`-separated), so the order is the same on every machine; a
/// list keeps the order given. Each epoch yields every file once, in that
/// order or, after [`shuffle_files(seed)`](Files::shuffle_files), in a seeded
/// random order that is new each epoch (and the same on every rank, so
/// [`shard`](crate::NodeExt::shard) after it splits the files of each epoch
/// between the ranks: `Files::in_dir(d)?.shuffle_files(7).shard(rank, world)?`).
///
/// # State
/// `epoch`, `num_yielded` (paths yielded this epoch), `started` (as
/// [`SamplerWrapper`](crate::SamplerWrapper)'s), `path` (the last path
/// yielded, relative to the listing's base, or `null`), `near` (the names next to
/// it in the list, to name what changed around it if the list changed),
/// `files`:
/// `{"count": number of files, "digest": "fnv1a64:..."}`, a 64-bit FNV-1a
/// hash of the list of names (taken once, when the node is built), and
/// `plan`: `null`, or in a state [`elastic`](crate::elastic) wrote, the
/// positions of the epoch's order this rank reads (`owed`, then `tail`,
/// `tail + world_size`, ...; a [`shard`](crate::NodeExt::shard) above then
/// passes them all on; in the source of an item a reshard replays, `then`
/// lists those of the runs after it). Restore is O(1) (but for the plan's
/// lists): a comparison with that digest and one index computation.
///
/// # Errors
/// The constructors return [`Error::InvalidArgument`] when the directory
/// cannot be listed, or when it (or the pattern, or the list) has no file.
///
/// Restoring a state taken over another list of files is a bad state at
/// `files`, which says how many files each list has, where the file the
/// saved run was reading stands now, and which files were removed or added
/// next to it, so data never shifts silently; restoring a `path` that is not
/// the list's file at that position is a bad state at `path`.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::Files;
///
/// let dir = std::env::temp_dir().join(format!("nodes-doc-files-{}", std::process::id()));
/// std::fs::create_dir_all(dir.join("sub"))?;
/// for name in ["b.txt", "a.txt", "sub/c.txt", "notes.md"] {
///     std::fs::write(dir.join(name), "x\n")?;
/// }
/// let names = |files: Files| -> Result<Vec<String>> {
///     files.start()?.map(|p| Ok(p?.strip_prefix(&dir).unwrap().display().to_string())).collect()
/// };
/// assert_eq!(names(Files::in_dir(&dir)?)?, ["a.txt", "b.txt", "notes.md"]);
/// assert_eq!(names(Files::glob(&format!("{}/**/*.txt", dir.display()))?)?, ["a.txt", "b.txt", "sub/c.txt"]);
///
/// let mut shuffled = names(Files::in_dir(&dir)?.shuffle_files(7))?;
/// shuffled.sort();
/// assert_eq!(shuffled, ["a.txt", "b.txt", "notes.md"]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Node)]
#[node(init, validate, resume = crate::Resume::ListsFiles)]
#[must_use = "nodes do nothing until started"]
pub struct Files {
    /// The directory the names are relative to (for a list, the paths' common
    /// parent, maybe empty).
    #[node(config)]
    base: PathBuf,
    /// The file names, in list order.
    #[node(config)]
    names: Arc<[String]>,
    /// Their count and digest, computed once.
    #[node(config)]
    summary: ListSummary,
    /// `shuffle_files`' seed.
    #[node(param)]
    seed: Option<u64>,
    // Declared before `started` and `plan`: its default reads their values
    // from before the reset.
    #[node(state, default = self.next_epoch())]
    epoch: u64,
    #[node(state)]
    num_yielded: u64,
    #[node(state)]
    started: bool,
    #[node(state)]
    path: Option<String>,
    /// The names next to `path` in the list (before, after), so that an
    /// error about a changed list can name what changed around it.
    #[node(state)]
    near: Vec<String>,
    #[node(state, default = self.summary.clone())]
    files: ListSummary,
    /// The positions of the epoch's order this rank reads, when a reshard
    /// dealt them (see [`elastic`](crate::elastic)); `None`: every position.
    #[node(state, default = self.restarted_plan())]
    plan: Option<RankPlan>,
    /// The epoch's order, when shuffled.
    #[node(lazy)]
    order: Lazy<Option<Permutation>>,
    /// Its share of the pass and the files' sizes, for progress.
    #[node(tally)]
    tally: Arc<ListTally>,
}

/// The positions of the epoch's order one rank of `world_size` reads (a
/// [`Sharder`](crate::Sharder) above passes them all on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RankPlan {
    #[serde(flatten)]
    pub(crate) plan: Plan,
    pub(crate) world_size: u64,
}

impl RankPlan {
    /// The epoch a `reset(None)` of a `Files` with `plan` moves to from
    /// `epoch`.
    pub(crate) fn next_epoch(plan: Option<&RankPlan>, epoch: u64, started: bool) -> u64 {
        match plan {
            Some(p) => p.plan.next_epoch(epoch, started),
            None => crate::seed::epoch_after(epoch, started),
        }
    }

    /// How many positions it reads of an order of `len`.
    fn len(&self, len: u64) -> u64 {
        self.plan.len(len, self.world_size)
    }
}

/// What a state records of the list: its length and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListSummary {
    count: u64,
    digest: String,
}

impl fmt::Debug for Files {
    debug_fields!("Files", finish_non_exhaustive;
        base, count = (names.len()), seed, epoch, num_yielded);
}

impl Files {
    /// The regular files directly in `dir` (not in its subdirectories; use
    /// [`Files::glob`] with `dir/**` for those), symlinks to files included,
    /// names starting with `.` left out, sorted by name.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `dir` cannot be listed or has no file.
    ///
    /// A URL (`s3://bucket/dir/`; see [`Store`](crate::Store)) lists the
    /// objects directly under that prefix, with [`Store::from_env`](crate::Store::from_env).
    pub fn in_dir(dir: impl AsRef<Path>) -> Result<Files> {
        let dir = dir.as_ref();
        match dir.to_str().filter(|d| is_remote(Path::new(d))) {
            Some(url) => Files::from_listing(remote_listing(url, true)),
            None => Files::from_listing(glob::in_dir(dir)),
        }
    }

    /// The files `pattern` matches, sorted by their path below the pattern's
    /// directory part. Segments are separated by `/`; in a segment `*`
    /// matches any run of characters and `?` one character; a segment `**`
    /// matches any number of directories (`data/**/*.jsonl`; `data/**` is
    /// every file below `data`). Names starting with `.` match only a
    /// segment starting with `.`; symlinked directories are not entered
    /// under `**`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the pattern uses other syntax (`[...]`,
    /// `{...}`), a directory cannot be listed, or nothing matches.
    ///
    /// A URL pattern (`s3://bucket/shards/**/*.jsonl.zst`; see
    /// [`Store`](crate::Store)) lists the objects under its base and keeps
    /// those it matches, with [`Store::from_env`](crate::Store::from_env).
    pub fn glob(pattern: &str) -> Result<Files> {
        if is_remote(Path::new(pattern)) {
            return Files::from_listing(remote_listing(pattern, false));
        }
        Files::from_listing(glob::glob(pattern))
    }

    /// The objects a URL names through `store`: those a pattern with
    /// wildcards matches, as [`Files::glob`], or those directly under a
    /// prefix, as [`Files::in_dir`] (`s3://bucket/dir/`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `url` is not an object store URL (an
    /// `http(s)://` URL names one object: list those with
    /// [`Files::list`]), the store cannot be reached, or nothing matches.
    #[cfg(feature = "object-store")]
    pub fn remote(store: &crate::Store, url: &str) -> Result<Files> {
        let in_dir = !url.contains(['*', '?']);
        Files::from_listing(crate::sources::remote::list(store, url, in_dir))
    }

    /// The files of `paths`, in the order given (duplicates are kept: a file
    /// listed twice is read twice). Nothing is checked on disk here: a
    /// missing file is an error where a reader opens it (their sizes are
    /// taken, for [`Epoch::progress`](crate::Epoch::progress), where known). The base of the
    /// listing is the paths' common parent: the state names files relative
    /// to it, so the list of the same files moved elsewhere resumes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the list is empty or a path is not
    /// UTF-8 (the state stores paths as text).
    pub fn list<P: Into<PathBuf>>(paths: impl IntoIterator<Item = P>) -> Result<Files> {
        Files::from_listing(glob::list(paths.into_iter().map(Into::into)))
    }

    fn from_listing(listing: std::result::Result<glob::Listing, String>) -> Result<Files> {
        let glob::Listing { base, names, sizes } =
            listing.map_err(|m| Error::invalid_argument(Self::NAME, m))?;
        let tally = ListTally {
            sizes: sizes.map(Into::into),
            len: names.len() as u64,
            place: Mutex::default(),
        };
        let summary = ListSummary {
            count: names.len() as u64,
            digest: digest(&names),
        };
        Ok(Files {
            base,
            names: names.into(),
            files: summary.clone(),
            summary,
            seed: None,
            epoch: 0,
            num_yielded: 0,
            started: false,
            path: None,
            near: Vec::new(),
            plan: None,
            order: Lazy::new(),
            tally: Arc::new(tally),
        })
    }

    /// Yields the files in a random order seeded by `seed`, a new one each
    /// epoch (the order of epoch `e` depends only on `seed`, `e` and the
    /// number of files; it is computed per position, in O(1) memory, with
    /// the permutation of [`RandomSampler`](crate::RandomSampler)).
    pub fn shuffle_files(mut self, seed: u64) -> Files {
        self.seed = Some(seed);
        self
    }

    /// The number of files.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there is no file (never true: the constructors refuse an
    /// empty list).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The paths, in list order (before any shuffle).
    pub fn paths(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.names.iter().map(|n| self.base.join(n))
    }

    /// The names, relative to the listing's base, in list order.
    #[cfg(feature = "parquet")]
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The row groups of these Parquet files, read from their footers now,
    /// as a list of [`RowGroup`](crate::RowGroup) units to shuffle, shard
    /// and read like files (see [`ParquetRowGroups`](crate::ParquetRowGroups)):
    /// ranks may outnumber files. A `shuffle_files` seed carries over to
    /// the units. URLs are read with [`Store::from_env`](crate::Store::from_env).
    /// With the `parquet` feature.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a file whose footer cannot be read
    /// (missing, not Parquet). Files without rows have no row group, and
    /// add no unit.
    #[cfg(feature = "parquet")]
    pub fn parquet_row_groups(self) -> Result<crate::ParquetRowGroups> {
        crate::ParquetRowGroups::new(&self, &Default::default())
    }

    /// As [`parquet_row_groups`](Files::parquet_row_groups), reading URLs
    /// through `store`.
    #[cfg(all(feature = "parquet", feature = "object-store"))]
    pub fn parquet_row_groups_in(self, store: &crate::Store) -> Result<crate::ParquetRowGroups> {
        let opener = crate::sources::open::Opener {
            store: store.clone(),
        };
        crate::ParquetRowGroups::new(&self, &opener)
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The epoch a `reset(None)` moves to (used by the derived reset).
    fn next_epoch(&self) -> u64 {
        RankPlan::next_epoch(self.plan.as_ref(), self.epoch, self.started)
    }

    /// The plan of the run a `reset(None)` starts: the next one a pending
    /// item's plan lists (see [`Plan`]), else none.
    fn restarted_plan(&self) -> Option<RankPlan> {
        let p = self.plan.as_ref()?;
        let plan = p.plan.restarted(self.names.len() as u64)?;
        let world_size = p.world_size;
        Some(RankPlan { plan, world_size })
    }

    /// How many files this rank reads this epoch.
    fn planned_len(&self) -> u64 {
        let len = self.names.len() as u64;
        self.plan.as_ref().map_or(len, |p| p.len(len))
    }

    /// The position in the epoch's order of the file this rank reads at
    /// step `i`.
    fn position(&self, i: u64) -> u64 {
        self.plan
            .as_ref()
            .map_or(i, |p| p.plan.position(i, p.world_size))
    }

    /// The list index at position `pos` of `epoch`'s order.
    fn index_at(order: Option<&Permutation>, pos: u64) -> usize {
        order.map_or(pos, |p| p.get(pos)) as usize
    }

    fn permutation(&self, epoch: u64) -> Option<Permutation> {
        self.seed
            .map(|seed| Permutation::new(self.names.len() as u64, seed, epoch))
    }

    /// Why a saved list differs from this one, for the error at `files`:
    /// the counts, and what changed around the last file yielded (`path` and
    /// its saved neighbours `near`).
    fn list_mismatch(&self, saved: &ListSummary, path: Option<&str>, near: &[String]) -> String {
        let now = &self.summary;
        let mut message = format!(
            "the files changed since the state was saved: it was taken over {} files ({}), the pipeline has {} ({})",
            saved.count, saved.digest, now.count, now.digest
        );
        if let Some(path) = path {
            let position = |name: &str| self.names.iter().position(|n| n == name);
            let shown = |name: &str| format!("`{}`", self.base.join(name).display());
            let now = position(path).map_or_else(
                || "is no longer listed".to_owned(),
                |i| format!("is now file {} of the list", i + 1),
            );
            message += &format!("; the last file it yielded, {}, {now}", shown(path));
            // Around it: saved names now missing, and names now listed
            // between the saved ones that were not there.
            let around: Vec<&str> = near.iter().map(String::as_str).chain([path]).collect();
            let removed: Vec<String> = around
                .iter()
                .filter(|n| position(n).is_none())
                .map(|n| shown(n))
                .collect();
            let found = around.iter().filter_map(|n| position(n));
            let span = found.clone().min().zip(found.max());
            let added: Vec<String> = span
                .map_or(&[][..], |(lo, hi)| &self.names[lo..=hi])
                .iter()
                .filter(|n| !around.contains(&n.as_str()))
                .take(5)
                .map(|n| shown(n))
                .collect();
            for (what, names) in [("removed", &removed), ("added", &added)] {
                if !names.is_empty() {
                    message += &format!("; {what} near it: {}", names.join(", "));
                }
            }
            if removed.is_empty() && added.is_empty() {
                message +=
                    "; the files around it are unchanged: the change is elsewhere in the list";
            }
        }
        message.push_str(
            ": resuming would shift or repeat data; restore into a pipeline over the same files, or start a new run",
        );
        message
    }
}

/// The objects a URL (pattern) names, with the environment's store.
#[cfg(feature = "object-store")]
fn remote_listing(url: &str, in_dir: bool) -> std::result::Result<glob::Listing, String> {
    crate::sources::remote::list(&crate::Store::from_env(), url, in_dir)
}

#[cfg(not(feature = "object-store"))]
fn remote_listing(url: &str, _: bool) -> std::result::Result<glob::Listing, String> {
    Err(format!(
        "`{url}` is a URL, and object store support is not compiled in: enable the `object-store` feature of nodes-std"
    ))
}

/// FNV-1a (64 bits) over the names, each followed by a NUL byte.
fn digest(names: &[String]) -> String {
    let mut hash = nodes_core::Fnv1a64::default();
    for name in names {
        std::hash::Hasher::write(&mut hash, name.as_bytes());
        std::hash::Hasher::write(&mut hash, &[0]);
    }
    format!("fnv1a64:{:016x}", std::hash::Hasher::finish(&hash))
}

impl Node for Files {
    type Item = PathBuf;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<PathBuf>> {
        cx.observe(NodeId::of(self), Self::NAME, |_cx| {
            let index = self.advance()?;
            Ok(index.map(|i| self.base.join(&self.names[i])))
        })
    }
}

impl Files {
    /// Moves to the next file of the pass: its index in the list.
    pub(crate) fn advance(&mut self) -> Result<Option<usize>> {
        self.started = true;
        // `validate` checked that the positions fit in the list.
        if self.num_yielded >= self.planned_len() {
            return Ok(None);
        }
        let order = self.order.get()?.as_ref();
        let index = Self::index_at(order, self.position(self.num_yielded));
        self.near.clear();
        let before = index.checked_sub(1).map(|i| &self.names[i]);
        self.near
            .extend(before.into_iter().chain(self.names.get(index + 1)).cloned());
        self.num_yielded += 1;
        self.tally.moved(self);
        self.path = Some(self.names[index].clone());
        Ok(Some(index))
    }

    /// A list of other entries under the same base and seed: `names`,
    /// with `sizes`, and a digest that also covers `salt` (what else the
    /// entries depend on, one string each), so a state taken over
    /// entries whose salt changed is refused like one over another list.
    #[cfg(feature = "parquet")]
    pub(crate) fn relisted(
        &self,
        names: Vec<String>,
        sizes: Option<Vec<u64>>,
        salt: &[String],
    ) -> Result<Files> {
        let base = self.base.clone();
        let mut files = Files::from_listing(Ok(glob::Listing { base, names, sizes }))?;
        let digest = digest(&[&files.names[..], salt].concat());
        files.summary.digest = digest.clone();
        files.files.digest = digest;
        files.seed = self.seed;
        Ok(files)
    }
}

/// Checks the saved list, position and path against this list, before
/// anything is applied.
impl Validate for Files {
    fn validate(&self, state: &State) -> Result<()> {
        let saved: ListSummary = state.get("files")?;
        let path: Option<String> = state.get("path")?;
        if saved != self.summary {
            let near: Vec<String> = state.get("near")?;
            let why = self.list_mismatch(&saved, path.as_deref(), &near);
            return Err(Error::bad_state(state.path_of("files"), why));
        }
        let num_yielded: u64 = state.get("num_yielded")?;
        let count = self.names.len() as u64;
        let plan: Option<RankPlan> = state.get("plan")?;
        if let Some(p) = &plan
            && (p.world_size == 0 || p.plan.outside(count).is_some())
        {
            let why = format!(
                "Files: a plan of positions outside the list of {count} files, or of 0 ranks"
            );
            return Err(Error::bad_state(state.path_of("plan"), why));
        }
        let epoch: u64 = state.get("epoch")?;
        if let Some(p) = &plan {
            p.plan.check_next_epoch(epoch, || state.path_of("plan"))?;
        }
        let len = plan.as_ref().map_or(count, |p| p.len(count));
        if num_yielded > len {
            let why = format!("Files cannot resume after {num_yielded} files: it reads {len}");
            return Err(Error::bad_state(state.path_of("num_yielded"), why));
        }
        let position = |i| {
            plan.as_ref()
                .map_or(i, |p| p.plan.position(i, p.world_size))
        };
        let expected = match num_yielded {
            0 => None,
            n => {
                let order = self.permutation(epoch);
                Some(&*self.names[Self::index_at(order.as_ref(), position(n - 1))])
            }
        };
        if path.as_deref() != expected {
            let why = format!(
                "Files: the state's last file is {path:?}, but file {num_yielded} of epoch {epoch} is {expected:?}"
            );
            return Err(Error::bad_state(state.path_of("path"), why));
        }
        Ok(())
    }
}

/// Computes the epoch's order.
impl Init for Files {
    fn init(&mut self, _restored: bool) -> Result<()> {
        let order = self.permutation(self.epoch);
        self.order.set(order);
        self.tally.moved(self);
        Ok(())
    }
}

/// `Files`' count of its pass, for [`Epoch::progress`](crate::Epoch::progress):
/// the list's sizes, and where the pass is, which `Files` updates at every
/// reset and file.
struct ListTally {
    sizes: Option<Arc<[u64]>>,
    len: u64,
    place: Mutex<Place>,
}

/// Not every size: a description's `Debug` shows its tallies.
impl fmt::Debug for ListTally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListTally")
            .field("len", &self.len)
            .field("sized", &self.sizes.is_some())
            .field("place", &self.place)
            .finish()
    }
}

#[derive(Debug, Default, Clone)]
struct Place {
    seed: Option<u64>,
    epoch: u64,
    num_yielded: u64,
    plan: Option<RankPlan>,
}

impl ListTally {
    fn moved(&self, files: &Files) {
        let place = Place {
            seed: files.seed,
            epoch: files.epoch,
            num_yielded: files.num_yielded,
            plan: files.plan.clone(),
        };
        *self.place.lock().unwrap_or_else(PoisonError::into_inner) = place;
    }
}

/// Counts the files of this rank: those of a reshard's plan, else every
/// `world_size`-th from `rank` under a shard, else all; O(their number).
impl Tally for ListTally {
    fn count(&self, shard: Option<(u64, u64)>) -> Count {
        let place = self
            .place
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let (rank, world_size) = shard.unwrap_or((0, 1));
        // With a plan, `Files` yields only this rank's positions.
        let (own, plan) = match place.plan {
            Some(plan) => (true, plan),
            None => (
                false,
                RankPlan {
                    plan: Plan::fresh(rank),
                    world_size,
                },
            ),
        };
        let order = place
            .seed
            .map(|seed| Permutation::new(self.len, seed, place.epoch));
        let files = plan.len(self.len);
        let mut listed = Listed {
            pulled: 0,
            files,
            bytes: self.sizes.as_ref().map(|_| (0, 0)),
        };
        for i in 0..files {
            let position = plan.plan.position(i, plan.world_size);
            let pulled = place.num_yielded > if own { i } else { position };
            listed.pulled += u64::from(pulled);
            if let (Some(sizes), Some((done, total))) = (&self.sizes, &mut listed.bytes) {
                let size = sizes[Files::index_at(order.as_ref(), position)];
                *total += size;
                *done += if pulled { size } else { 0 };
            }
        }
        Count {
            listed: Some(listed),
            ..Count::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeExt;

    #[test]
    fn digest_depends_on_names_and_order() {
        let a = digest(&["a".to_owned(), "b".to_owned()]);
        assert_eq!(a, digest(&["a".to_owned(), "b".to_owned()]));
        assert_ne!(a, digest(&["b".to_owned(), "a".to_owned()]));
        assert_ne!(a, digest(&["ab".to_owned()]));
        assert!(a.starts_with("fnv1a64:"));
    }

    #[test]
    fn list_keeps_its_order_and_rejects_empty() -> Result<()> {
        let files = Files::list(["z", "a"])?;
        let got: Vec<PathBuf> = files.start()?.collect::<Result<_>>()?;
        assert_eq!(got, [PathBuf::from("z"), PathBuf::from("a")]);
        assert!(Files::list(Vec::<PathBuf>::new()).is_err());
        Ok(())
    }

    #[test]
    fn shuffled_epochs_differ_and_cover_the_list() -> Result<()> {
        let names: Vec<String> = (0..20).map(|i| format!("f{i:02}")).collect();
        let mut loader = crate::Loader::new(Files::list(names.clone())?.shuffle_files(3));
        let e0: Vec<PathBuf> = loader.epoch().collect::<Result<_>>()?;
        let e1: Vec<PathBuf> = loader.epoch().collect::<Result<_>>()?;
        assert_ne!(e0, e1);
        for epoch in [e0, e1] {
            let mut sorted: Vec<String> = epoch.iter().map(|p| p.display().to_string()).collect();
            sorted.sort();
            assert_eq!(sorted, names);
        }
        Ok(())
    }

    #[test]
    fn save_load_at_every_cut() {
        for mid in 0..=5 {
            crate::testing::assert_save_load(|| Files::list(["a", "b", "c", "d"]).unwrap(), mid);
            crate::testing::assert_save_load(
                || Files::list(["a", "b", "c", "d"]).unwrap().shuffle_files(9),
                mid,
            );
        }
    }

    #[test]
    fn a_changed_list_is_refused_with_the_file_named() -> Result<()> {
        let mut running = Files::list(["a", "b", "c"])?.start()?;
        running.next().transpose()?;
        running.next().transpose()?;
        let state = running.get_state()?;
        let err = Files::list(["a", "a2", "b", "c"])?
            .start_from(&state)
            .unwrap_err();
        let message = err.to_string();
        assert!(err.is_bad_state(), "{message}");
        assert!(message.contains("/files"), "{message}");
        assert!(message.contains("taken over 3 files"), "{message}");
        assert!(message.contains("`b`, is now file 3"), "{message}");
        let err = Files::list(["a", "c"])?.start_from(&state).unwrap_err();
        assert!(
            err.to_string().contains("`b`, is no longer listed"),
            "{err}"
        );
        // The same list restores.
        let rest: Vec<PathBuf> = Files::list(["a", "b", "c"])?
            .start_from(&state)?
            .collect::<Result<_>>()?;
        assert_eq!(rest, [PathBuf::from("c")]);
        Ok(())
    }

    #[test]
    fn a_path_that_does_not_fit_the_position_is_refused() -> Result<()> {
        let mut running = Files::list(["a", "b"])?.start()?;
        running.next().transpose()?;
        let state = running.get_state()?.with("path", "b")?;
        let err = Files::list(["a", "b"])?.start_from(&state).unwrap_err();
        assert_eq!(err.state_path(), Some("/path"), "{err}");
        Ok(())
    }
}
