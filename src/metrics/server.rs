//! A minimal HTTP/1.1 responder for Prometheus and Kubernetes probes: `GET /metrics` (and
//! `HEAD`) answers the registry in the text format, `/healthz` 200 while the process
//! serves, `/readyz` 200 once it is ready (503 before); anything else gets 404 or 405. One request per connection
//! (`Connection: close`), request heads capped at 8 KiB and 10 s, so a slow or hostile
//! client cannot hold the loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::{CONTENT_TYPE, Metrics};

const MAX_HEAD: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Bind the listener (port 0 picks a free port; see `local_addr`).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serve until `stop` turns true.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let m = metrics.clone();
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(READ_TIMEOUT, handle(stream, &m)).await;
                    });
                }
            }
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
        }
    }
}

async fn handle(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"request head too large\n",
                true,
            )
            .await;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut parts = text.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = metrics.render();
            respond(&mut stream, "200 OK", CONTENT_TYPE, body.as_bytes(), method == "GET").await
        }
        ("GET" | "HEAD", "/healthz") => respond(&mut stream, "200 OK", "text/plain", b"ok\n", method == "GET").await,
        ("GET" | "HEAD", "/readyz") if metrics.ready() => {
            respond(&mut stream, "200 OK", "text/plain", b"ready\n", method == "GET").await
        }
        ("GET" | "HEAD", "/readyz") => {
            respond(&mut stream, "503 Service Unavailable", "text/plain", b"not ready\n", method == "GET").await
        }
        ("GET" | "HEAD", _) => {
            respond(&mut stream, "404 Not Found", "text/plain", b"metrics are at /metrics\n", method == "GET").await
        }
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", b"use GET /metrics\n", true).await,
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
    with_body: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if status.starts_with("405") {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if with_body {
        bytes.extend_from_slice(body);
    }
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}
