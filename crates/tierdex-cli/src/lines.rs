//! Lines of standard input, one at a time, where a line that is not UTF-8
//! is that line's error instead of the end of the input.

use std::io::BufRead;

/// A line of input: its text, or why it cannot be read as text.
pub type Line = Result<String, String>;

/// The lines of `input` (without `\n` or `\r\n`), numbered from 1 in error
/// messages. An I/O error ends the iteration with that error.
pub fn text_lines(input: impl BufRead) -> impl Iterator<Item = std::io::Result<Line>> {
    input.split(b'\n').enumerate().map(|(i, bytes)| {
        let mut bytes = bytes?;
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        Ok(String::from_utf8(bytes).map_err(|e| {
            format!(
                "line {} is not valid UTF-8 (invalid byte at offset {})",
                i + 1,
                e.utf8_error().valid_up_to()
            )
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_line_is_its_own_error_and_reading_goes_on() {
        let input: &[u8] = b"first\r\nse\xffcond\n\nlast";
        let lines: Vec<Line> = text_lines(input).map(|l| l.unwrap()).collect();
        assert_eq!(lines[0], Ok("first".to_string()));
        assert_eq!(
            lines[1],
            Err("line 2 is not valid UTF-8 (invalid byte at offset 2)".to_string())
        );
        assert_eq!(lines[2], Ok(String::new()));
        assert_eq!(lines[3], Ok("last".to_string()));
        assert_eq!(lines.len(), 4);
    }
}
