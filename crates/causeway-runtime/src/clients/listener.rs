//! A node's client listeners: a slot per connection (`[connections]
//! max_clients`, node-wide), the TLS handshake, then the connection.

use super::connection::{refuse, serve, ClientStream};
use super::host::ClientHost;
use causeway_protocol::{DcId, Protocol};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// Accepts the clients of DC `dc` until the task is aborted; over TLS
/// when `tls` is given.
pub async fn accept_loop<P: Protocol>(
    host: Arc<ClientHost<P>>,
    listener: TcpListener,
    dc: DcId,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let (stream, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors, typically: wait rather than spin.
            Err(e) => {
                tracing::warn!("accepting a client failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // A slot for the connection's life; without one it is told why and
        // closed (and past the refusals allowed at once, just closed).
        let slot = match host.slots.clone().try_acquire_owned() {
            Ok(slot) => Ok(slot),
            Err(_) => match host.refusing.clone().try_acquire_owned() {
                Ok(refusal) => Err(refusal),
                Err(_) => {
                    host.metrics.closed_by_limit("max_clients");
                    continue;
                }
            },
        };
        let host = host.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            // The TLS handshake and the hello, together, within one frame timeout.
            let deadline = Instant::now() + host.connections.frame_timeout;
            let received = Arc::new(AtomicU64::new(0));
            let stream = Counted { inner: stream, received: received.clone() };
            let stream: Box<dyn ClientStream> = match tls {
                None => Box::new(stream),
                Some(tls) => match tokio::time::timeout_at(deadline, tls.accept(stream)).await {
                    Ok(Ok(stream)) => Box::new(stream),
                    Ok(Err(e)) => {
                        tracing::debug!(%from, "a client's TLS handshake failed: {e}");
                        return;
                    }
                    Err(_) => {
                        host.metrics.closed_by_limit("frame_timeout");
                        tracing::debug!(%from, "a client's TLS handshake did not finish in time");
                        return;
                    }
                },
            };
            match slot {
                Ok(_slot) => serve(host, stream, from.ip(), dc, deadline, received).await,
                Err(_refusal) => refuse(host, stream, deadline).await,
            }
        });
    }
}

/// The socket, counting the bytes read from it.
struct Counted<S> {
    inner: S,
    received: Arc<AtomicU64>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            self.received.fetch_add(read as u64, Relaxed);
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
