//! Listing the objects under a prefix, or that a glob pattern matches, as
//! a [`Listing`] of names relative to a base URL.

use std::path::PathBuf;

use futures_util::{FutureExt, StreamExt};

use super::{Attempts, Store};
use crate::sources::glob::{Listing, Pattern};

/// The objects `pattern` matches (`s3://bucket/dir/**/*.jsonl`), or with
/// `in_dir` those directly under the prefix `pattern` names, sorted by
/// name.
pub(crate) fn list(store: &Store, pattern: &str, in_dir: bool) -> Result<Listing, String> {
    let (root, key) = split(pattern)?;
    if root.starts_with("http") {
        return Err(format!(
            "`{pattern}`: an http(s) URL names one object and cannot be listed: use `Files::list`"
        ));
    }
    let pattern_key = match key.trim_end_matches('/') {
        key if !in_dir => key.to_owned(),
        "" => "*".to_owned(),
        key => format!("{key}/*"),
    };
    let (base, matcher) = Pattern::parse(&pattern_key).map_err(|m| format!("`{pattern}`: {m}"))?;
    let base_url = format!("{root}/{base}");
    let connection = store.connection()?;
    let (client, prefix) = connection.resolve(&base_url)?;
    let under = match prefix.as_ref() {
        "" => String::new(),
        prefix => format!("{prefix}/"),
    };
    let mut attempts = Attempts::new(&store.retry);
    let mut objects = loop {
        let retry = &attempts.retry;
        let listing = connection.runtime.block_on(async {
            let mut pages = client.list(Some(&prefix));
            let mut objects = Vec::new();
            // The timeout is per page: a long listing is not one wait.
            while let Some(meta) = retry.within(pages.next().map(Option::transpose)).await? {
                let name = meta.location.as_ref().strip_prefix(under.as_str());
                if let Some(name) = name.filter(|name| matcher.matches(name)) {
                    objects.push((name.to_owned(), meta.size));
                }
            }
            Ok(objects)
        });
        match listing {
            Ok(objects) => break objects,
            Err(failure) => attempts
                .failed(&format!("listing `{base_url}`"), failure)
                .map_err(|e| e.to_string())?,
        }
    };
    objects.sort();
    objects.dedup_by(|a, b| a.0 == b.0);
    if objects.is_empty() {
        return Err(format!("no object matches `{pattern}`"));
    }
    let (names, sizes) = objects.into_iter().unzip();
    Ok(Listing {
        base: PathBuf::from(base_url.trim_end_matches('/')),
        names,
        sizes: Some(sizes),
    })
}

/// `scheme://authority` and the key after it.
fn split(url: &str) -> Result<(&str, &str), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("`{url}` is not a URL"))?;
    let authority = rest.find('/').unwrap_or(rest.len());
    let root = &url[..scheme.len() + 3 + authority];
    Ok((root, rest[authority..].trim_start_matches('/')))
}
