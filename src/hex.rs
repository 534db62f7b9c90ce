//! [`hex`]: bytes as lowercase hexadecimal, the one spelling of every digest gpuplan
//! writes (spec digests, request signatures, launch-template and client tokens, sim ids).
//! A leaf of layer 0 so that any module may use it without reaching into another's file.

/// Lowercase hex of `bytes`, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::hex;

    #[test]
    fn two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0, 9, 10, 15, 16, 171, 255]), "00090a0f10abff");
        // The same as `format!("{b:02x}")` for every byte, which the call sites used before.
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(hex(&all), all.iter().map(|b| format!("{b:02x}")).collect::<String>());
    }
}
