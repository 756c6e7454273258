//! A response body fed line by line from a channel. Its error type is `Infallible`: the runtime would write its own
//! text into a stream that failed, so faults travel as protocol error lines instead.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::mpsc;

/// Each item sent is one frame, written to the client as soon as the runtime polls it.
pub enum LineBody {
    Once(Option<Bytes>),
    Channel(mpsc::Receiver<Bytes>),
}

impl LineBody {
    /// A body written by whoever holds the sender; it ends when the sender is dropped.
    pub fn channel() -> (mpsc::Sender<Bytes>, Self) {
        // One line in flight: a slow client slows the reading from the model instead of filling memory.
        let (tx, rx) = mpsc::channel(1);
        (tx, LineBody::Channel(rx))
    }
}

impl Body for LineBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            LineBody::Once(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            LineBody::Channel(rx) => rx
                .poll_recv(cx)
                .map(|line| line.map(|b| Ok(Frame::data(b)))),
        }
    }
}
