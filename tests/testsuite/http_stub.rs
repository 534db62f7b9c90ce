//! A one-request-per-connection HTTP/1.1 server on 127.0.0.1 for tests that need an
//! endpoint to answer in a scripted way (a webhook receiver, a store that refuses).

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

/// What the stub answers: status, content type, body.
pub type Reply = (u16, &'static str, String);

/// Serve `answer(n, body)` for the n-th request (from 0); keeps every (status, body).
/// Returns the base URL and the log.
pub fn serve(answer: impl Fn(usize, &str) -> Reply + Send + 'static) -> (String, Arc<Mutex<Vec<(u16, String)>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().expect("a numeric Content-Length");
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).expect("the whole body");
            let body = String::from_utf8_lossy(&body).into_owned();
            let mut all = seen.lock().expect("log");
            let (status, content_type, reply) = answer(all.len(), &body);
            all.push((status, body));
            drop(all);
            let head = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                reply.len()
            );
            // The client may have given up (a timeout test); nothing to report then.
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(reply.as_bytes()));
        }
    });
    (url, log)
}
