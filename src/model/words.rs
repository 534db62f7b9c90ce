//! Words that agree with their number in what people read: `1 node`, `2 nodes`, never
//! `node(s)`.

/// `one` when `n` is 1, else `many`.
pub fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// `n` and its noun: `1 node`, `3 nodes`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", plural(n, one, many))
}

/// `1 node`, `3 nodes`.
pub fn nodes(n: usize) -> String {
    count(n, "node", "nodes")
}

#[cfg(test)]
mod tests {
    #[test]
    fn agrees_with_its_number() {
        assert_eq!(super::nodes(0), "0 nodes");
        assert_eq!(super::nodes(1), "1 node");
        assert_eq!(super::count(2, "resource", "resources"), "2 resources");
    }
}
