//! No one-line forwards in a provider's ports (issue 47, item 4): in an `impl …Port for …`
//! block of `src/providers/`, a method whose whole body is `self.other(its own
//! parameters).await` (with or without `?`) only hands the call to an inherent method;
//! the body belongs in the port method (or the port method does not exist).

use super::{Source, block_len, body_start};

/// `file: Port::method → self.other(...)` for every port method that only forwards.
pub fn forwards(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for s in sources.iter().filter(|s| s.rel.starts_with("providers/")) {
        for (port, block) in port_impls(&s.code) {
            for (name, params, body) in methods(block) {
                if let Some(callee) = forwarded(&body, &params) {
                    out.push(format!("{}: {port}::{name} → self.{callee}(…)", s.rel));
                }
            }
        }
    }
    out
}

/// `(port, block)` of every `impl … XPort for …` block.
fn port_impls(code: &str) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("impl") {
        let at = from + found;
        from = at + 4;
        let Some(open) = code[at..].find('{').map(|o| at + o) else { break };
        let head: Vec<&str> = code[at..open].split_whitespace().collect();
        let Some(for_at) = head.iter().position(|w| *w == "for") else { continue };
        let Some(port) = for_at.checked_sub(1).and_then(|i| head[i].rsplit("::").next()) else { continue };
        if port.ends_with("Port") {
            out.push((port.to_string(), &code[open..open + block_len(&code[open..])]));
            from = open;
        }
    }
    out
}

/// `(name, parameter names, body)` of every method with a body in an impl block.
fn methods(block: &str) -> Vec<(String, Vec<String>, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = block[from..].find("fn ") {
        let at = from + found + 3;
        from = at;
        let name: String = block[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let (Some(p_open), Some(b_open)) = (block[at..].find('('), body_start(&block[at..])) else { continue };
        let p_open = at + p_open;
        let p_close = p_open + paren_len(&block[p_open..]);
        let params = block[p_open + 1..p_close - 1]
            .split(',')
            .filter_map(|p| p.split_once(':').map(|(n, _)| n.trim().to_string()))
            .collect();
        let b_open = at + b_open;
        let body = &block[b_open + 1..b_open + block_len(&block[b_open..]) - 1];
        out.push((name, params, body.split_whitespace().collect()));
        from = b_open;
    }
    out
}

/// The length of the `( … )` that starts `s`, with its closing parenthesis.
fn paren_len(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// The callee when `body` (whitespace removed) is `self.callee(params).await`, `?` or not.
fn forwarded(body: &str, params: &[String]) -> Option<String> {
    let call = body.strip_prefix("self.")?;
    let call = call.strip_suffix(".await").or_else(|| call.strip_suffix(".await?"))?;
    let (callee, args) = call.split_once('(')?;
    let args = args.strip_suffix(')')?;
    let args: Vec<&str> = args.split(',').filter(|a| !a.is_empty()).map(|a| a.trim_start_matches('&')).collect();
    let own = args.len() == params.len() && args.iter().zip(params).all(|(a, p)| a == p);
    (own && callee.chars().all(|c| c.is_alphanumeric() || c == '_')).then(|| callee.to_string())
}

#[test]
fn a_forward_is_found_and_real_work_is_not() {
    let params = vec!["region".to_string(), "ids".to_string()];
    assert_eq!(forwarded("self.terminate(region,ids).await", &params).as_deref(), Some("terminate"));
    assert_eq!(forwarded("self.agent_states(region,&ids).await", &params).as_deref(), Some("agent_states"));
    assert_eq!(forwarded("self.cancel(region,id).await.map(|_|())", &params), None);
    assert_eq!(forwarded("letx=self.a(region,ids).await?;Ok(x)", &params), None);
    assert_eq!(forwarded("self.cloud.api_terminate(region,ids).await", &params), None);
    let code = "impl NodePort for P {\n async fn terminate_nodes(&self, region: &str, ids: &[String]) -> R {\n self.terminate(region, ids).await\n }\n}\n";
    let impls = port_impls(code);
    assert_eq!(impls.len(), 1);
    let found: Vec<_> = methods(impls[0].1).into_iter().filter_map(|(n, p, b)| Some((n, forwarded(&b, &p)?))).collect();
    assert_eq!(found, [("terminate_nodes".to_string(), "terminate".to_string())]);
}
