//! What the file readers ([`ReadLines`](crate::ReadLines), `ReadParquet`
//! and their kin) share around their format: the source of paths, pulled
//! with its state taken before each file; the files another rank began;
//! the error policy over bad records; and the fields every such reader's
//! state has.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::policy::{Counts, ERRORS, ErrorBudget, ErrorPolicy, Verdict, is_bad_record};
use crate::sources::open::{IDENTITY, Opener, PATH, Pulling, ReadTally};
use crate::transforms::flat_map::replayable;
use crate::{Cx, Description, Error, Node, Replay, ResetFlag, Result, Resume, State};

/// The state key of the source's state.
const SOURCE: &str = "source";
/// The state key of the files to resume (see [`Resumed`](super::open::Resumed)).
const RESUME_AT: &str = "resume_at";
/// The state keys of the open file's items to pass over: how many next,
/// then which (by their count from the reader's position).
pub(crate) const SKIP: &str = "skip";
pub(crate) const AHEAD: &str = "ahead";

/// A file another rank began, as a reader's state lists it.
pub(crate) trait Passing {
    /// Its items to pass over: how many first, then which.
    fn passing(&self) -> (u64, &[u64]);
}

/// Why `ahead` (items to pass over after the first `skip`) is malformed.
pub(crate) fn bad_ahead(skip: u64, ahead: &[u64]) -> Option<String> {
    let first = ahead.first().filter(|&&a| a < skip);
    let unordered = ahead.windows(2).find(|w| w[0] >= w[1]);
    match (first, unordered) {
        (Some(a), _) => Some(format!(
            "item {a} is among the first {skip}, passed over already"
        )),
        (_, Some(w)) => Some(format!(
            "items {} and {} are not in ascending order",
            w[0], w[1]
        )),
        _ => None,
    }
}

/// A file reader's source of paths and what goes with it, whatever the
/// format; `R` says where a file another rank began resumes.
pub(crate) struct FileSource<S, R> {
    /// The node's name, for its state, description and errors.
    pub(crate) name: &'static str,
    pub(crate) source: S,
    /// Where files are opened (and remote ones read).
    pub(crate) opener: Opener,
    /// Files to open where another rank stopped, rather than at their start.
    pub(crate) resume_at: VecDeque<R>,
    /// Items of the open file still to pass over, because another rank
    /// delivered them: the next `skip` items, then those `ahead` names (by
    /// their count among the items made since the file was resumed, `read`;
    /// see [`Resumed::skip`](super::open::Resumed::skip)).
    pub(crate) skip: u64,
    pub(crate) ahead: VecDeque<u64>,
    pub(crate) read: u64,
    pub(crate) budget: ErrorBudget,
    /// Set with an error no policy may skip (see [`judge`](Self::judge)).
    pub(crate) unskippable: bool,
    pub(crate) flag: ResetFlag,
    /// What it has read this pass, for progress.
    pub(crate) tally: Arc<ReadTally>,
}

/// The fields of a file reader's state, read by [`FileSource::fields`]:
/// `at` is the position in the file (two keys), `I` the file's identity.
pub(crate) struct Saved<R, I, P> {
    pub(crate) source: State,
    pub(crate) path: Option<String>,
    pub(crate) at: P,
    pub(crate) identity: Option<I>,
    pub(crate) resume_at: VecDeque<R>,
    /// The items of the file to pass over: how many first, then which.
    pub(crate) passing: (u64, Vec<u64>),
}

impl<S, R> FileSource<S, R> {
    pub(crate) fn new(name: &'static str, source: S) -> Self {
        FileSource {
            name,
            source,
            opener: Opener::default(),
            resume_at: VecDeque::new(),
            skip: 0,
            ahead: VecDeque::new(),
            read: 0,
            budget: ErrorBudget::new(ErrorPolicy::Deliver),
            unskippable: false,
            flag: ResetFlag::default(),
            tally: Arc::default(),
        }
    }

    /// Passes over the next `skip` items of the file just resumed, and then
    /// those at `ahead` (ascending, each at least `skip`, counted from the
    /// same place).
    pub(crate) fn pass_over(&mut self, skip: u64, ahead: &[u64]) {
        (self.skip, self.read) = (skip, 0);
        self.ahead = ahead.iter().copied().collect();
    }

    /// Whether items of the open file remain to be passed over.
    #[inline]
    pub(crate) fn passing(&self) -> bool {
        self.skip > 0 || !self.ahead.is_empty()
    }

    /// Counts the item just made; whether it is one to pass over.
    #[inline]
    pub(crate) fn passes(&mut self) -> bool {
        if !self.passing() {
            return false;
        }
        let at = self.read;
        self.read += 1;
        if self.skip > 0 {
            self.skip -= 1;
            return true;
        }
        let passed = self.ahead.front() == Some(&at);
        if passed {
            self.ahead.pop_front();
        }
        passed
    }

    /// What `made` comes to under the error policy: `None` for a bad record
    /// skipped (the reader makes the next item), else what to return. An
    /// error made while `unskippable` is set is returned whatever the
    /// policy (lines already delivered may be wrong).
    pub(crate) fn judge<T>(
        &mut self,
        made: Result<Option<T>>,
        cx: &mut Cx,
    ) -> Option<Result<Option<T>>> {
        match made {
            Err(e) if std::mem::take(&mut self.unskippable) => Some(Err(e)),
            Err(e) if is_bad_record(&e) => match self.budget.judge(e, cx) {
                Verdict::Deliver(e) | Verdict::DeliverAndEnd(e) => Some(Err(e)),
                Verdict::Skip => None,
            },
            made => Some(made),
        }
    }
}

impl<S: Node, R> FileSource<S, R> {
    /// Asks the source for the next file: its item, the source's state from
    /// before it, and the tally's guard that says so until the file opens.
    pub(crate) fn pull(&mut self, cx: &mut Cx) -> Result<Option<(S::Item, State, Pulling)>> {
        let before = self.source.get_state(cx)?;
        let pulling = self.tally.pulling();
        Ok(self.source.next(cx)?.map(|item| (item, before, pulling)))
    }

    /// Refuses a source whose order varies: a restore pulls its file again.
    pub(crate) fn replayable(&self) -> Result<()> {
        replayable(&self.source, self.name, self.name)
    }

    /// Back to the start of a pass (the reader's file closed).
    pub(crate) fn restart(&mut self) -> Result<()> {
        self.source.reset(None)?;
        self.tally.restart();
        self.resume_at.clear();
        self.pass_over(0, &[]);
        self.budget.clear();
        self.flag.mark();
        Ok(())
    }

    /// `state`'s fields, their keys and types checked: `at` names the two
    /// keys of the position, between `path` and `identity`.
    pub(crate) fn fields<I, A, B>(
        &self,
        state: &State,
        at: [&str; 2],
    ) -> Result<Saved<R, I, (A, B)>>
    where
        R: DeserializeOwned + Passing,
        I: DeserializeOwned,
        A: DeserializeOwned,
        B: DeserializeOwned,
    {
        let keys = [SOURCE, PATH, at[0], at[1], IDENTITY, ERRORS];
        let optional = [RESUME_AT, SKIP, AHEAD]
            .into_iter()
            .filter(|k| state.contains(k));
        state.expect_keys(
            self.name,
            &keys.into_iter().chain(optional).collect::<Vec<_>>(),
        )?;
        let skip = state.get_opt(SKIP)?.unwrap_or(0);
        let ahead: Vec<u64> = state.get_opt(AHEAD)?.unwrap_or_default();
        let path: Option<String> = state.get(PATH)?;
        if let Some(why) = bad_ahead(skip, &ahead) {
            return Err(Error::bad_state(state.path_of(AHEAD), why));
        }
        if path.is_none() && (skip > 0 || !ahead.is_empty()) {
            let why = format!("{}: items to pass over without a file", self.name);
            return Err(Error::bad_state(state.path().to_owned(), why));
        }
        let resume_at: VecDeque<R> = state.get_opt(RESUME_AT)?.unwrap_or_default();
        for (i, file) in resume_at.iter().enumerate() {
            let (skip, ahead) = file.passing();
            if let Some(why) = bad_ahead(skip, ahead) {
                let at = format!("{}/{i}/{AHEAD}", state.path_of(RESUME_AT));
                return Err(Error::bad_state(at, why));
            }
        }
        Ok(Saved {
            source: state.child(SOURCE)?,
            path,
            at: (state.get(at[0])?, state.get(at[1])?),
            identity: state.get(IDENTITY)?,
            resume_at,
            passing: (skip, ahead),
        })
    }

    /// Restores the error `counts`, the files another rank began and the
    /// source (to `source`, returned to pull the file the state is in
    /// again); the reader's file is closed.
    pub(crate) fn restore(
        &mut self,
        counts: Counts,
        source: &State,
        resume_at: VecDeque<R>,
    ) -> Result<Replay<'_, S>> {
        self.budget.restore(counts);
        self.tally.restart();
        self.resume_at = resume_at;
        self.pass_over(0, &[]);
        Replay::reset(&mut self.source, Some(source))
    }

    /// The reader's state: the source's (from `before` the open file, else
    /// its current one), the open file's name, the format's `fields`, the
    /// error counts and the files to resume.
    pub(crate) fn save(
        &self,
        cx: &Cx,
        open: Option<(&State, &Path)>,
        fields: impl FnOnce(&mut State) -> Result<()>,
    ) -> Result<State>
    where
        R: Serialize,
    {
        self.flag.check(self.name)?;
        let mut out = file_state(self.name, &self.source, cx, open)?;
        fields(&mut out)?;
        self.budget.save(&mut out)?;
        if !self.resume_at.is_empty() {
            out.insert(RESUME_AT, &self.resume_at)?;
        }
        if self.skip > 0 {
            out.insert(SKIP, self.skip)?;
        }
        if !self.ahead.is_empty() {
            let ahead = self.ahead.iter().map(|at| at - self.read);
            out.insert(AHEAD, ahead.collect::<Vec<u64>>())?;
        }
        Ok(out)
    }

    /// The reader's description, with the format's `params`.
    pub(crate) fn describe(&self, params: impl FnOnce(Description) -> Description) -> Description {
        params(Description::new(self.name).with_resume(Resume::ReadsFiles))
            .child(SOURCE, self.source.describe())
            .with_tally(self.tally.clone())
    }

    pub(crate) fn shutdown(&mut self) {
        // The file stays open: a state taken now still needs its identity.
        self.source.shutdown();
    }
}

/// The start of the state of `node`, a reader of the files of `source`:
/// the source's state (from `before` the open file, else its current one)
/// and the open file's name.
pub(crate) fn file_state<S: Node>(
    node: &'static str,
    source: &S,
    cx: &Cx,
    open: Option<(&State, &Path)>,
) -> Result<State> {
    cx.check_live(node)?;
    let source = match open {
        Some((before, _)) => before.clone(),
        None => source.get_state(cx)?,
    };
    let mut out = State::new();
    out.insert_child(SOURCE, source);
    let name = open.and_then(|(_, path)| path.file_name());
    out.insert(PATH, name.and_then(OsStr::to_str))?;
    Ok(out)
}

/// The builder methods every file reader has, over its `inner.files`, and
/// its started guards.
macro_rules! file_reader_builders {
    ($ty:ident [$($gen:ident),*]) => {
        impl<S $(, $gen)*> $ty<S $(, $gen)*> {
            /// Sets what happens to a bad record (see the type's `# Errors`):
            /// [`ErrorPolicy::Deliver`](crate::ErrorPolicy::Deliver) (the
            /// default) hands it on; the others end the pass or skip it, as
            /// for [`TryMapper`](crate::TryMapper). Skips are counted in the
            /// state (`errors`).
            pub fn on_error(mut self, policy: crate::ErrorPolicy) -> Self {
                self.inner.files.budget = crate::policy::ErrorBudget::new(policy);
                self
            }

            /// Reads remote files (URLs) through `store` rather than
            /// [`Store::from_env`](crate::Store::from_env).
            #[cfg(feature = "object-store")]
            pub fn store(mut self, store: crate::Store) -> Self {
                self.inner.files.opener.store = store;
                self
            }
        }

        nodes_core::__started_guards!(impl[S $(, $gen)*] $ty<S $(, $gen)*>);
    };
}

pub(crate) use file_reader_builders;
