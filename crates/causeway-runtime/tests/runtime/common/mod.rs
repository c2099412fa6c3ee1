//! A raw wire client that can say things the client library never would,
//! and a fake peer server ([`fake_peer`]).
#![allow(dead_code)]

pub mod fake_peer;

use bytes::Bytes;
use causeway_client::wire::{Request, RequestFrame, Response, ResponseFrame, WIRE_VERSION};
use futures_util::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

pub struct Raw {
    pub framed: Framed<TcpStream, LengthDelimitedCodec>,
    next: u64,
}

impl Raw {
    pub async fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).await.expect("connect");
        // Accept any frame a server may send (the default codec stops at 8 MiB).
        let codec = LengthDelimitedCodec::builder().max_frame_length(64 << 20).new_codec();
        Raw { framed: Framed::new(stream, codec), next: 1 }
    }

    /// Connects and says Hello; returns the Welcome's response.
    pub async fn hello(addr: SocketAddr) -> (Raw, Response) {
        let mut raw = Raw::connect(addr).await;
        let r = raw
            .call(Request::Hello { version: WIRE_VERSION, client: "raw".into(), credentials: None })
            .await
            .expect("welcome");
        (raw, r)
    }

    pub async fn send_bytes(&mut self, body: Vec<u8>) {
        self.framed.send(Bytes::from(body)).await.expect("send");
    }

    pub async fn send(&mut self, request: Request) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send_bytes(postcard::to_allocvec(&RequestFrame { id, request }).unwrap()).await;
        id
    }

    /// The next response, or `None` when the server closed the connection.
    pub async fn recv(&mut self) -> Option<ResponseFrame> {
        let frame = tokio::time::timeout(Duration::from_secs(10), self.framed.next()).await.expect("reply in time");
        match frame {
            Some(Ok(b)) => Some(postcard::from_bytes(&b).expect("a response frame")),
            _ => None,
        }
    }

    pub async fn call(&mut self, request: Request) -> Option<Response> {
        let id = self.send(request).await;
        let r = self.recv().await?;
        assert_eq!(r.id, id, "responses come in order");
        Some(r.response)
    }
}
