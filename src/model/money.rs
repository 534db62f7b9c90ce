//! How money reads wherever a person reads it: `12,345.67`, two decimals and thousands
//! separators, in the text plan, the markdown comment, policy messages and alerts alike.
//!
//! Layer 0 so that `policy/` (which writes the messages) and `render/` (which draws the
//! views) share one formatter and cannot drift apart. Machine-read output (JSON, metrics)
//! keeps plain numbers; this is only for text.

/// `80945.9` as `80,945.90`; `-0.001` as `0.00` (no negative zero).
pub fn usd(x: f64) -> String {
    let text = format!("{:.2}", x.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, "00"));
    let mut grouped = String::with_capacity(int.len() + int.len() / 3);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if x < 0.0 && text != "0.00" { "-" } else { "" };
    format!("{sign}{grouped}.{frac}")
}

/// A change in money with its sign: `+1,234.50`, `-3.00` (a rounding-size drop, `0.00`).
pub fn usd_delta(x: f64) -> String {
    if x >= 0.0 { format!("+{}", usd(x)) } else { usd(x) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_has_two_decimals_and_thousands_separators() {
        assert_eq!(usd(80945.9), "80,945.90");
        assert_eq!(usd(80967.89), "80,967.89");
        assert_eq!(usd(999.999), "1,000.00");
        assert_eq!(usd(0.5), "0.50");
        assert_eq!(usd(-1234567.0), "-1,234,567.00");
        assert_eq!(usd(-0.001), "0.00");
        assert_eq!(usd_delta(20036.35), "+20,036.35");
        assert_eq!(usd_delta(-0.001), "0.00");
        assert_eq!(usd_delta(-3.0), "-3.00");
    }
}
