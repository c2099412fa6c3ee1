//! A connection's two halves, over plain TCP or TLS alike, so the link
//! code above does not care which.

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

pub(crate) type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Plain TCP: each half owns its side of the socket, no lock between them.
pub(crate) fn plain(stream: TcpStream) -> (Reader, Writer) {
    let (rd, wr) = stream.into_split();
    (Box::new(rd), Box::new(wr))
}

/// A TLS stream: one session, shared by the halves behind a lock.
pub(crate) fn split<S: AsyncRead + AsyncWrite + Send + 'static>(stream: S) -> (Reader, Writer) {
    let (rd, wr) = tokio::io::split(stream);
    (Box::new(rd), Box::new(wr))
}

/// Writes and flushes: TLS holds what is written until flushed.
pub(crate) async fn write(wr: &mut Writer, bytes: &[u8]) -> std::io::Result<()> {
    wr.write_all(bytes).await?;
    wr.flush().await
}
