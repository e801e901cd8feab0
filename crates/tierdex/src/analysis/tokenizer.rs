//! Word segmentation on Unicode UAX#29 word boundaries, as Lucene's
//! `StandardTokenizer` does.
//!
//! A *word segment* (a stretch between two UAX#29 word boundaries) becomes a
//! token when it contains at least one alphanumeric character; this is the
//! semantics of `unicode-segmentation`'s `unicode_word_indices`.
//!
//! Two implementations share that contract:
//!
//! * [`ascii_region`], the fast path, applies the word-boundary rules that
//!   can fire on ASCII text (WB5–WB13b: letters, digits, `_` ExtendNumLet,
//!   `'`/`.` MidNumLet, `:` MidLetter, `,`/`;` MidNum) directly to bytes;
//! * [`unicode_region`] runs `unicode-segmentation` and handles everything.
//!
//! [`tokenize`] cuts the text into regions at *split points* and gives each
//! region to one of them: pure-ASCII regions to the fast path, regions with
//! non-ASCII bytes to `unicode-segmentation`. A split point is a position `p`
//! where `text[p]` is an ASCII space, tab or line feed and `text[p - 1]` is an
//! ASCII byte, except a space after a space (WB3d keeps spaces together) and a
//! line feed after a carriage return (WB3). At such a point UAX#29 always has
//! a boundary, and no rule decides a boundary on one side by looking at
//! characters on the other side: the look-ahead/look-behind rules
//! (WB6/7/7b/7c/11/12) need a letter, digit or quote next to the split,
//! WB4 (Extend/Format/ZWJ are transparent) never skips over an ASCII
//! character, and the regional-indicator parity count (WB15/16) stops at it.
//! So segmenting each region on its own (with start and end of text at its
//! ends) yields exactly the segments of the whole text; the proptests in
//! `tests.rs` check this against `unicode-segmentation` on the whole text.
//!
//! Long segments: a segment of more than `max_chars` characters (Lucene's
//! `maxTokenLength`, 255) yields its first `max_chars` characters as a token
//! (when they contain an alphanumeric character), and segmentation restarts
//! right after them as at the start of a text, like Lucene's scanner, whose
//! buffer is capped at `maxTokenLength`.
//!
//! Both paths do this in linear time: a restart never scans the rest of the
//! long segment again. The ASCII path stops scanning a segment once it has
//! more than `max_chars` bytes; the general path segments a bounded window
//! after each cut (see [`unicode_region`]).

use unicode_segmentation::UnicodeSegmentation;

#[cfg(test)]
thread_local! {
    /// Bytes the tokenizer has examined on this thread (for the tests that
    /// check it works in linear time).
    pub(crate) static SCANNED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `bytes` examined (tests only; nothing in other builds).
#[inline(always)]
fn scanned(bytes: usize) {
    #[cfg(test)]
    SCANNED.with(|s| s.set(s.get() + bytes as u64));
    #[cfg(not(test))]
    let _ = bytes;
}

/// How the term of a token must be lowercased.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    /// The source text is the term: ASCII without upper-case letters, or
    /// any text from a tokenizer that keeps case.
    Lower,
    /// ASCII with upper-case letters: ASCII lowercasing.
    AsciiUpper,
    /// May contain non-ASCII characters: full Unicode lowercasing.
    Unicode,
}

const ALPHA: u8 = 1;
const DIGIT: u8 = 2;
const EXTEND_NUM_LET: u8 = 4;
const UPPER: u8 = 8;
/// `'`, `.` (MidNumLetQ) and `:` (MidLetter): join two letters (WB6/WB7).
const MID_LETTER: u8 = 16;
/// `'`, `.` (MidNumLetQ) and `,`, `;` (MidNum): join two digits (WB11/WB12).
const MID_NUM: u8 = 32;
/// Letters, digits and `_`: any two of them are joined (WB5, WB8–WB10, WB13a/b).
const CORE: u8 = ALPHA | DIGIT | EXTEND_NUM_LET;

/// Word-break classes of the bytes that matter in ASCII text; everything
/// else (and every non-ASCII byte, which never reaches the fast path) is 0.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if c.is_ascii_uppercase() {
            ALPHA | UPPER
        } else if c.is_ascii_lowercase() {
            ALPHA
        } else if c.is_ascii_digit() {
            DIGIT
        } else {
            match c {
                b'_' => EXTEND_NUM_LET,
                b'\'' | b'.' => MID_LETTER | MID_NUM,
                b':' => MID_LETTER,
                b',' | b';' => MID_NUM,
                _ => 0,
            }
        };
        b += 1;
    }
    t
};

/// Calls `emit(start, end, case)` for every token of `text`, in order
/// (byte offsets into `text`).
#[inline]
pub(crate) fn tokenize(text: &str, max_chars: usize, emit: &mut impl FnMut(usize, usize, Case)) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let mut pos = 0;
    while pos < n {
        let Some(non_ascii) = first_non_ascii(bytes, pos) else {
            ascii_region(text, pos, n, max_chars, emit);
            return;
        };
        let start = (pos + 1..non_ascii)
            .rev()
            .find(|&p| is_split_point(bytes, p))
            .unwrap_or(pos);
        let end = (non_ascii + 1..n).find(|&p| is_split_point(bytes, p)).unwrap_or(n);
        ascii_region(text, pos, start, max_chars, emit);
        unicode_region(text, start, end, max_chars, emit);
        pos = end;
    }
}

/// Whether `p` (with `0 < p < bytes.len()`) is a split point (module docs).
#[inline]
fn is_split_point(bytes: &[u8], p: usize) -> bool {
    let (before, at) = (bytes[p - 1], bytes[p]);
    before.is_ascii()
        && match at {
            b' ' => before != b' ',
            b'\n' => before != b'\r',
            b'\t' => true,
            _ => false,
        }
}

/// Index of the first non-ASCII byte at or after `from`.
#[inline]
fn first_non_ascii(bytes: &[u8], from: usize) -> Option<usize> {
    const CHUNK: usize = 32;
    let rest = &bytes[from..];
    let mut offset = 0;
    for chunk in rest.chunks(CHUNK) {
        if !chunk.is_ascii() {
            let i = chunk.iter().position(|b| !b.is_ascii())?;
            return Some(from + offset + i);
        }
        offset += chunk.len();
    }
    None
}

/// Bit masks over a block of 64 bytes: bit `j` describes byte `j`.
#[derive(Debug, Clone, Copy, Default)]
struct Masks {
    alpha: u64,
    upper: u64,
    digit: u64,
    extend_num_let: u64,
    mid_letter: u64,
    mid_num: u64,
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// High bit of each byte of `x` (all ASCII) set where the byte is `>= v`
/// (`v <= 0x80`).
#[inline(always)]
fn swar_ge(x: u64, v: u8) -> u64 {
    ((x | HI) - LO * v as u64) & HI
}

/// High bit of each byte of `x` (all ASCII) set where `lo <= byte <= hi`.
#[inline(always)]
fn swar_range(x: u64, lo: u8, hi: u8) -> u64 {
    swar_ge(x, lo) & !swar_ge(x, hi + 1)
}

/// High bit of each byte of `x` (all ASCII) set where the byte is `v`.
#[inline(always)]
fn swar_eq(x: u64, v: u8) -> u64 {
    let y = x ^ (LO * v as u64);
    !(((y & !HI) + !HI) | y) & HI
}

/// Packs the high bits of the 8 bytes of `m` into the low 8 bits.
#[inline(always)]
fn pack(m: u64) -> u64 {
    ((m >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

impl Masks {
    /// Masks of the (ASCII) bytes `b[o..min(o + 64, to)]`; missing bytes are 0.
    #[inline(always)]
    fn at(b: &[u8], o: usize, to: usize) -> Masks {
        let mut padded = [0u8; 64];
        let block: &[u8] = if to - o >= 64 {
            &b[o..o + 64]
        } else {
            padded[..to - o].copy_from_slice(&b[o..to]);
            &padded
        };
        let mut m = Masks::default();
        for (k, word) in block.chunks_exact(8).enumerate() {
            let x = u64::from_le_bytes(word.try_into().unwrap());
            let upper = swar_range(x, b'A', b'Z');
            let lower = swar_range(x, b'a', b'z');
            let apostrophe_or_dot = swar_eq(x, b'\'') | swar_eq(x, b'.');
            let shift = 8 * k;
            m.alpha |= pack(upper | lower) << shift;
            m.upper |= pack(upper) << shift;
            m.digit |= pack(swar_range(x, b'0', b'9')) << shift;
            m.extend_num_let |= pack(swar_eq(x, b'_')) << shift;
            m.mid_letter |= pack(apostrophe_or_dot | swar_eq(x, b':')) << shift;
            m.mid_num |= pack(apostrophe_or_dot | swar_eq(x, b',') | swar_eq(x, b';')) << shift;
        }
        m
    }
}

/// Bits `from..64` of a `u64` (`from < 64`).
#[inline(always)]
fn bits_from(from: u32) -> u64 {
    !0u64 << from
}

/// Bits `0..to` of a `u64` (`to <= 64`).
#[inline(always)]
fn bits_below(to: u32) -> u64 {
    if to >= 64 {
        !0
    } else {
        (1u64 << to) - 1
    }
}

/// The ASCII fast path: tokens of `text[from..to]`, which is pure ASCII and
/// segmented as a text of its own.
///
/// Works on 64-byte blocks: SWAR comparisons give bit masks of letters,
/// digits, `_` and the infix punctuation; a joining infix is one whose
/// neighbours are both letters (MidLetter/MidNumLetQ) or both digits
/// (MidNum/MidNumLetQ); the segments with letters or digits are then exactly
/// the maximal runs of letters, digits, `_` and joining infixes, found with
/// bit tricks. Runs longer than `max_chars` go to [`ascii_scalar`].
pub(crate) fn ascii_region(
    text: &str,
    from: usize,
    to: usize,
    max_chars: usize,
    emit: &mut impl FnMut(usize, usize, Case),
) {
    let b = text.as_bytes();
    debug_assert!(b[from..to].is_ascii());
    if from >= to {
        return;
    }
    scanned(to - from);
    let mut finish = |start: usize, end: usize, alnum: bool, upper: bool| {
        if end - start > max_chars {
            ascii_scalar(text, start, end, max_chars, emit);
        } else if alnum {
            emit(start, end, if upper { Case::AsciiUpper } else { Case::Lower });
        }
    };
    let mut o = from;
    let mut cur = Masks::at(b, o, to);
    // Bit 63 of the previous block's masks, moved to bit 0.
    let (mut carry_alpha, mut carry_digit, mut carry_word) = (0u64, 0u64, 0u64);
    // The run being scanned: its start and whether it has letters/digits or
    // upper-case letters so far.
    let mut in_word = false;
    let mut word_start = 0usize;
    let (mut alnum, mut upper) = (false, false);
    while o < to {
        let next = if to - o > 64 {
            Masks::at(b, o + 64, to)
        } else {
            Masks::default()
        };
        let prev_alpha = (cur.alpha << 1) | carry_alpha;
        let next_alpha = (cur.alpha >> 1) | (next.alpha << 63);
        let prev_digit = (cur.digit << 1) | carry_digit;
        let next_digit = (cur.digit >> 1) | (next.digit << 63);
        let joins = (cur.mid_letter & prev_alpha & next_alpha) | (cur.mid_num & prev_digit & next_digit);
        let word = cur.alpha | cur.digit | cur.extend_num_let | joins;
        let alnum_bits = cur.alpha | cur.digit;
        let mut transitions = word ^ ((word << 1) | carry_word);
        // Where the current run's part in this block begins.
        let mut part_from = 0u32;
        while transitions != 0 {
            let j = transitions.trailing_zeros();
            transitions &= transitions - 1;
            if in_word {
                let part = bits_from(part_from) & bits_below(j);
                alnum |= alnum_bits & part != 0;
                upper |= cur.upper & part != 0;
                in_word = false;
                finish(word_start, o + j as usize, alnum, upper);
            } else {
                in_word = true;
                word_start = o + j as usize;
                part_from = j;
                alnum = false;
                upper = false;
            }
        }
        if in_word {
            let part = bits_from(part_from);
            alnum |= alnum_bits & part != 0;
            upper |= cur.upper & part != 0;
        }
        carry_alpha = cur.alpha >> 63;
        carry_digit = cur.digit >> 63;
        carry_word = word >> 63;
        cur = next;
        o += 64;
    }
    if in_word {
        finish(word_start, to, alnum, upper);
    }
}

/// The byte-at-a-time version of [`ascii_region`], which also cuts runs
/// longer than `max_chars` (restarting after each piece).
pub(crate) fn ascii_scalar(
    text: &str,
    from: usize,
    to: usize,
    max_chars: usize,
    emit: &mut impl FnMut(usize, usize, Case),
) {
    // Slicing to `to` lets the compiler drop most bounds checks.
    let b = &text.as_bytes()[..to];
    debug_assert!(b[from..].is_ascii());
    let mut i = from;
    loop {
        // Skip to the first byte of the next segment with letters or digits.
        let skip_from = i;
        while i < b.len() && CLASS[b[i] as usize] & CORE == 0 {
            i += 1;
        }
        scanned(i - skip_from);
        if i >= b.len() {
            return;
        }
        let start = i;
        // Union of the classes of the segment's letters, digits and `_`.
        let mut seen = 0;
        // Past `limit` the segment is too long: where it ends does not matter.
        let limit = b.len().min(start.saturating_add(max_chars).saturating_add(1));
        loop {
            while i < limit {
                let c = CLASS[b[i] as usize];
                if c & CORE == 0 {
                    break;
                }
                seen |= c;
                i += 1;
            }
            // `i > start` here; an infix joins when the next byte qualifies.
            if i < limit && i + 1 < b.len() {
                let c = CLASS[b[i] as usize];
                if c & (MID_LETTER | MID_NUM) != 0 {
                    let prev = CLASS[b[i - 1] as usize];
                    let next = CLASS[b[i + 1] as usize];
                    if (c & MID_LETTER != 0 && prev & next & ALPHA != 0)
                        || (c & MID_NUM != 0 && prev & next & DIGIT != 0)
                    {
                        seen |= next;
                        i += 2;
                        continue;
                    }
                }
            }
            break;
        }
        scanned(i - start);
        if i - start > max_chars {
            // Too long: emit the first `max_chars` bytes and restart after them.
            let end = start + max_chars;
            let piece = &b[start..end];
            if piece.iter().any(u8::is_ascii_alphanumeric) {
                let case = if piece.iter().any(u8::is_ascii_uppercase) {
                    Case::AsciiUpper
                } else {
                    Case::Lower
                };
                emit(start, end, case);
            }
            i = end;
            continue;
        }
        if seen & (ALPHA | DIGIT) == 0 {
            continue; // only underscores
        }
        let case = if seen & UPPER != 0 {
            Case::AsciiUpper
        } else {
            Case::Lower
        };
        emit(start, i, case);
    }
}

/// The general path: tokens of `text[from..to]`, segmented as a text of its
/// own by `unicode-segmentation`'s full UAX#29 implementation (its word
/// bounds filtered on alphanumerics, i.e. `unicode_word_indices` without
/// that crate's own ASCII shortcut, so this is an independent reference for
/// the fast path).
///
/// Segmentation runs lazily over the rest of the region until a segment is
/// cut. After a cut it restarts on a *window* of a few times `max_chars`
/// characters ([`window_phase`]): segmenting the whole rest again would
/// scan the remainder of the long segment after every cut (quadratic time).
pub(crate) fn unicode_region(
    text: &str,
    from: usize,
    to: usize,
    max_chars: usize,
    emit: &mut impl FnMut(usize, usize, Case),
) {
    let mut phase = Phase::Lazy { base: from, skip: from };
    loop {
        phase = match phase {
            Phase::Lazy { base, skip } => lazy_phase(text, base, skip, to, max_chars, emit),
            Phase::Window { base } => window_phase(text, base, to, max_chars, emit),
            Phase::Done => return,
        };
    }
}

/// What [`unicode_region`] does next.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Segment `text[base..to]` lazily, from the first segment at or after
    /// `skip` (those before it are already done).
    Lazy { base: usize, skip: usize },
    /// A cut left `base` as the start of a new text: try a window first.
    Window { base: usize },
    /// The region is done.
    Done,
}

/// Emits the segment `text[start..end]` (known whole, not cut before):
/// its first `max_chars` characters and the restart after them when it is
/// longer (`Some(restart)`), or all of it.
#[inline]
fn whole_segment(
    text: &str,
    start: usize,
    end: usize,
    max_chars: usize,
    emit: &mut impl FnMut(usize, usize, Case),
) -> Option<usize> {
    let word = &text[start..end];
    if !word.chars().any(char::is_alphanumeric) {
        return None;
    }
    if word.len() > max_chars {
        if let Some((cut, _)) = word.char_indices().nth(max_chars) {
            if word[..cut].chars().any(char::is_alphanumeric) {
                emit(start, start + cut, Case::Unicode);
            }
            return Some(start + cut);
        }
    }
    emit(start, end, Case::Unicode);
    None
}

/// Segments `text[base..to]` lazily, from the segment starting at `skip`,
/// up to the first cut.
fn lazy_phase(
    text: &str,
    base: usize,
    skip: usize,
    to: usize,
    max_chars: usize,
    emit: &mut impl FnMut(usize, usize, Case),
) -> Phase {
    for (offset, word) in text[base..to].split_word_bound_indices() {
        scanned(word.len());
        let start = base + offset;
        if start < skip {
            continue;
        }
        if let Some(restart) = whole_segment(text, start, start + word.len(), max_chars, emit) {
            return Phase::Window { base: restart };
        }
    }
    Phase::Done
}

/// After a cut: segments `text[base..to]` as a text of its own, looking at
/// a window `text[base..w]` only, as long as that decides.
///
/// A boundary decision at a position `p` of the window is the same as in
/// the whole text when `text[p]` is Extend, Format or ZWJ (WB4: decided by
/// the character before), when `text[p]` is alphanumeric (no rule looks
/// past such a character: the look-ahead of WB6, WB7b and WB12 follows a
/// MidLetter, MidNum, MidNumLet or quote, none of them alphanumeric), or
/// when at least two characters that are not Extend/Format/ZWJ follow it in
/// the window; everything else sits at the window's end ([`reliable_end`]).
/// Segments ending before that point are the whole text's. The segment
/// across it has no boundary before it: when that part already has more
/// than `max_chars` characters the segment is cut. Otherwise the window
/// doubles, up to a limit past which the rest is segmented lazily.
///
/// One difference from segmenting the rest lazily: a long segment whose
/// known part has no alphanumeric character is cut rather than skipped
/// whole (as the ASCII path does); the pieces yield no token either way.
fn window_phase(
    text: &str,
    base: usize,
    to: usize,
    max_chars: usize,
    emit: &mut impl FnMut(usize, usize, Case),
) -> Phase {
    // Start of the first segment not yet emitted or skipped.
    let mut done = base;
    let mut chars = max_chars.saturating_add(17);
    let most = 64 * max_chars.saturating_add(1);
    loop {
        let w = text[base..to].char_indices().nth(chars).map_or(to, |(i, _)| base + i);
        scanned(w - base);
        let reliable = if w < to { reliable_end(text, base, w) } else { to };
        for (offset, word) in text[base..w].split_word_bound_indices() {
            scanned(word.len());
            let start = base + offset;
            let end = start + word.len();
            if start < done {
                continue;
            }
            if end < reliable || w == to {
                if let Some(restart) = whole_segment(text, start, end, max_chars, emit) {
                    return Phase::Window { base: restart };
                }
                done = end;
                continue;
            }
            // Across the reliable end: at least `text[start..reliable]`.
            if let Some((cut, _)) = text[start..reliable.max(start)].char_indices().nth(max_chars) {
                if text[start..start + cut].chars().any(char::is_alphanumeric) {
                    emit(start, start + cut, Case::Unicode);
                }
                return Phase::Window { base: start + cut };
            }
            break;
        }
        if w == to {
            return Phase::Done;
        }
        if chars >= most {
            return Phase::Lazy { base, skip: done };
        }
        chars *= 2;
    }
}

/// The first position of `text[base..w]` (`w` before the end of the text)
/// whose boundary decision may depend on what follows `w` (see
/// [`window_phase`]); `w` when there is none.
fn reliable_end(text: &str, base: usize, w: usize) -> usize {
    let mut end = w;
    let mut following = 0;
    for (i, c) in text[base..w].char_indices().rev() {
        scanned(c.len_utf8());
        if is_ignorable(c) {
            continue;
        }
        if following == 2 {
            break;
        }
        if !c.is_alphanumeric() {
            end = base + i;
        }
        following += 1;
    }
    end
}

/// Whether `c` has the word-break class Extend, Format or ZWJ, which rule
/// WB4 makes transparent: exactly the characters that never start a new
/// segment after a `.` (no other rule joins a `.` to what follows it).
fn is_ignorable(c: char) -> bool {
    if c.is_ascii() {
        return false;
    }
    let mut buf = [0u8; 5];
    buf[0] = b'.';
    let len = 1 + c.encode_utf8(&mut buf[1..]).len();
    // The buffer holds a `.` and one whole character.
    let pair = std::str::from_utf8(&buf[..len]).unwrap_or(".");
    pair.split_word_bounds().nth(1).is_none()
}
