//! The file listings behind [`Files`](crate::Files): a directory's files,
//! a list, and a small glob matcher (`*`, `?` and `**` segments).
//!
//! Written here rather than taken from the `glob` crate: three wildcards are
//! all a data directory needs, the walk must return names relative to a base
//! (what the state's digest is taken over) in byte order, and it must skip
//! symlinked directories under `**` (no cycles).

use std::path::{Path, PathBuf};
use std::{fs, io};

/// The files of a directory, a glob pattern or a list: the base directory
/// (the pattern's leading segments without wildcards) and the names relative
/// to it (`/`-separated; sorted by bytes, but for a list), never none,
/// and their sizes if every one is known (for progress).
#[derive(Debug)]
pub(crate) struct Listing {
    pub(crate) base: PathBuf,
    pub(crate) names: Vec<String>,
    pub(crate) sizes: Option<Vec<u64>>,
}

/// One segment of a pattern after its base.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: any number of directories (zero included).
    AnyDirs,
    /// A name pattern with `*` (any run of characters) and `?` (one).
    Name(Vec<char>),
}

/// Splits `pattern` into its base directory and its wildcard segments.
fn parse(pattern: &str) -> Result<(PathBuf, Vec<Segment>), String> {
    if pattern.is_empty() {
        return Err("the pattern is empty".to_owned());
    }
    if pattern.contains(['[', '{']) {
        return Err(format!(
            "`{pattern}` uses `[...]` or `{{...}}`: only `*`, `?` and `**` are supported"
        ));
    }
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    // The segments before the first wildcard; a pattern without wildcards
    // names one file, whose parent is the base.
    let split = parts
        .iter()
        .position(|p| p.contains(['*', '?']))
        .unwrap_or(parts.len().saturating_sub(1));
    let mut base = PathBuf::from(if pattern.starts_with('/') { "/" } else { "" });
    base.extend(&parts[..split]);
    if base.as_os_str().is_empty() {
        base.push(".");
    }
    let mut segments = Vec::new();
    for part in &parts[split..] {
        if *part == "**" {
            if segments.last() != Some(&Segment::AnyDirs) {
                segments.push(Segment::AnyDirs);
            }
        } else if part.contains("**") {
            return Err(format!(
                "`{pattern}`: `**` must be a whole segment (`a/**/b`), not part of a name"
            ));
        } else {
            segments.push(Segment::Name(part.chars().collect()));
        }
    }
    match segments.last() {
        None => return Err(format!("`{pattern}` has no file name part")),
        // `dir/**`: every file below `dir`.
        Some(Segment::AnyDirs) => segments.push(Segment::Name(vec!['*'])),
        Some(Segment::Name(_)) => {}
    }
    Ok((base, segments))
}

/// Whether `name` matches the segment pattern `pat` (`*` and `?`).
fn matches(pat: &[char], name: &str) -> bool {
    let name: Vec<char> = name.chars().collect();
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pat.len() && (pat[p] == '?' || pat[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pat.len() && pat[p] == '*' {
            star = Some((p, n));
            p += 1;
        } else if let Some((sp, sn)) = star {
            p = sp + 1;
            n = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == '*')
}

/// Hidden names (starting with `.`) match only a pattern that starts with one.
fn visible_to(pat: &[char], name: &str) -> bool {
    !name.starts_with('.') || pat.first() == Some(&'.')
}

/// The files matching `pattern`.
pub(crate) fn glob(pattern: &str) -> Result<Listing, String> {
    let (base, segments) = parse(pattern)?;
    walk_from(base, &segments, format!("no file matches `{pattern}`"))
}

/// The visible regular files directly in `dir` (symlinks to files included):
/// the pattern `dir/*`.
pub(crate) fn in_dir(dir: &Path) -> Result<Listing, String> {
    let every_name = [Segment::Name(vec!['*'])];
    let empty = format!("the directory `{}` has no file", dir.display());
    walk_from(dir.to_path_buf(), &every_name, empty)
}

/// The paths of a list, in the order given, relative to their common
/// parent (so that the list of a moved dataset has the same names).
pub(crate) fn list(paths: impl Iterator<Item = PathBuf>) -> Result<Listing, String> {
    let paths: Vec<PathBuf> = paths.collect();
    let base = paths
        .iter()
        .map(|p| p.parent().map(Path::to_path_buf).unwrap_or_default())
        .reduce(|a, b| {
            a.ancestors()
                .find(|x| b.starts_with(x))
                .map_or_else(PathBuf::new, Path::to_path_buf)
        })
        .ok_or("the list of files is empty")?;
    // URLs in several buckets: no base shorter than `scheme://host`.
    let base = if super::open::is_remote(&paths[0]) && !super::open::is_remote(&base) {
        PathBuf::new()
    } else {
        base
    };
    let names = paths
        .iter()
        .map(|p| {
            let name = p.strip_prefix(&base).unwrap_or(p);
            name.to_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("the path {p:?} is not UTF-8: a state stores paths as text"))
        })
        .collect::<Result<Vec<String>, String>>()?;
    // Sizes for progress only: a file missing now is an error where it is
    // opened, not here.
    let sizes = paths
        .iter()
        .map(|p| {
            fs::metadata(p)
                .ok()
                .filter(fs::Metadata::is_file)
                .map(|m| m.len())
        })
        .collect();
    Ok(Listing { base, names, sizes })
}

/// A pattern over names already listed (an object store's keys).
#[cfg(any(test, feature = "object-store"))]
#[derive(Debug)]
pub(crate) struct Pattern(Vec<Segment>);

#[cfg(any(test, feature = "object-store"))]
impl Pattern {
    /// Splits `pattern` into its base (`/`-separated, empty for none) and
    /// the matcher of names relative to it.
    pub(crate) fn parse(pattern: &str) -> Result<(String, Pattern), String> {
        let (base, segments) = parse(pattern)?;
        let base = base.to_str().filter(|b| *b != ".").unwrap_or_default();
        Ok((base.to_owned(), Pattern(segments)))
    }

    /// Whether `name` (`/`-separated, relative to the base) matches.
    pub(crate) fn matches(&self, name: &str) -> bool {
        let parts: Vec<&str> = name.split('/').collect();
        matches_parts(&self.0, &parts)
    }
}

/// Whether the path `parts` match `segments`, with the rules of [`walk`].
#[cfg(any(test, feature = "object-store"))]
fn matches_parts(segments: &[Segment], parts: &[&str]) -> bool {
    match segments.split_first() {
        None => parts.is_empty(),
        Some((Segment::AnyDirs, rest)) => (0..parts.len()).any(|i| {
            parts[..i].iter().all(|p| !p.starts_with('.')) && matches_parts(rest, &parts[i..])
        }),
        Some((Segment::Name(pat), rest)) => parts.split_first().is_some_and(|(part, parts)| {
            visible_to(pat, part) && matches(pat, part) && matches_parts(rest, parts)
        }),
    }
}

/// The files below `base` that match `segments`, sorted, or the error
/// `empty` when there is none.
fn walk_from(base: PathBuf, segments: &[Segment], empty: String) -> Result<Listing, String> {
    let mut files = Vec::new();
    walk(&base, "", segments, &mut files)
        .map_err(|e| format!("cannot list `{}`: {e}", base.display()))?;
    files.sort();
    files.dedup_by(|a, b| a.0 == b.0);
    if files.is_empty() {
        return Err(empty);
    }
    let (names, sizes) = files.into_iter().unzip();
    Ok(Listing {
        base,
        names,
        sizes: Some(sizes),
    })
}

/// Adds to `out` the files under `dir` (whose name relative to the base is
/// `rel`) that match `segments`, with their sizes.
fn walk(
    dir: &Path,
    rel: &str,
    segments: &[Segment],
    out: &mut Vec<(String, u64)>,
) -> io::Result<()> {
    let Some((first, rest)) = segments.split_first() else {
        return Ok(());
    };
    let join = |name: &str| {
        if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        }
    };
    match first {
        Segment::AnyDirs => {
            // Zero directories...
            walk(dir, rel, rest, out)?;
            // ...or one more, then `**` again. Symlinked directories are not
            // entered (a link to a parent would never end).
            for (name, path) in read_dir_sorted(dir)? {
                if name.starts_with('.') {
                    continue;
                }
                if fs::symlink_metadata(&path)?.is_dir() {
                    walk(&path, &join(&name), segments, out)?;
                }
            }
        }
        Segment::Name(pat) => {
            for (name, path) in read_dir_sorted(dir)? {
                if !visible_to(pat, &name) || !matches(pat, &name) {
                    continue;
                }
                // Follows symlinks to files (and to directories, one level).
                let Ok(meta) = fs::metadata(&path) else {
                    continue; // a dangling link
                };
                if rest.is_empty() {
                    if meta.is_file() {
                        out.push((join(&name), meta.len()));
                    }
                } else if meta.is_dir() {
                    walk(&path, &join(&name), rest, out)?;
                }
            }
        }
    }
    Ok(())
}

/// The entries of `dir` with UTF-8 names, as (name, path); others are
/// skipped (a state stores names as text).
fn read_dir_sorted(dir: &Path) -> io::Result<Vec<(String, PathBuf)>> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().into_string();
        entries.extend(name.ok().map(|name| (name, entry.path())));
    }
    entries.sort();
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn names_match_star_and_question_mark() {
        assert!(matches(&pat("*.jsonl"), "a.jsonl"));
        assert!(matches(&pat("*.jsonl"), ".jsonl"));
        assert!(!matches(&pat("*.jsonl"), "a.json"));
        assert!(matches(&pat("part-??.txt"), "part-07.txt"));
        assert!(!matches(&pat("part-??.txt"), "part-7.txt"));
        assert!(matches(&pat("a*b*c"), "aXbYbZc"));
        assert!(!matches(&pat("a*b*c"), "aXbYbZ"));
        assert!(matches(&pat("*"), ""));
        assert!(matches(&pat("exact"), "exact"));
    }

    #[test]
    fn listed_names_match_like_a_walk() {
        let (base, p) = Pattern::parse("data/**/*.jsonl").unwrap();
        assert_eq!(base, "data");
        assert!(p.matches("a.jsonl"));
        assert!(p.matches("x/y/a.jsonl"));
        assert!(!p.matches("x/.hidden/a.jsonl"));
        assert!(!p.matches("x/a.json"));
        let (base, p) = Pattern::parse("d/*").unwrap();
        assert_eq!(base, "d");
        assert!(p.matches("a"));
        assert!(!p.matches("sub/a"));
        assert!(!p.matches(".a"));
        let (base, p) = Pattern::parse("*.txt").unwrap();
        assert_eq!(base, "");
        assert!(p.matches("a.txt"));
    }

    #[test]
    fn a_list_is_relative_to_its_common_parent() {
        let paths = |p: &[&str]| p.iter().map(PathBuf::from).collect::<Vec<_>>().into_iter();
        let l = list(paths(&["/d/x/a.txt", "/d/y/b.txt", "/d/x/c"])).unwrap();
        assert_eq!(l.base, PathBuf::from("/d"));
        assert_eq!(l.names, ["x/a.txt", "y/b.txt", "x/c"]);
        let l = list(paths(&["/d/a.txt"])).unwrap();
        assert_eq!(
            (l.base, l.names),
            (PathBuf::from("/d"), vec!["a.txt".to_owned()])
        );
        let l = list(paths(&["a", "/b/c"])).unwrap();
        assert_eq!(
            (l.base, l.names),
            (PathBuf::new(), vec!["a".to_owned(), "/b/c".to_owned()])
        );
        assert!(list(paths(&[])).is_err());
        let l = list(paths(&["s3://b/x/a", "s3://b/y/c"])).unwrap();
        assert_eq!(
            (l.base, l.names),
            (
                PathBuf::from("s3://b"),
                vec!["x/a".to_owned(), "y/c".to_owned()]
            )
        );
        let l = list(paths(&["s3://b/a", "s3://c/a"])).unwrap();
        assert_eq!(l.base, PathBuf::new());
        assert_eq!(l.names, ["s3://b/a", "s3://c/a"]);
    }

    #[test]
    fn patterns_split_into_base_and_segments() {
        let (base, segs) = parse("data/train/*.jsonl").unwrap();
        assert_eq!(base, PathBuf::from("data/train"));
        assert_eq!(segs, [Segment::Name(pat("*.jsonl"))]);
        let (base, segs) = parse("/d/**/x?.gz").unwrap();
        assert_eq!(base, PathBuf::from("/d"));
        assert_eq!(segs, [Segment::AnyDirs, Segment::Name(pat("x?.gz"))]);
        let (base, segs) = parse("*.txt").unwrap();
        assert_eq!(base, PathBuf::from("."));
        assert_eq!(segs.len(), 1);
        let (base, segs) = parse("d/**").unwrap();
        assert_eq!(base, PathBuf::from("d"));
        assert_eq!(segs, [Segment::AnyDirs, Segment::Name(pat("*"))]);
        let (base, _) = parse("d/one.txt").unwrap();
        assert_eq!(base, PathBuf::from("d"));
        assert!(parse("").is_err());
        assert!(parse("d/a**b").is_err());
        assert!(parse("d/[ab].txt").is_err());
    }
}
