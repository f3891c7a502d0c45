//! ReadFile: open once, then stream chunks from a spawned task through a bounded channel.
//!
//! Both the open and every chunk read run through the [`OpRunner`], so they are enforced under the
//! call's profile once profiles exist. A failed send means the client has gone: the task stops.

use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use outpost_proto::pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use super::error::FsError;
use super::runner::OpRunner;

/// Chunks buffered between the reading task and the gRPC stream.
const CHANNEL_CAPACITY: usize = 4;

/// A validated ReadFile request.
#[derive(Debug)]
pub(crate) struct ReadRequest {
    pub(crate) path: PathBuf,
    pub(crate) offset: u64,
    pub(crate) length: Option<u64>,
    pub(crate) profile: String,
    pub(crate) chunk_size: usize,
}

/// Opens `path` for reading at `offset`; a directory is refused up front.
pub(crate) fn open_at(path: &Path, offset: u64) -> Result<File, FsError> {
    let mut file = File::open(path).map_err(|e| FsError::io("open", path, e))?;
    let metadata = file.metadata().map_err(|e| FsError::io("stat", path, e))?;
    if metadata.is_dir() {
        let error = io::Error::from_raw_os_error(libc::EISDIR);
        return Err(FsError::io("open", path, error));
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| FsError::io("seek", path, e))?;
    Ok(file)
}

/// Reads up to `max` bytes, fewer only at the end of the file.
pub(crate) fn read_chunk(file: &mut File, path: &Path, max: usize) -> Result<Vec<u8>, FsError> {
    let mut data = Vec::with_capacity(max);
    // `take` bounds the read; `read_to_end` retries short reads and EINTR until EOF or `max`.
    let limit = u64::try_from(max).unwrap_or(u64::MAX);
    file.take(limit)
        .read_to_end(&mut data)
        .map_err(|e| FsError::io("read", path, e))?;
    Ok(data)
}

/// Opens the file through `runner` and returns a stream of its chunks.
///
/// Open errors are returned directly (so a missing file is a NOT_FOUND status, not a stream that
/// fails later); read errors end the stream with an error status.
pub(crate) async fn stream_file(
    runner: OpRunner,
    request: ReadRequest,
) -> Result<ReceiverStream<Result<pb::ReadFileChunk, Status>>, FsError> {
    let path = request.path.clone();
    let offset = request.offset;
    let file = runner
        .run(&request.profile, move || open_at(&path, offset))
        .await?;
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    tokio::spawn(send_chunks(runner, request, file, tx));
    Ok(ReceiverStream::new(rx))
}

async fn send_chunks(
    runner: OpRunner,
    request: ReadRequest,
    mut file: File,
    tx: mpsc::Sender<Result<pb::ReadFileChunk, Status>>,
) {
    let mut offset = request.offset;
    let mut remaining = request.length;
    loop {
        let max = match remaining {
            Some(left) => {
                usize::try_from(left).map_or(request.chunk_size, |l| l.min(request.chunk_size))
            }
            None => request.chunk_size,
        };
        if max == 0 {
            return;
        }
        let path = request.path.clone();
        let read = runner
            .run(&request.profile, move || {
                let data = read_chunk(&mut file, &path, max)?;
                Ok((file, data))
            })
            .await;
        let data = match read {
            Ok((returned, data)) => {
                file = returned;
                data
            }
            Err(error) => {
                // The client may already be gone; there is nobody else to tell.
                let _ = tx.send(Err(error.into())).await;
                return;
            }
        };
        let len = data.len() as u64;
        let at_end = data.len() < max;
        if len > 0
            && tx
                .send(Ok(pb::ReadFileChunk { offset, data }))
                .await
                .is_err()
        {
            tracing::debug!(path = %request.path.display(), "ReadFile client went away");
            return;
        }
        if at_end {
            return;
        }
        offset = offset.saturating_add(len);
        remaining = remaining.map(|left| left - len);
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt as _;
    use tonic::Code;

    use super::*;

    async fn read(
        path: &Path,
        offset: u64,
        length: Option<u64>,
        chunk_size: usize,
    ) -> Result<Vec<pb::ReadFileChunk>, Status> {
        let request = ReadRequest {
            path: path.to_owned(),
            offset,
            length,
            profile: String::new(),
            chunk_size,
        };
        let stream = stream_file(OpRunner::new(), request).await?;
        stream.collect::<Vec<_>>().await.into_iter().collect()
    }

    fn joined(chunks: &[pb::ReadFileChunk]) -> Vec<u8> {
        chunks.iter().flat_map(|c| c.data.clone()).collect()
    }

    #[tokio::test]
    async fn reads_ranges_in_bounded_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();

        let chunks = read(&path, 0, None, 4096).await.unwrap();
        assert_eq!(joined(&chunks), content);
        assert!(chunks.iter().all(|c| c.data.len() <= 4096));
        let offsets: Vec<u64> = chunks.iter().map(|c| c.offset).collect();
        assert_eq!(offsets, [0, 4096, 8192]);

        let chunks = read(&path, 100, Some(5000), 1000).await.unwrap();
        assert_eq!(joined(&chunks), &content[100..5100]);
        assert_eq!(chunks[0].offset, 100);

        assert!(read(&path, 20_000, None, 1000).await.unwrap().is_empty());
        assert!(read(&path, 0, Some(0), 1000).await.unwrap().is_empty());
        let tail = read(&path, 9_990, Some(100), 1000).await.unwrap();
        assert_eq!(joined(&tail), &content[9_990..]);
    }

    #[tokio::test]
    async fn open_errors_come_before_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read(&dir.path().join("nope"), 0, None, 10)
            .await
            .unwrap_err();
        assert_eq!(missing.code(), Code::NotFound);
        let directory = read(dir.path(), 0, None, 10).await.unwrap_err();
        assert_eq!(directory.code(), Code::FailedPrecondition);
    }

    #[tokio::test]
    async fn stops_when_the_client_goes_away() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let request = ReadRequest {
            path,
            offset: 0,
            length: None,
            profile: String::new(),
            chunk_size: 1024,
        };
        let mut stream = stream_file(OpRunner::new(), request).await.unwrap();
        assert!(stream.next().await.is_some());
        // The reading task sees the failed send and stops; dropping must neither block nor panic.
        drop(stream);
        tokio::task::yield_now().await;
    }
}
