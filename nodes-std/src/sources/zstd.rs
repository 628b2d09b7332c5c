//! The decompressed bytes of a zstd file: every frame in turn, as gzip
//! reads every member, each frame's content checksum verified; and where
//! each frame starts (a [`FrameLog`]), so that a restore decompresses from
//! the start of the frame that holds its offset, not from the file's.

use std::fmt;
use std::io::{self, BufRead, Read};
use std::sync::Arc;

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

use super::open::{Counted, Frame, FrameLog};

/// A damaged zstd file: a frame that cannot be decoded or whose content
/// checksum does not match, or bytes after a frame that start no frame. Unlike a bad line, it is never
/// skipped by an error policy (see `lines.rs`).
#[derive(Debug)]
pub(crate) struct Damaged(pub(crate) String);

impl fmt::Display for Damaged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Damaged {}

/// Whether `error` says the file is damaged (see [`Damaged`]).
pub(crate) fn is_damaged(error: &io::Error) -> bool {
    error.get_ref().is_some_and(|e| e.is::<Damaged>())
}

fn damaged(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, Damaged(message))
}

/// Reads the frames of `source` one after the other; skippable frames
/// (pzstd writes them) are passed over.
pub(crate) struct Frames<R> {
    source: Counted<R>,
    decoder: FrameDecoder,
    /// Frames begun so far (for messages).
    frame: u64,
    /// Decompressed bytes before the next one returned.
    produced: u64,
    log: Arc<FrameLog>,
    done: bool,
}

impl<R: BufRead> Frames<R> {
    /// Reads the first frame's header: an error unless `source` starts
    /// with a zstd frame. `source` starts at `start` (a frame's start);
    /// the frames' starts go to `log`.
    pub(crate) fn new(source: R, start: Frame, log: Arc<FrameLog>) -> Result<Self, String> {
        let mut frames = Frames {
            source: Counted {
                inner: source,
                count: start.at,
            },
            decoder: FrameDecoder::new(),
            frame: 0,
            produced: start.offset,
            log,
            done: false,
        };
        frames
            .next_frame()
            .map_err(|e| format!("not a zstd file: {e}"))?;
        Ok(frames)
    }

    /// Starts the next frame, past any skippable ones; done at the end of
    /// the file.
    fn next_frame(&mut self) -> io::Result<()> {
        loop {
            if self.frame > 0 && self.source.fill_buf()?.is_empty() {
                self.done = true;
                return Ok(());
            }
            self.frame += 1;
            self.log.push(Frame {
                at: self.source.count,
                offset: self.produced,
            });
            match self.decoder.reset(&mut self.source) {
                Ok(()) => return Ok(()),
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let want = u64::from(length);
                    let skipped = io::copy(&mut (&mut self.source).take(want), &mut io::sink())?;
                    if skipped < want {
                        return Err(damaged(format!(
                            "skippable frame {} ends after {skipped} of its {want} bytes",
                            self.frame
                        )));
                    }
                }
                Err(e) if self.frame == 1 => return Err(io::Error::other(e.to_string())),
                Err(e) => {
                    return Err(damaged(format!(
                        "the bytes after frame {} start no zstd frame: {e}",
                        self.frame - 1
                    )));
                }
            }
        }
    }

    /// At the end of a frame whose content was all read: its checksum.
    fn check_frame(&self) -> io::Result<()> {
        let (Some(stored), Some(computed)) = (
            self.decoder.get_checksum_from_data(),
            self.decoder.get_calculated_checksum(),
        ) else {
            return Ok(());
        };
        if stored == computed {
            return Ok(());
        }
        Err(damaged(format!(
            "zstd frame {} fails its content checksum (stored {stored:08x}, computed {computed:08x}): lines of that frame may already have been delivered",
            self.frame
        )))
    }
}

impl<R: BufRead> Read for Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while !self.done && !buf.is_empty() {
            if self.decoder.can_collect() > 0 {
                let n = self.decoder.read(buf)?;
                self.produced += n as u64;
                return Ok(n);
            }
            if !self.decoder.is_finished() {
                self.decoder
                    .decode_blocks(
                        &mut self.source,
                        BlockDecodingStrategy::UptoBytes(buf.len()),
                    )
                    .map_err(|e| {
                        damaged(format!("zstd frame {} cannot be decoded: {e}", self.frame))
                    })?;
                continue;
            }
            self.check_frame()?;
            self.next_frame()?;
        }
        Ok(0)
    }
}
