//! The bytes on disk: segment names, the segment header and record frames.
//! Pure functions over byte slices; nothing here touches a file.
//!
//! Every parse is total: any input gives a value or a reason, never a panic,
//! and no length read from the input is used to allocate.

use std::ops::Range;

/// The first eight bytes of every segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"CWYWAL\r\n";

/// The version of the segment and frame layout (and of the identity file).
pub const FORMAT_VERSION: u32 = 2;

/// Segment header: magic (8), format version (u32 LE), flags (u32 LE),
/// base position (u64 LE), CRC-32 of the 24 bytes before it (u32 LE).
pub const HEADER_LEN: usize = 28;

/// Frame header: payload length (u32 LE), CRC-32 over kind and payload
/// (u32 LE), kind (u8).
pub const FRAME_HEADER_LEN: usize = 9;

/// The largest record payload: a longer length field is corruption.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// The largest checkpoint payload (a replica's whole state may exceed a
/// record's limit); a longer length field in a checkpoint frame is corruption.
pub const MAX_CHECKPOINT_BYTES: usize = 1 << 30;

/// Header flag: the segment's first frame is a checkpoint.
const FLAG_CHECKPOINT: u32 = 1;

/// What a frame holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The state that replaces every record before the segment's base.
    Checkpoint = 1,
    /// One record the caller appended.
    Record = 2,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Checkpoint),
            2 => Some(Kind::Record),
            _ => None,
        }
    }

    fn max_payload(self) -> usize {
        match self {
            Kind::Checkpoint => MAX_CHECKPOINT_BYTES,
            Kind::Record => MAX_RECORD_BYTES,
        }
    }
}

/// A segment header as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The log's length (records since it began) before the segment's first
    /// record; for a checkpoint segment, the length its checkpoint covers.
    pub base: u64,
    /// The segment starts with a checkpoint frame.
    pub checkpoint: bool,
}

/// The file name of the segment whose base is `base`.
pub fn segment_name(base: u64) -> String {
    format!("{base:020}.log")
}

/// The base of a segment file name, if `name` is one (exactly twenty digits
/// and `.log`).
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The 28 header bytes of a segment.
pub fn encode_header(header: Header) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[0..8].copy_from_slice(&SEGMENT_MAGIC);
    out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    let flags = if header.checkpoint { FLAG_CHECKPOINT } else { 0 };
    out[12..16].copy_from_slice(&flags.to_le_bytes());
    out[16..24].copy_from_slice(&header.base.to_le_bytes());
    let crc = crc32fast::hash(&out[..24]);
    out[24..28].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Reads a segment header from the start of `bytes`.
pub fn parse_header(bytes: &[u8]) -> Result<Header, String> {
    let Some(h) = bytes.get(..HEADER_LEN) else {
        return Err(format!("segment header incomplete: {} of {HEADER_LEN} bytes", bytes.len()));
    };
    if h[0..8] != SEGMENT_MAGIC {
        return Err("not a segment: bad magic".into());
    }
    let crc = u32_at(h, 24);
    if crc != crc32fast::hash(&h[..24]) {
        return Err("segment header fails its CRC".into());
    }
    let version = u32_at(h, 8);
    if version != FORMAT_VERSION {
        return Err(format!("segment format version {version}, this build reads {FORMAT_VERSION}"));
    }
    let flags = u32_at(h, 12);
    if flags & !FLAG_CHECKPOINT != 0 {
        return Err(format!("unknown segment flags {flags:#x}"));
    }
    Ok(Header { base: u64_at(h, 16), checkpoint: flags & FLAG_CHECKPOINT != 0 })
}

/// Appends one frame holding `payload` to `out`. The caller checked the
/// payload against its kind's limit.
pub fn encode_frame(out: &mut Vec<u8>, kind: Kind, payload: &[u8]) {
    debug_assert!(payload.len() <= kind.max_payload());
    let len = u32::try_from(payload.len()).expect("payload within its limit fits a u32");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&frame_crc(kind as u8, payload).to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(payload);
}

/// The bytes a frame of `payload_len` takes.
pub fn frame_len(payload_len: usize) -> u64 {
    (FRAME_HEADER_LEN + payload_len) as u64
}

fn frame_crc(kind: u8, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(payload);
    h.finalize()
}

/// A whole frame with a good CRC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    /// Where its payload lies in the buffer parsed.
    pub payload: Range<usize>,
    /// The offset just past it.
    pub end: usize,
}

/// Why no frame could be read at an offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadFrame {
    /// Fewer than a frame header's bytes remain.
    IncompleteHeader { have: usize },
    /// The length field is beyond any payload of its kind.
    TooLong { len: u64, max: usize },
    /// The payload would run past the end of the buffer.
    PastEnd { len: u64, have: usize },
    /// The kind byte is none we write.
    UnknownKind(u8),
    /// The CRC does not match.
    BadCrc,
}

impl std::fmt::Display for BadFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadFrame::IncompleteHeader { have } => {
                write!(f, "incomplete frame header ({have} of {FRAME_HEADER_LEN} bytes)")
            }
            BadFrame::TooLong { len, max } => write!(f, "frame length {len} exceeds the maximum {max}"),
            BadFrame::PastEnd { len, have } => {
                write!(f, "frame length {len} runs past the end of the file ({have} bytes remain)")
            }
            BadFrame::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            BadFrame::BadCrc => write!(f, "frame fails its CRC"),
        }
    }
}

/// Reads the frame at `at` in `buf`.
pub fn parse_frame(buf: &[u8], at: usize) -> Result<Frame, BadFrame> {
    let rest = buf.get(at..).unwrap_or(&[]);
    if rest.len() < FRAME_HEADER_LEN {
        return Err(BadFrame::IncompleteHeader { have: rest.len() });
    }
    let len = u32_at(rest, 0) as usize;
    let crc = u32_at(rest, 4);
    let kind_byte = rest[8];
    // The kind decides the limit; an unknown kind is judged after the length
    // so that a length running past the end still reads as a torn write.
    let max = Kind::from_byte(kind_byte).map_or(MAX_CHECKPOINT_BYTES, Kind::max_payload);
    if len > max {
        return Err(BadFrame::TooLong { len: len as u64, max });
    }
    let have = rest.len() - FRAME_HEADER_LEN;
    if len > have {
        return Err(BadFrame::PastEnd { len: len as u64, have });
    }
    let Some(kind) = Kind::from_byte(kind_byte) else {
        return Err(BadFrame::UnknownKind(kind_byte));
    };
    let start = at + FRAME_HEADER_LEN;
    let payload = start..start + len;
    if frame_crc(kind_byte, &buf[payload.clone()]) != crc {
        return Err(BadFrame::BadCrc);
    }
    Ok(Frame { kind, payload: payload.clone(), end: payload.end })
}

/// The first offset after `from` where a whole frame with a good CRC
/// begins, if any. Recovery asks this after a bad frame in the last
/// segment: a good frame after a bad one means the bad one is not a torn
/// write at the end but damage in the middle. A false match needs a random
/// 32-bit CRC to agree: one chance in four billion per offset.
pub fn next_good_frame(buf: &[u8], from: usize) -> Option<usize> {
    (from.saturating_add(1)..buf.len().saturating_sub(FRAME_HEADER_LEN - 1)).find(|&at| {
        // Cheap rejections first: most offsets fail on the kind or length.
        let kind_ok = Kind::from_byte(buf[at + 8]).is_some();
        kind_ok && parse_frame(buf, at).is_ok()
    })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_and_any_flipped_bit_is_caught() {
        let h = Header { base: 12345, checkpoint: true };
        let bytes = encode_header(h);
        assert_eq!(parse_header(&bytes), Ok(h));
        for bit in 0..HEADER_LEN * 8 {
            let mut b = bytes;
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(parse_header(&b).is_err(), "bit {bit}");
        }
        assert!(parse_header(&bytes[..HEADER_LEN - 1]).is_err());
    }

    #[test]
    fn segment_names_sort_by_base_and_only_exact_names_parse() {
        assert_eq!(segment_name(42), "00000000000000000042.log");
        assert_eq!(parse_segment_name(&segment_name(u64::MAX)), Some(u64::MAX));
        for bad in ["42.log", "0000000000000000004x.log", "00000000000000000042.log.tmp", "99999999999999999999.log"] {
            assert_eq!(parse_segment_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn frames_read_back_and_each_damage_has_its_reason() {
        let mut buf = Vec::new();
        encode_frame(&mut buf, Kind::Record, b"hello");
        encode_frame(&mut buf, Kind::Checkpoint, b"");
        let f = parse_frame(&buf, 0).unwrap();
        assert_eq!((f.kind, &buf[f.payload.clone()]), (Kind::Record, &b"hello"[..]));
        let g = parse_frame(&buf, f.end).unwrap();
        assert_eq!((g.kind, g.payload.len(), g.end), (Kind::Checkpoint, 0, buf.len()));

        assert_eq!(parse_frame(&buf, buf.len() - 3), Err(BadFrame::IncompleteHeader { have: 3 }));
        assert_eq!(parse_frame(&buf[..f.end - 1], 0), Err(BadFrame::PastEnd { len: 5, have: 4 }));
        let mut b = buf.clone();
        b[FRAME_HEADER_LEN] ^= 1;
        assert_eq!(parse_frame(&b, 0), Err(BadFrame::BadCrc));
        let mut b = buf.clone();
        b[8] = 7;
        assert_eq!(parse_frame(&b, 0), Err(BadFrame::UnknownKind(7)));
        let mut b = buf.clone();
        b[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        b[8] = Kind::Record as u8;
        assert_eq!(parse_frame(&b, 0), Err(BadFrame::TooLong { len: u32::MAX as u64, max: MAX_RECORD_BYTES }));
        // Past the end of a buffer, and on an empty one, still no panic.
        assert!(parse_frame(&buf, usize::MAX).is_err());
        assert!(parse_frame(&[], 0).is_err());
    }

    #[test]
    fn the_next_good_frame_is_found_behind_garbage() {
        let mut buf = vec![0xAB; 13];
        encode_frame(&mut buf, Kind::Record, b"x");
        assert_eq!(next_good_frame(&buf, 0), Some(13));
        assert_eq!(next_good_frame(&buf, 13), None);
        assert_eq!(next_good_frame(&[], 0), None);
        assert_eq!(next_good_frame(&buf, usize::MAX), None);
    }
}
