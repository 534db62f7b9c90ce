#![allow(dead_code)]

//! A scripted EC2 endpoint on 127.0.0.1 for the paths moto cannot produce (stock-outs in
//! CreateFleet's `Errors`, throttling, auth failures): a tiny HTTP/1.1 server that reads
//! each form-encoded EC2 Query request and answers with canned XML from a script.
//! [`FakeEc2::proxy`] forwards every request to a real server (moto) instead, so a test
//! or benchmark can count the API calls gpuplan makes as they cross the wire; it
//! forwards concurrent requests concurrently, and [`FakeEc2::proxy_holding`] can hold an
//! answer back until some other request has arrived (to show two calls overlap).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub action: String,
    pub params: BTreeMap<String, String>,
    pub at: Instant,
    /// When the answer was sent (`None` while it is pending).
    pub answered: Option<Instant>,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// An answer: HTTP status and XML body.
pub struct Reply {
    pub status: u16,
    pub body: String,
}

pub type Script = dyn Fn(&Request, &[Request]) -> Reply + Send + Sync;

/// Whether a proxied request may be answered yet, given every request seen so far.
pub type Ready = dyn Fn(&Request, &[Request]) -> bool + Send + Sync;

/// How requests are answered: by a script (one at a time, with the log held), or by the
/// upstream server (concurrently, each once `ready` holds or `max` has passed).
#[derive(Clone)]
enum Mode {
    Script(Arc<Script>),
    Proxy { host: String, ready: Arc<Ready>, max: std::time::Duration },
}

pub struct FakeEc2 {
    pub url: String,
    log: Arc<Mutex<Vec<Request>>>,
}

impl FakeEc2 {
    /// Start serving `script` (given each request and every earlier one) on a free port.
    /// The listener thread lives until the test process exits.
    pub fn start(script: impl Fn(&Request, &[Request]) -> Reply + Send + Sync + 'static) -> FakeEc2 {
        FakeEc2::serve_with(Mode::Script(Arc::new(script)))
    }

    fn serve_with(mode: Mode) -> FakeEc2 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log: Arc<Mutex<Vec<Request>>> = Arc::default();
        let l = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, mode) = (l.clone(), mode.clone());
                std::thread::spawn(move || serve(stream, &log, &mode));
            }
        });
        FakeEc2 { url, log }
    }

    /// Forward every request to `upstream` (`http://host:port`) and relay its answer,
    /// logging each one on arrival. Requests in flight together are forwarded together.
    pub fn proxy(upstream: &str) -> FakeEc2 {
        FakeEc2::proxy_holding(upstream, std::time::Duration::ZERO, |_, _| true)
    }

    /// [`FakeEc2::proxy`] that answers a request only once `ready(request, log so far)`
    /// holds, or `max` after it arrived: a test can hold one call's answer until another
    /// call has been made, which only code that makes both at once passes.
    pub fn proxy_holding(
        upstream: &str,
        max: std::time::Duration,
        ready: impl Fn(&Request, &[Request]) -> bool + Send + Sync + 'static,
    ) -> FakeEc2 {
        let host = upstream.trim_start_matches("http://").trim_end_matches('/').to_string();
        FakeEc2::serve_with(Mode::Proxy { host, ready: Arc::new(ready), max })
    }

    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }

    pub fn actions(&self, action: &str) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.action == action).collect()
    }
}

/// The round trips of a run, in turn: a call starts a new one when every earlier call
/// was answered before it was made (it could have waited on them all), else it joins the
/// current one (it was in flight with an earlier call). Each holds its actions, sorted.
pub fn round_trips(calls: &[Request]) -> Vec<Vec<String>> {
    let mut calls: Vec<&Request> = calls.iter().collect();
    calls.sort_by_key(|q| q.at);
    let mut trips: Vec<Vec<String>> = Vec::new();
    for (i, q) in calls.iter().enumerate() {
        let waited = calls[..i].iter().all(|p| p.answered.is_some_and(|a| a <= q.at));
        match trips.last_mut() {
            Some(trip) if !waited => trip.push(q.action.clone()),
            _ => trips.push(vec![q.action.clone()]),
        }
    }
    for trip in &mut trips {
        trip.sort();
    }
    trips
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Request>>, mode: &Mode) {
    // Each answer goes out in one write with Nagle off: head and body as two writes would
    // wait for the client's delayed ACK (40 ms on Linux) on some calls, a cost of the
    // fake, not of the client it measures.
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        let params = parse_form(&body);
        let action = params.get("Action").cloned().unwrap_or_default();
        let req = Request { action, params, at: Instant::now(), answered: None, headers, body };
        let reply = answer(req, log, mode);
        let reason = if reply.status < 300 { "OK" } else { "Error" };
        let head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: text/xml;charset=UTF-8\r\nContent-Length: {}\r\n\r\n",
            reply.status,
            reply.body.len()
        );
        let mut answer = head.into_bytes();
        answer.extend_from_slice(reply.body.as_bytes());
        if out.write_all(&answer).is_err() {
            return;
        }
    }
}

/// The reply to `req`, logged: a script answers with the log held (it sees every earlier
/// request); a proxy logs the request on arrival, waits until it may answer, and
/// forwards it without holding the log.
fn answer(mut req: Request, log: &Mutex<Vec<Request>>, mode: &Mode) -> Reply {
    match mode {
        Mode::Script(script) => {
            let mut log = log.lock().unwrap();
            let reply = script(&req, &log);
            req.answered = Some(Instant::now());
            log.push(req);
            reply
        }
        Mode::Proxy { host, ready, max } => {
            let index = {
                let mut log = log.lock().unwrap();
                log.push(req.clone());
                log.len() - 1
            };
            while req.at.elapsed() < *max && !ready(&req, &log.lock().unwrap()) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let reply = forward(host, &req);
            log.lock().unwrap()[index].answered = Some(Instant::now());
            reply
        }
    }
}

/// One request to the real server (a fresh connection each, closed after the answer).
pub fn forward(host: &str, req: &Request) -> Reply {
    let mut head = format!("POST / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in &req.headers {
        if !matches!(k.as_str(), "host" | "connection" | "content-length" | "transfer-encoding") {
            head += &format!("{k}: {v}\r\n");
        }
    }
    head += &format!("Content-Length: {}\r\n\r\n", req.body.len());
    let mut up = TcpStream::connect(host).expect("connect to the upstream EC2 server");
    let _ = up.set_nodelay(true);
    let mut request = head.into_bytes();
    request.extend_from_slice(req.body.as_bytes());
    up.write_all(&request).expect("forward the request");
    let mut raw = Vec::new();
    up.read_to_end(&mut raw).expect("read the upstream answer");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let mut body = raw[split + 4..].to_vec();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("a status code");
    if head.contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    Reply { status, body: String::from_utf8_lossy(&body).into_owned() }
}

fn dechunk(mut s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = s.windows(2).position(|w| w == b"\r\n") {
        let n = usize::from_str_radix(String::from_utf8_lossy(&s[..eol]).trim(), 16).unwrap_or(0);
        let rest = &s[eol + 2..];
        if n == 0 || rest.len() < n {
            break;
        }
        out.extend_from_slice(&rest[..n]);
        s = rest[n..].strip_prefix(b"\r\n").unwrap_or(&rest[n..]);
    }
    out
}

fn parse_form(s: &str) -> BTreeMap<String, String> {
    s.split('&')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((decode(k), decode(v)))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

const NS: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";

/// A successful answer to `action` with `inner` XML.
pub fn ok(action: &str, inner: &str) -> Reply {
    Reply {
        status: 200,
        body: format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{NS}\"><requestId>req-1</requestId>{inner}</{action}Response>"
        ),
    }
}

/// An EC2 error answer.
pub fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply {
        status,
        body: format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>req-err</RequestID></Response>"
        ),
    }
}

/// The answers a create path needs besides CreateFleet: an empty account with one GPU type.
pub fn baseline(req: &Request) -> Option<Reply> {
    Some(match req.action.as_str() {
        "DescribeInstances" => ok("DescribeInstances", "<reservationSet/>"),
        "DescribeInstanceTypes" => ok(
            "DescribeInstanceTypes",
            "<instanceTypeSet><item><instanceType>g5.xlarge</instanceType><gpuInfo><gpus><item><name>A10G</name>\
             <manufacturer>NVIDIA</manufacturer><count>1</count><memoryInfo><sizeInMiB>22888</sizeInMiB></memoryInfo>\
             </item></gpus><totalGpuMemoryInMiB>22888</totalGpuMemoryInMiB></gpuInfo></item></instanceTypeSet>",
        ),
        "DescribeLaunchTemplates" => ok("DescribeLaunchTemplates", "<launchTemplates/>"),
        // No default VPC: overrides name the zone.
        "DescribeSubnets" => ok("DescribeSubnets", "<subnetSet/>"),
        "CreateLaunchTemplate" => ok(
            "CreateLaunchTemplate",
            "<launchTemplate><launchTemplateId>lt-0fake</launchTemplateId><launchTemplateName>t</launchTemplateName>\
             <latestVersionNumber>1</latestVersionNumber><defaultVersionNumber>1</defaultVersionNumber></launchTemplate>",
        ),
        _ => return None,
    })
}

/// A CreateFleet answer with `ids` launched as `lifecycle` and `errors` (code, message).
pub fn fleet(ids: &[String], lifecycle: &str, errors: &[(&str, &str)]) -> Reply {
    fleet_in(ids, lifecycle, None, errors)
}

/// [`fleet`], with the override (zone) the instances were launched by, as EC2 names it.
pub fn fleet_in(ids: &[String], lifecycle: &str, zone: Option<&str>, errors: &[(&str, &str)]) -> Reply {
    let errs: String = errors
        .iter()
        .map(|(c, m)| {
            format!("<item><errorCode>{c}</errorCode><errorMessage>{m}</errorMessage><lifecycle>{lifecycle}</lifecycle></item>")
        })
        .collect();
    let inst = if ids.is_empty() {
        "<fleetInstanceSet/>".to_string()
    } else {
        let items: String = ids.iter().map(|i| format!("<item>{i}</item>")).collect();
        format!(
            "<fleetInstanceSet><item><instanceIds>{items}</instanceIds><instanceType>g5.xlarge</instanceType>\
             <lifecycle>{lifecycle}</lifecycle>{}</item></fleetInstanceSet>",
            zone.map(|z| format!(
                "<launchTemplateAndOverrides><overrides><instanceType>g5.xlarge</instanceType>\
                 <availabilityZone>{z}</availabilityZone></overrides></launchTemplateAndOverrides>"
            ))
            .unwrap_or_default()
        )
    };
    ok("CreateFleet", &format!("<fleetId>fleet-0fake</fleetId><errorSet>{errs}</errorSet>{inst}"))
}

/// A proxy to `upstream` (moto) that answers `GetConsoleOutput` itself with the text in
/// `console` while it holds one (`""`: no output posted yet, as EC2 answers before the
/// console arrives); moto's own console is a fixed sample without a job's exit line.
pub fn console_proxy(upstream: &str, console: Arc<Mutex<Option<String>>>) -> FakeEc2 {
    let host = upstream.trim_start_matches("http://").trim_end_matches('/').to_string();
    FakeEc2::start(move |req, _| {
        let held = console.lock().unwrap().clone();
        match held {
            Some(text) if req.action == "GetConsoleOutput" => {
                let id = req.params.get("InstanceId").cloned().unwrap_or_default();
                let output = if text.is_empty() {
                    String::new()
                } else {
                    use base64::Engine as _;
                    format!("<output>{}</output>", base64::engine::general_purpose::STANDARD.encode(text))
                };
                ok("GetConsoleOutput", &format!("<instanceId>{id}</instanceId>{output}"))
            }
            _ => forward(&host, req),
        }
    })
}
