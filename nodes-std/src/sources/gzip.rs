//! The decompressed bytes of a gzip file: every member in turn (as
//! `cat a.gz b.gz` and bgzip make), and where each starts (a
//! [`FrameLog`]), so that a restore decompresses from the start of the
//! member that holds its offset, not from the file's.

use std::io::{self, BufRead, Read};
use std::sync::Arc;

use flate2::bufread::GzDecoder;

use super::open::{Counted, Frame, FrameLog};

/// Reads the members of `source` one after the other.
pub(crate) struct Members<R: BufRead> {
    /// The member being read; `None` at the end of the file.
    decoder: Option<GzDecoder<Counted<R>>>,
    /// Decompressed bytes before the next one returned.
    produced: u64,
    log: Arc<FrameLog>,
}

impl<R: BufRead> Members<R> {
    /// `source` starts at `start` (a member's start); the members' starts
    /// go to `log`.
    pub(crate) fn new(source: R, start: Frame, log: Arc<FrameLog>) -> Self {
        log.push(start);
        let source = Counted {
            inner: source,
            count: start.at,
        };
        Members {
            decoder: Some(GzDecoder::new(source)),
            produced: start.offset,
            log,
        }
    }
}

impl<R: BufRead> Read for Members<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(decoder) = &mut self.decoder {
            let n = decoder.read(buf)?;
            if n > 0 || buf.is_empty() {
                self.produced += n as u64;
                return Ok(n);
            }
            // The member ended (its trailer checked): another may follow.
            let Some(decoder) = self.decoder.take() else {
                break;
            };
            let mut source = decoder.into_inner();
            if !source.fill_buf()?.is_empty() {
                self.log.push(Frame {
                    at: source.count,
                    offset: self.produced,
                });
                self.decoder = Some(GzDecoder::new(source));
            }
        }
        Ok(0)
    }
}
