//! String forms of an ID for URLs, logs and people: besides decimal, a fixed-width Crockford
//! base32 (13 characters, case-insensitive), a fixed-width base62 (11 characters) and `0x` hex
//! (16 digits). The fixed-width forms sort as the IDs do, so a string column or a URL listing
//! keeps time order; decimal does not (9 sorts after 10).
//!
//! Encoding writes into a stack buffer ([`FormBuf`]): no allocation on the path of a server
//! answering in a form.

use std::fmt;
use std::str::FromStr;

/// Crockford's base32 alphabet: no I, L, O or U, so nothing reads as another character.
const BASE32: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Base62 in ASCII order (digits, upper, lower), so byte order is numeric order.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Characters of each fixed-width form.
pub const BASE32_LEN: usize = 13;
/// Characters of the base62 form.
pub const BASE62_LEN: usize = 11;
/// Characters of the hex form, `0x` included.
pub const HEX_LEN: usize = 18;

/// A way to write an ID as text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Form {
    /// Unsigned decimal, 1 to 20 digits (does not sort as text).
    #[default]
    Decimal,
    /// Crockford base32, 13 characters, upper case out, case-insensitive in (sorts).
    Base32,
    /// Base62 (`0-9A-Za-z`), 11 characters, case-sensitive (sorts byte-wise).
    Base62,
    /// `0x` and 16 lower-case hex digits (sorts).
    Hex,
}

impl Form {
    /// Every form, decimal first.
    pub const ALL: [Form; 4] = [Form::Decimal, Form::Base32, Form::Base62, Form::Hex];

    /// The form's name, as `--format` and `?format=` take it.
    pub const fn name(self) -> &'static str {
        match self {
            Form::Decimal => "decimal",
            Form::Base32 => "base32",
            Form::Base62 => "base62",
            Form::Hex => "hex",
        }
    }

    /// True if the text of larger IDs sorts after that of smaller ones.
    pub const fn sorts(self) -> bool {
        !matches!(self, Form::Decimal)
    }

    /// `id` in this form, in a stack buffer.
    pub fn encode(self, id: u64) -> FormBuf {
        let mut buf = FormBuf {
            bytes: [0; 20],
            len: 0,
        };
        match self {
            Form::Decimal => {
                let mut n = id;
                let mut digits = [0u8; 20];
                let mut i = digits.len();
                loop {
                    i -= 1;
                    digits[i] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
                let len = digits.len() - i;
                buf.bytes[..len].copy_from_slice(&digits[i..]);
                buf.len = len as u8;
            }
            Form::Base32 => fixed(&mut buf, id, BASE32, BASE32_LEN),
            Form::Base62 => fixed(&mut buf, id, BASE62, BASE62_LEN),
            Form::Hex => {
                buf.bytes[..2].copy_from_slice(b"0x");
                for i in 0..16 {
                    let nibble = (id >> (60 - 4 * i)) & 0xf;
                    buf.bytes[2 + i] = b"0123456789abcdef"[nibble as usize];
                }
                buf.len = HEX_LEN as u8;
            }
        }
        buf
    }

    /// Reads `text` (already trimmed) in this form; `None` if it is not one.
    pub fn decode(self, text: &str) -> Option<u64> {
        let b = text.as_bytes();
        match self {
            Form::Decimal => {
                if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
                    return None;
                }
                text.parse().ok()
            }
            Form::Base32 | Form::Base62 => u64::try_from(self.fixed_value(text)?).ok(),
            Form::Hex => {
                let hex = text
                    .strip_prefix("0x")
                    .or_else(|| text.strip_prefix("0X"))?;
                if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                u64::from_str_radix(hex, 16).ok()
            }
        }
    }
}

impl Form {
    /// The value of a text of the right width made of this fixed-width form's digits, even one
    /// above `u64::MAX` (which [`Form::decode`] refuses); `None` for any other text or form.
    pub(crate) fn fixed_value(self, text: &str) -> Option<u128> {
        let b = text.as_bytes();
        let (len, base) = match self {
            Form::Base32 => (BASE32_LEN, 32),
            Form::Base62 => (BASE62_LEN, 62),
            Form::Decimal | Form::Hex => return None,
        };
        if b.len() != len {
            return None;
        }
        let mut v: u128 = 0;
        for &c in b {
            let d = match self {
                Form::Base32 => base32_digit(c)?,
                _ => BASE62.iter().position(|&x| x == c)? as u8,
            };
            v = v * base + u128::from(d);
        }
        Some(v)
    }
}

/// Writes `id` with `len` digits of `alphabet`, most significant first.
fn fixed(buf: &mut FormBuf, id: u64, alphabet: &[u8], len: usize) {
    let base = alphabet.len() as u128;
    let mut v = u128::from(id);
    for i in (0..len).rev() {
        buf.bytes[i] = alphabet[(v % base) as usize];
        v /= base;
    }
    buf.len = len as u8;
}

/// A base32 digit, Crockford's way: either case; I and L read as 1, O as 0.
fn base32_digit(c: u8) -> Option<u8> {
    let c = match c.to_ascii_uppercase() {
        b'I' | b'L' => b'1',
        b'O' => b'0',
        c => c,
    };
    BASE32.iter().position(|&x| x == c).map(|d| d as u8)
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown form `{0}`: use decimal, base32, base62 or hex")]
pub struct UnknownForm(pub String);

impl FromStr for Form {
    type Err = UnknownForm;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Form::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownForm(s.chars().take(32).collect()))
    }
}

/// An ID written in a form: at most 20 bytes of ASCII on the stack.
#[derive(Clone, Copy)]
pub struct FormBuf {
    bytes: [u8; 20],
    len: u8,
}

impl FormBuf {
    /// The text.
    pub fn as_str(&self) -> &str {
        // Every form writes ASCII only.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl AsRef<str> for FormBuf {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for FormBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for FormBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edges_in_every_form() {
        assert_eq!(Form::Base32.encode(0).as_str(), "0000000000000");
        assert_eq!(Form::Base32.encode(u64::MAX).as_str(), "FZZZZZZZZZZZZ");
        assert_eq!(Form::Base62.encode(0).as_str(), "00000000000");
        assert_eq!(Form::Base62.encode(u64::MAX).as_str(), "LygHa16AHYF");
        assert_eq!(Form::Hex.encode(255).as_str(), "0x00000000000000ff");
        assert_eq!(
            Form::Decimal.encode(u64::MAX).as_str(),
            "18446744073709551615"
        );
        assert_eq!(Form::Decimal.encode(0).as_str(), "0");
        // Past u64 in the fixed widths: refused, never wrapped.
        assert_eq!(Form::Base32.decode("G000000000000"), None);
        assert_eq!(Form::Base62.decode("LygHa16AHYG"), None);
        assert_eq!(Form::Base62.decode("zzzzzzzzzzz"), None);
        // Crockford's aliases and either case.
        assert_eq!(Form::Base32.decode("000000000000o"), Some(0));
        assert_eq!(Form::Base32.decode("000000000000l"), Some(1));
        assert_eq!(Form::Base32.decode("000000000000I"), Some(1));
        assert_eq!(Form::Base32.decode("000000000000U"), None);
        assert_eq!("BASE62".parse::<Form>(), Ok(Form::Base62));
        assert!(
            "b64"
                .parse::<Form>()
                .unwrap_err()
                .to_string()
                .contains("base32")
        );
    }

    proptest! {
        #[test]
        fn every_form_round_trips(id in any::<u64>()) {
            for form in Form::ALL {
                let text = form.encode(id);
                prop_assert_eq!(form.decode(text.as_str()), Some(id), "{}", form);
            }
            let lower = Form::Base32.encode(id).as_str().to_ascii_lowercase();
            prop_assert_eq!(Form::Base32.decode(&lower), Some(id));
        }

        #[test]
        fn fixed_width_forms_sort_as_the_ids(a in any::<u64>(), b in any::<u64>()) {
            for form in Form::ALL.into_iter().filter(|f| f.sorts()) {
                let (x, y) = (form.encode(a), form.encode(b));
                prop_assert_eq!(x.as_str().cmp(y.as_str()), a.cmp(&b), "{}", form);
            }
        }
    }
}
