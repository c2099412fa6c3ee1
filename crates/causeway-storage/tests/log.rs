//! The log's behaviour through its public API and its files on disk.

use causeway_storage::{Identity, Log, Options, Recovered, StorageError, TornTail, IDENTITY_FILE};
use std::fs;
use std::path::{Path, PathBuf};

fn id() -> Identity {
    Identity::new("test-cluster", "node-1")
}

fn small() -> Options {
    Options { max_segment_bytes: 256, ..Options::default() }
}

fn open(dir: &Path) -> Result<(Log, Recovered), StorageError> {
    Log::open_with(dir, &id(), small())
}

fn record(i: usize) -> Vec<u8> {
    format!("record {i} {}", "x".repeat(i % 17)).into_bytes()
}

/// A log in `dir` with records `0..n`, synced.
fn write_records(dir: &Path, n: usize) -> Log {
    write_records_with(dir, n, small())
}

/// [`write_records`] with explicit options.
fn write_records_with(dir: &Path, n: usize, options: Options) -> Log {
    let (mut log, _) = Log::open_with(dir, &id(), options).unwrap();
    for i in 0..n {
        log.append(&record(i)).unwrap();
    }
    log.sync().unwrap();
    log
}

fn records(range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    range.map(record).collect()
}

/// The segment files in `dir`, oldest first.
fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

/// The offsets of the frames of a segment written by these tests, and its
/// size.
fn frame_offsets(path: &Path) -> (Vec<u64>, u64) {
    let data = fs::read(path).unwrap();
    let (mut at, mut offsets) = (28usize, Vec::new());
    while at + 9 <= data.len() && !zero_header(&data[at..]) {
        offsets.push(at as u64);
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        at += 9 + len;
    }
    (offsets, data.len() as u64)
}

/// The offsets where the frames of a segment's bytes end, as far as their
/// length fields say.
fn frame_ends(data: &[u8]) -> Vec<usize> {
    let (mut at, mut ends) = (28usize, Vec::new());
    while at + 9 <= data.len() && !zero_header(&data[at..]) {
        at += 9 + u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        if at > data.len() {
            break;
        }
        ends.push(at);
    }
    ends
}

/// Nine zero bytes: no frame we write (kinds are 1 and 2), but the zeros a
/// preallocated tail holds past its records.
fn zero_header(at: &[u8]) -> bool {
    at[..9].iter().all(|&b| b == 0)
}

fn flip(path: &Path, offset: u64) {
    let mut data = fs::read(path).unwrap();
    data[offset as usize] ^= 0x40;
    fs::write(path, data).unwrap();
}

fn expect_corrupt(result: Result<(Log, Recovered), StorageError>, file: &Path, offset: u64) -> String {
    match result {
        Err(e @ StorageError::Corrupt { .. }) => {
            let StorageError::Corrupt { file: f, offset: o, .. } = &e else { unreachable!() };
            assert_eq!((f.as_path(), *o), (file, offset), "{e}");
            let shown = e.to_string();
            assert!(shown.contains(&file.display().to_string()), "{shown}");
            assert!(shown.contains(&format!("at byte {offset}")), "{shown}");
            shown
        }
        Err(e) => panic!("expected Corrupt at {}:{offset}, got {e}", file.display()),
        Ok((_, r)) => {
            panic!("expected Corrupt at {}:{offset}, opened with {} records", file.display(), r.records.len())
        }
    }
}

#[test]
fn a_new_directory_gets_an_identity_and_an_empty_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("wal");
    let (log, rec) = open(&dir).unwrap();
    assert!(rec.is_empty() && rec.torn_tail.is_none() && rec.base == 0);
    assert_eq!((log.len(), log.synced()), (0, 0));
    let identity = fs::read_to_string(dir.join(IDENTITY_FILE)).unwrap();
    assert!(identity.contains("test-cluster") && identity.contains("node-1"), "{identity}");
    drop(log);
    let (_, rec) = open(&dir).unwrap();
    assert!(rec.is_empty());
}

#[test]
fn another_nodes_or_clusters_directory_is_refused_naming_both_identities() {
    let tmp = tempfile::tempdir().unwrap();
    write_records(tmp.path(), 3);
    let before = segment_files(tmp.path()).iter().map(|p| fs::read(p).unwrap()).collect::<Vec<_>>();
    for other in [Identity::new("test-cluster", "node-2"), Identity::new("other-cluster", "node-1")] {
        let err = Log::open(tmp.path(), &other).unwrap_err();
        assert!(matches!(err, StorageError::IdentityMismatch { .. }), "{err}");
        let shown = err.to_string();
        let path = tmp.path().display().to_string();
        let needles: [&str; 5] = [&other.cluster, &other.node, "test-cluster", "node-1", &path];
        for needle in needles {
            assert!(shown.contains(needle), "{shown} lacks {needle}");
        }
    }
    let after = segment_files(tmp.path()).iter().map(|p| fs::read(p).unwrap()).collect::<Vec<_>>();
    assert_eq!(before, after, "a refused open changes nothing");
}

#[test]
fn segments_without_an_identity_or_a_damaged_identity_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    write_records(tmp.path(), 3);
    fs::write(tmp.path().join(IDENTITY_FILE), "causeway-storage\nformat: 99\ncluster: a\nnode: b\n").unwrap();
    let err = open(tmp.path()).unwrap_err();
    assert!(matches!(err, StorageError::BadIdentity { .. }) && err.to_string().contains("format version 99"), "{err}");
    fs::remove_file(tmp.path().join(IDENTITY_FILE)).unwrap();
    let err = open(tmp.path()).unwrap_err();
    assert!(matches!(err, StorageError::NoIdentity { .. }), "{err}");
    assert!(matches!(Log::open(tmp.path(), &Identity::new("a", "")), Err(StorageError::InvalidIdentity(_))));
}

#[test]
fn records_read_back_in_order_with_positions_counted_from_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(tmp.path(), &id()).unwrap();
    assert_eq!(log.append(b"a").unwrap(), 1);
    assert_eq!(log.append(b"").unwrap(), 2, "an empty record is a record");
    assert_eq!(log.synced(), 0);
    assert_eq!(log.sync().unwrap(), 2);
    assert_eq!(log.sync().unwrap(), 2, "a sync with nothing pending is free and answers the same");
    assert_eq!(log.append(b"c").unwrap(), 3);
    assert_eq!(log.sync().unwrap(), 3);
    assert_eq!(log.bytes_since_checkpoint(), 3 * 9 + 2);
    drop(log);
    let (mut log, rec) = Log::open(tmp.path(), &id()).unwrap();
    assert_eq!(rec.records, vec![b"a".to_vec(), vec![], b"c".to_vec()]);
    assert_eq!((rec.len(), log.len(), log.synced(), log.bytes_since_checkpoint()), (3, 3, 3, 29));
    assert_eq!(log.append(b"d").unwrap(), 4, "positions go on after a reopen");
}

#[test]
fn a_full_segment_rotates_and_the_log_reads_across_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = write_records(tmp.path(), 40);
    let files = segment_files(tmp.path());
    assert!(files.len() > 3, "{files:?}");
    assert_eq!(log.segments().collect::<Vec<_>>(), files);
    for f in &files[..files.len() - 1] {
        assert!(fs::metadata(f).unwrap().len() <= 256 + 9 + 40, "{f:?}");
    }
    // A record larger than a segment still goes in, alone.
    let big = vec![7u8; 1000];
    assert_eq!(log.append(&big).unwrap(), 41);
    log.append(&record(41)).unwrap();
    log.sync().unwrap();
    drop(log);
    let (_, rec) = open(tmp.path()).unwrap();
    let mut want = records(0..40);
    want.push(big);
    want.push(record(41));
    assert_eq!(rec.records, want);
    assert!(rec.torn_tail.is_none());
}

#[test]
fn a_torn_tail_is_cut_reported_and_never_replayed() {
    // How a crash can leave the end of the last segment, and how many good
    // records remain (of 5) for each.
    type Tear = fn(&Path, &[u64], u64);
    let cases: [(&str, Tear, usize); 5] = [
        ("an incomplete frame header", |p, _, size| truncate(p, size - 15 + 4), 4),
        ("a length running past the end", |p, _, size| truncate(p, size - 2), 4),
        ("a bad CRC on the last frame", |p, offs, _| flip(p, offs[4] + 9 + 3), 4),
        (
            "bad CRCs on the last two frames",
            |p, offs, _| {
                flip(p, offs[3] + 10);
                flip(p, offs[4] + 10)
            },
            3,
        ),
        ("a huge length in the last frame", |p, offs, _| write_at(p, offs[4], &u32::MAX.to_le_bytes()), 4),
    ];
    for (what, tear, kept) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open(tmp.path(), &id()).unwrap();
        for i in 0..5 {
            log.append(format!("r{i}{}", "y".repeat(i)).as_bytes()).unwrap();
        }
        log.sync().unwrap();
        drop(log);
        let file = segment_files(tmp.path()).pop().unwrap();
        let (offsets, size) = frame_offsets(&file);
        assert_eq!(offsets.len(), 5);
        tear(&file, &offsets, size);
        let torn_size = fs::metadata(&file).unwrap().len();

        let (mut log, rec) = Log::open(tmp.path(), &id()).unwrap();
        let want: Vec<Vec<u8>> = (0..kept).map(|i| format!("r{i}{}", "y".repeat(i)).into_bytes()).collect();
        assert_eq!(rec.records, want, "{what}");
        let cut_at = offsets.get(kept).copied().unwrap_or(size);
        let TornTail { file: f, offset, bytes, reason } = rec.torn_tail.clone().expect(what);
        assert_eq!((f, offset, bytes), (file.clone(), cut_at, torn_size - cut_at), "{what}: {reason}");
        assert_eq!(fs::metadata(&file).unwrap().len(), cut_at, "{what}: truncated at the last good frame");
        assert_eq!(log.len() as usize, kept);

        // The log goes on from the cut, and the next open finds it clean.
        assert_eq!(log.append(b"after").unwrap() as usize, kept + 1);
        log.sync().unwrap();
        drop(log);
        let (_, rec) = Log::open(tmp.path(), &id()).unwrap();
        assert!(rec.torn_tail.is_none(), "{what}");
        assert_eq!(rec.records.len(), kept + 1, "{what}");
        assert_eq!(rec.records.last().unwrap(), b"after");
    }
}

#[test]
fn damage_followed_by_good_frames_is_an_error_naming_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(tmp.path(), &id()).unwrap();
    for i in 0..5 {
        log.append(&record(i)).unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let file = segment_files(tmp.path()).pop().unwrap();
    let (offsets, _) = frame_offsets(&file);
    let pristine = fs::read(&file).unwrap();

    // A flipped payload byte, a flipped CRC, an unknown kind.
    for at in [offsets[1] + 12, offsets[1] + 5, offsets[1] + 8] {
        fs::write(&file, &pristine).unwrap();
        flip(&file, at);
        expect_corrupt(Log::open(tmp.path(), &id()), &file, offsets[1]);
        assert_eq!(fs::metadata(&file).unwrap().len(), pristine.len() as u64, "nothing is cut");
    }
    // A length that runs into the next frames, and one beyond any record:
    // damage, and no allocation.
    for len in [100u32, u32::MAX] {
        fs::write(&file, &pristine).unwrap();
        write_at(&file, offsets[2], &len.to_le_bytes());
        expect_corrupt(Log::open(tmp.path(), &id()), &file, offsets[2]);
    }
    // A damaged segment header with good frames after it.
    fs::write(&file, &pristine).unwrap();
    flip(&file, 3);
    let shown = expect_corrupt(Log::open(tmp.path(), &id()), &file, 0);
    assert!(shown.contains("magic"), "{shown}");
}

#[test]
fn any_damage_in_a_segment_that_is_not_the_last_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    drop(write_records(tmp.path(), 40));
    let files = segment_files(tmp.path());
    let first = &files[0];
    let (offsets, size) = frame_offsets(first);
    let pristine = fs::read(first).unwrap();

    // Its last frame torn: in the last segment that would be cut, here the
    // segments after it prove it was once whole.
    truncate(first, size - 1);
    let shown = expect_corrupt(open(tmp.path()), first, *offsets.last().unwrap());
    assert!(shown.contains("not the last"), "{shown}");
    fs::write(first, &pristine).unwrap();
    flip(first, offsets.last().unwrap() + 10);
    expect_corrupt(open(tmp.path()), first, *offsets.last().unwrap());

    // A segment missing from the middle.
    fs::write(first, &pristine).unwrap();
    fs::remove_file(&files[1]).unwrap();
    let shown = expect_corrupt(open(tmp.path()), &files[2], 0);
    assert!(shown.contains("missing"), "{shown}");
}

#[test]
fn a_checkpoint_replaces_what_came_before_and_positions_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = write_records(tmp.path(), 30);
    assert!(segment_files(tmp.path()).len() > 1);
    log.append(&record(30)).unwrap(); // not synced: the checkpoint covers it
    log.checkpoint(b"state at 31").unwrap();
    assert_eq!((log.len(), log.synced(), log.bytes_since_checkpoint()), (31, 31, 0));
    let files = segment_files(tmp.path());
    assert_eq!(files, vec![tmp.path().join("00000000000000000031.log")], "older segments are gone");
    for i in 31..60 {
        assert_eq!(log.append(&record(i)).unwrap(), i as u64 + 1);
    }
    log.sync().unwrap();
    drop(log);

    let (log, rec) = open(tmp.path()).unwrap();
    assert_eq!(rec.checkpoint.as_deref(), Some(&b"state at 31"[..]));
    assert_eq!((rec.base, rec.len(), log.len()), (31, 60, 60));
    assert_eq!(rec.records, records(31..60));
    assert!(rec.torn_tail.is_none() && rec.stale_segments_removed.is_empty());
    assert!(log.bytes_since_checkpoint() > 0);
}

#[test]
fn checkpoints_in_a_row_and_a_checkpoint_of_an_empty_log_keep_the_newest() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path()).unwrap();
    log.checkpoint(b"empty").unwrap();
    log.checkpoint(b"still empty").unwrap();
    drop(log);
    let (mut log, rec) = open(tmp.path()).unwrap();
    assert_eq!((rec.checkpoint.as_deref(), rec.base), (Some(&b"still empty"[..]), 0));
    log.append(b"one").unwrap();
    log.checkpoint(b"one").unwrap();
    // A large checkpoint fills its segment; the next record starts another.
    log.checkpoint(&[1u8; 1000]).unwrap();
    log.append(b"two").unwrap();
    log.append(b"three").unwrap();
    log.sync().unwrap();
    assert_eq!(segment_files(tmp.path()).len(), 2);
    drop(log);
    let (_, rec) = open(tmp.path()).unwrap();
    assert_eq!((rec.checkpoint, rec.base), (Some(vec![1u8; 1000]), 1));
    assert_eq!(rec.records, vec![b"two".to_vec(), b"three".to_vec()]);
}

/// The files of `dir` by name (the identity aside).
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    segment_files(dir)
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_str().unwrap().to_string(), fs::read(p).unwrap()))
        .collect()
}

#[test]
fn a_crash_before_the_old_segments_were_deleted_recovers_the_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = write_records(tmp.path(), 30);
    let before = snapshot(tmp.path());
    log.checkpoint(b"state").unwrap();
    log.append(b"after").unwrap();
    log.sync().unwrap();
    drop(log);
    // Put back the old segments, as if the crash came before their removal,
    // one of them torn at its end (it was never synced past there).
    for (name, bytes) in &before {
        fs::write(tmp.path().join(name), bytes).unwrap();
    }
    truncate(&tmp.path().join(&before[0].0), 40);
    let (_, rec) = open(tmp.path()).unwrap();
    assert_eq!((rec.checkpoint.as_deref(), rec.base), (Some(&b"state"[..]), 30));
    assert_eq!(rec.records, vec![b"after".to_vec()]);
    assert_eq!(rec.stale_segments_removed.len(), before.len());
    assert_eq!(segment_files(tmp.path()), vec![tmp.path().join("00000000000000000030.log")]);
}

#[test]
fn a_checkpoint_segment_whose_checkpoint_is_torn_is_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = write_records(tmp.path(), 30);
    let before = snapshot(tmp.path());
    log.checkpoint(&[9u8; 100]).unwrap();
    drop(log);
    let checkpoint_file = tmp.path().join("00000000000000000030.log");
    let whole = fs::read(&checkpoint_file).unwrap();
    for (name, bytes) in &before {
        fs::write(tmp.path().join(name), bytes).unwrap();
    }
    // The checkpoint segment ends inside its checkpoint frame; a leftover
    // temporary file of another attempt lies next to it.
    fs::write(&checkpoint_file, &whole[..whole.len() - 10]).unwrap();
    fs::write(tmp.path().join("00000000000000000030.log.tmp"), &whole[..50]).unwrap();
    let (mut log, rec) = open(tmp.path()).unwrap();
    assert_eq!((rec.checkpoint.as_ref(), rec.records.clone()), (None, records(0..30)));
    let torn = rec.torn_tail.unwrap();
    assert_eq!((torn.file, torn.offset, torn.bytes), (checkpoint_file.clone(), 0, whole.len() as u64 - 10));
    assert!(torn.reason.contains("checkpoint"), "{}", torn.reason);
    assert!(!checkpoint_file.exists() && !tmp.path().join("00000000000000000030.log.tmp").exists());
    assert_eq!(log.append(b"more").unwrap(), 31);
    log.sync().unwrap();
    drop(log);
    let (_, rec) = open(tmp.path()).unwrap();
    assert_eq!(rec.records.len(), 31);
}

#[test]
fn a_damaged_checkpoint_with_nothing_older_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = write_records(tmp.path(), 10);
    log.checkpoint(&[9u8; 100]).unwrap();
    log.append(b"after").unwrap();
    log.sync().unwrap();
    drop(log);
    let file = segment_files(tmp.path()).pop().unwrap();
    flip(&file, 28 + 9 + 50);
    let shown = expect_corrupt(open(tmp.path()), &file, 28);
    assert!(shown.contains("checkpoint of the first 10 records"), "{shown}");
    // Even when the checkpoint is all the segment holds.
    let tmp = tempfile::tempdir().unwrap();
    let mut log = write_records(tmp.path(), 10);
    log.checkpoint(&[9u8; 100]).unwrap();
    drop(log);
    let file = segment_files(tmp.path()).pop().unwrap();
    truncate(&file, 60);
    expect_corrupt(open(tmp.path()), &file, 28);
}

#[test]
fn oversized_records_are_refused_and_the_log_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = open(tmp.path()).unwrap();
    let err = log.append(&vec![0; causeway_storage::MAX_RECORD_BYTES + 1]).unwrap_err();
    assert!(matches!(err, StorageError::TooLarge { .. }), "{err}");
    assert_eq!(log.append(b"fine").unwrap(), 1);
    assert_eq!(log.sync().unwrap(), 1);
}

/// A small deterministic random source (SplitMix64), so a failing case
/// names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Damage of one kind at a random place of a random segment.
/// Returns what it did, and the file it changed in place (without changing
/// its length), if it did.
fn damage(rng: &mut Rng, files: &mut [(String, Vec<u8>)]) -> (String, Option<usize>) {
    // Half the time the last segment, where a crash tears.
    let f = if rng.below(2) == 0 { files.len() - 1 } else { rng.below(files.len()) };
    let (name, data) = &mut files[f];
    let at = rng.below(data.len().max(1));
    // An emptied file (truncated earlier) can only grow.
    let op = if data.is_empty() { 3 } else { rng.below(5) };
    match op {
        4 => {
            // A cut at a frame's end: what a crash leaves of unsynced
            // appends that were never written.
            let ends = frame_ends(data);
            let at = ends.get(rng.below(ends.len().max(1))).copied().unwrap_or(0);
            data.truncate(at);
            (format!("truncate {name} at the frame end {at}"), None)
        }
        0 => {
            let bit = 1u8 << rng.below(8);
            data[at] ^= bit;
            (format!("flip bit {bit:#x} at {name}:{at}"), Some(f))
        }
        1 => {
            data.truncate(at);
            (format!("truncate {name} at {at}"), None)
        }
        2 => {
            let n = 1 + rng.below(64);
            for b in data.iter_mut().skip(at).take(n) {
                *b = rng.next() as u8;
            }
            (format!("{n} random bytes at {name}:{at}"), Some(f))
        }
        _ => {
            let n = 1 + rng.below(64);
            data.extend((0..n).map(|_| rng.next() as u8));
            (format!("append {n} random bytes to {name}"), None)
        }
    }
}

/// Random damage to a valid log (with and without a checkpoint) always
/// opens as the records written, a prefix of them with the cut reported,
/// or a `Corrupt` error — never a panic, another error, or a record that
/// was not written. `CAUSEWAY_STORAGE_FUZZ` sets the number of cases.
#[test]
fn random_damage_gives_a_prefix_a_reported_cut_or_an_error_never_a_wrong_record() {
    let cases: u64 = std::env::var("CAUSEWAY_STORAGE_FUZZ").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    for (with_checkpoint, preallocate_bytes) in [(false, 0), (true, 0), (false, 512), (true, 512)] {
        let options = Options { preallocate_bytes, ..small() };
        let open = |dir: &Path| Log::open_with(dir, &id(), options);
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        let (mut log, _) = open(&src).unwrap();
        let mut rng = Rng(7);
        let mut written = Vec::new();
        for i in 0..60 {
            if with_checkpoint && i == 20 {
                log.checkpoint(b"the state of the first 20").unwrap();
                written.clear();
            }
            let r: Vec<u8> = (0..rng.below(40)).map(|_| rng.next() as u8).collect();
            log.append(&r).unwrap();
            written.push(r);
            if rng.below(4) == 0 {
                log.sync().unwrap();
            }
        }
        log.sync().unwrap();
        drop(log);
        let pristine = snapshot(&src);
        let identity = fs::read(src.join(IDENTITY_FILE)).unwrap();
        let (want_checkpoint, want_base) =
            if with_checkpoint { (Some(b"the state of the first 20".to_vec()), 20) } else { (None, 0) };

        // Each outcome but the first must occur, or the damage is not reaching
        // the rules (damage that leaves every record whole is rare).
        let (mut whole, mut cut, mut shorter, mut corrupt) = (0, 0, 0, 0);
        for case in 0..cases {
            let seed = case * 4 + with_checkpoint as u64 + 2 * (preallocate_bytes > 0) as u64;
            let mut rng = Rng(seed);
            let mut files = pristine.clone();
            let mut what = Vec::new();
            let mut all_in_place = true;
            let ops = 1 + rng.below(2);
            let mut changed = None;
            for _ in 0..ops {
                let (w, in_place) = damage(&mut rng, &mut files);
                what.push(w);
                all_in_place &= in_place.is_some();
                changed = in_place;
            }
            // One change in place decides the outcome: in the zeros after
            // the records of the last segment it is a torn tail that cuts
            // nothing; in its last frame, a torn tail; anywhere else, damage.
            let expect = match changed {
                Some(f) if ops == 1 => {
                    let (old, new) = (&pristine[f].1, &files[f].1);
                    let first_diff = old.iter().zip(new).position(|(a, b)| a != b);
                    let ends = frame_ends(old);
                    let last_frame = if ends.len() > 1 { ends[ends.len() - 2] } else { 28 };
                    let records_end = ends.last().copied().unwrap_or(28);
                    let last_diff = old.iter().zip(new).rposition(|(a, b)| a != b);
                    match (first_diff, last_diff) {
                        (Some(first), _) if f == files.len() - 1 && first >= records_end => {
                            Some("cut past the records")
                        }
                        (Some(first), _) if f == files.len() - 1 && first >= last_frame => Some("cut"),
                        // Damage that reaches into the last frame from before
                        // it may read either way.
                        (Some(_), Some(last)) if f < files.len() - 1 || last < last_frame => Some("corrupt"),
                        _ => None,
                    }
                }
                _ => None,
            };
            let dir = tmp.path().join(format!("case-{seed}"));
            fs::create_dir(&dir).unwrap();
            fs::write(dir.join(IDENTITY_FILE), &identity).unwrap();
            for (name, data) in &files {
                fs::write(dir.join(name), data).unwrap();
            }
            let ctx = format!("seed {seed}: {}", what.join(", "));
            match open(&dir) {
                Ok((mut log, rec)) => {
                    assert_eq!((&rec.checkpoint, rec.base), (&want_checkpoint, want_base), "{ctx}");
                    let n = rec.records.len();
                    assert!(n <= written.len() && rec.records[..] == written[..n], "{ctx}: not a prefix");
                    if all_in_place && n < written.len() {
                        assert!(rec.torn_tail.is_some(), "{ctx}: records lost without a reported cut");
                    }
                    match expect {
                        Some("cut") => assert!(rec.torn_tail.is_some() && n + 1 == written.len(), "{ctx}: {n} records"),
                        Some("cut past the records") => {
                            assert!(rec.torn_tail.is_some() && n == written.len(), "{ctx}: {n} records")
                        }
                        Some(other) => {
                            panic!("{ctx}: expected {other}, opened with {n} records, torn {:?}", rec.torn_tail)
                        }
                        None => {}
                    }
                    match (rec.torn_tail.is_some(), n == written.len()) {
                        (true, _) => cut += 1,
                        (false, true) => whole += 1,
                        (false, false) => shorter += 1,
                    }
                    // Recovery is done once: the log goes on, and opens clean.
                    log.append(b"next").unwrap();
                    log.sync().unwrap();
                    drop(log);
                    let (_, again) = open(&dir).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
                    assert!(again.torn_tail.is_none(), "{ctx}");
                    assert_eq!(again.records[..n], rec.records[..], "{ctx}");
                    assert_eq!(again.records[n..], [b"next".to_vec()], "{ctx}");
                }
                Err(StorageError::Corrupt { file, .. }) => {
                    assert!(file.starts_with(&dir), "{ctx}");
                    assert!(
                        !expect.is_some_and(|e| e.starts_with("cut")),
                        "{ctx}: damage only in or past the last frame is a torn tail"
                    );
                    corrupt += 1;
                }
                Err(e) => panic!("{ctx}: {e}"),
            }
            fs::remove_dir_all(&dir).unwrap();
        }
        eprintln!("checkpoint {with_checkpoint}, preallocated {preallocate_bytes}: {whole} whole, {cut} cut, {shorter} shorter at a frame end, {corrupt} corrupt");
        assert!(cut > 0 && shorter > 0 && corrupt > 0);
    }
}

fn truncate(path: &Path, len: u64) {
    fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut data = fs::read(path).unwrap();
    data.extend_from_slice(bytes);
    fs::write(path, data).unwrap();
}

fn write_at(path: &Path, at: u64, bytes: &[u8]) {
    let mut data = fs::read(path).unwrap();
    data[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    fs::write(path, data).unwrap();
}

fn trimmable() -> Options {
    Options { trimmable: true, ..small() }
}

/// A trimmed log loses its oldest segments, never records after the
/// position asked for, and opens again at its oldest segment; a log not
/// opened as trimmable refuses such a start as damage.
#[test]
fn a_trimmed_log_begins_at_its_oldest_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("wal");
    let (mut log, _) = Log::open_with(&dir, &id(), trimmable()).unwrap();
    for i in 0..40 {
        log.append(&record(i)).unwrap();
    }
    log.sync().unwrap();
    let before = segment_files(&dir).len();
    assert!(before >= 4, "small segments: {before}");
    let trim = log.trim(20);
    let trimmed = trim.len();
    assert!(trimmed > 0);
    trim.remove().unwrap();
    assert_eq!(segment_files(&dir).len(), before - trimmed);
    let base = log.base();
    assert!(base > 0 && base <= 20, "the oldest segment left begins at {base}, at or before 20");
    // Appends go on after a trim.
    log.append(&record(40)).unwrap();
    log.sync().unwrap();
    assert!(log.trim(0).is_empty(), "nothing lies wholly at or below 0 any more");
    drop(log);

    let (log, recovered) = Log::open_with(&dir, &id(), trimmable()).unwrap();
    assert_eq!(recovered.base, base);
    assert_eq!(recovered.records, records(base as usize..41));
    assert_eq!(log.len(), 41);
    drop(log);

    match open(&dir) {
        Err(StorageError::Corrupt { reason, .. }) => assert!(reason.contains("without a checkpoint"), "{reason}"),
        other => panic!("an untrimmable log beginning past 0 is damage, got {other:?}"),
    }
}

/// Trimming never takes the tail, however far the position asked for.
#[test]
fn trim_keeps_the_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open_with(tmp.path(), &id(), trimmable()).unwrap();
    for i in 0..30 {
        log.append(&record(i)).unwrap();
    }
    log.sync().unwrap();
    log.trim(u64::MAX).remove().unwrap();
    assert_eq!(segment_files(tmp.path()).len(), 1);
    drop(log);
    let (_, recovered) = Log::open_with(tmp.path(), &id(), trimmable()).unwrap();
    assert_eq!(recovered.len(), 30);
    assert_eq!(recovered.records, records(recovered.base as usize..30));
}

fn preallocated(preallocate_bytes: u64) -> Options {
    Options { max_segment_bytes: 64 << 10, preallocate_bytes, ..Options::default() }
}

fn size(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

/// Where the records of the segment at `path` end (zeros may follow).
fn records_end(path: &Path) -> u64 {
    frame_ends(&fs::read(path).unwrap()).last().copied().unwrap_or(28) as u64
}

/// A preallocated tail keeps zeros written out ahead of its records, so an
/// append and its sync overwrite the file in place rather than grow it; the
/// zeros are room, not a torn tail, when the log opens again, and appends
/// go on at the records' end.
#[test]
fn a_preallocated_tail_is_overwritten_in_place_and_reopens_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let options = preallocated(4096);
    let (mut log, _) = Log::open_with(tmp.path(), &id(), options).unwrap();
    log.append(&record(0)).unwrap();
    log.sync().unwrap();
    let file = segment_files(tmp.path()).pop().unwrap();
    let records_end = records_end(&file);
    let allocated = size(&file);
    assert!(allocated >= records_end + 2048, "zeros ahead: {allocated} bytes for records ending at {records_end}");
    for i in 1..20 {
        log.append(&record(i)).unwrap();
        log.sync().unwrap();
        assert_eq!(size(&file), allocated, "record {i}: synced in place, the file did not grow");
    }
    drop(log);

    let (mut log, rec) = Log::open_with(tmp.path(), &id(), options).unwrap();
    assert_eq!(rec.records, records(0..20));
    assert!(rec.torn_tail.is_none(), "zeros past the records are room: {:?}", rec.torn_tail);
    assert_eq!(size(&file), allocated, "nothing cut");
    // Appends go on at the records' end, and past the zeros first written:
    // the file grows ahead of them, never behind.
    for i in 20..200 {
        log.append(&record(i)).unwrap();
        log.sync().unwrap();
        let data = fs::read(&file).unwrap();
        let end = *frame_ends(&data).last().unwrap();
        assert!(
            data.len() >= end + 2048 && data[end..].iter().all(|&b| b == 0),
            "record {i}: {} after {end}",
            data.len()
        );
    }
    assert!(size(&file) > allocated);
    drop(log);
    let (_, rec) = Log::open_with(tmp.path(), &id(), options).unwrap();
    assert_eq!(rec.records, records(0..200));
    assert!(rec.torn_tail.is_none());
}

/// Bytes of an unsynced append that reached the preallocated zeros are a
/// torn tail: cut (the file truncated at the records' end) and reported,
/// so that a shorter record appended later can never be followed by them.
#[test]
fn a_torn_write_into_preallocated_zeros_is_cut_and_never_comes_back() {
    let tmp = tempfile::tempdir().unwrap();
    let options = preallocated(4096);
    drop(write_records_with(tmp.path(), 5, options));
    let file = segment_files(tmp.path()).pop().unwrap();
    let records_end = records_end(&file);
    // Two frames that were being appended: the first lost its start, the
    // second reached the disk whole.
    let mut frames = Vec::new();
    for r in [b"lost".as_slice(), b"whole but after a torn one"] {
        frames.extend_from_slice(&(r.len() as u32).to_le_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(&[2]);
        h.update(r);
        frames.extend_from_slice(&h.finalize().to_le_bytes());
        frames.push(2);
        frames.extend_from_slice(r);
    }
    frames[..4].fill(0);
    write_at(&file, records_end, &frames[4..]);

    match Log::open_with(tmp.path(), &id(), options) {
        Err(StorageError::Corrupt { offset, .. }) => assert_eq!(offset, records_end, "a good frame after a bad one"),
        other => panic!("expected damage, got {other:?}"),
    }
    // Only the torn frame: cut, reported, gone from the file.
    write_at(&file, records_end, &vec![0u8; frames.len()]);
    write_at(&file, records_end, &frames[4..13]);
    let (mut log, rec) = Log::open_with(tmp.path(), &id(), options).unwrap();
    assert_eq!(rec.records, records(0..5));
    let torn = rec.torn_tail.expect("a torn frame past the records is reported");
    assert_eq!((torn.file.as_path(), torn.offset), (file.as_path(), records_end));
    assert_eq!(size(&file), records_end, "truncated at the records' end");
    log.append(b"x").unwrap();
    log.sync().unwrap();
    drop(log);
    let (_, rec) = Log::open_with(tmp.path(), &id(), options).unwrap();
    assert!(rec.torn_tail.is_none());
    assert_eq!(rec.records.last().unwrap(), b"x");
    assert_eq!(rec.records.len(), 6);
}

/// A full preallocated segment is cut to its records before the next one
/// begins: only the last segment ends in zeros, and zeros anywhere else are
/// damage.
#[test]
fn a_rotated_segment_ends_at_its_records() {
    let tmp = tempfile::tempdir().unwrap();
    let options = Options { max_segment_bytes: 1024, preallocate_bytes: 512, ..Options::default() };
    let (mut log, _) = Log::open_with(tmp.path(), &id(), options).unwrap();
    for i in 0..200 {
        log.append(&record(i)).unwrap();
        if i % 7 == 0 {
            log.sync().unwrap();
        }
    }
    log.sync().unwrap();
    drop(log);
    let files = segment_files(tmp.path());
    assert!(files.len() > 3, "{files:?}");
    for f in &files[..files.len() - 1] {
        let data = fs::read(f).unwrap();
        assert_eq!(frame_ends(&data).last().copied(), Some(data.len()), "{f:?} ends at its last record");
    }
    let (_, rec) = Log::open_with(tmp.path(), &id(), options).unwrap();
    assert_eq!(rec.records, records(0..200));

    let first = &files[0];
    append_bytes(first, &[0; 64]);
    expect_corrupt(Log::open_with(tmp.path(), &id(), options), first, size(first) - 64);
}

/// Zeros after the last record of a log that was not preallocated read as
/// the same room: nothing is cut or reported.
#[test]
fn zeros_after_the_last_record_are_room_not_a_torn_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let log = write_records(tmp.path(), 5);
    drop(log);
    let file = segment_files(tmp.path()).pop().unwrap();
    append_bytes(&file, &[0; 1000]);
    let before = size(&file);
    let (mut log, rec) = open(tmp.path()).unwrap();
    assert_eq!(rec.records, records(0..5));
    assert!(rec.torn_tail.is_none());
    assert_eq!(size(&file), before);
    log.append(&record(5)).unwrap();
    log.sync().unwrap();
    drop(log);
    let (_, rec) = open(tmp.path()).unwrap();
    assert_eq!(rec.records, records(0..6));
}

/// A checkpoint cuts the old tail to its records before it writes the new
/// segment: should the checkpoint never become whole, the old tail is the
/// last segment again, and it must not end in zeros when a newer segment
/// lies after it.
#[test]
fn a_checkpoint_cuts_the_preallocated_tail_to_its_records_first() {
    let tmp = tempfile::tempdir().unwrap();
    let options = preallocated(4096);
    let mut log = write_records_with(tmp.path(), 10, options);
    let tail = segment_files(tmp.path()).pop().unwrap();
    assert!(size(&tail) > records_end(&tail), "zeros ahead");
    // The checkpoint's segment cannot be written: its temporary name is taken.
    let blocker = tmp.path().join("00000000000000000010.log.tmp");
    fs::create_dir(&blocker).unwrap();
    assert!(log.checkpoint(b"state").is_err());
    drop(log);
    let data = fs::read(&tail).unwrap();
    assert_eq!(frame_ends(&data).last().copied(), Some(data.len()), "the old tail ends at its records");
    fs::remove_dir(&blocker).unwrap();
    let (_, rec) = Log::open_with(tmp.path(), &id(), options).unwrap();
    assert_eq!(rec.records, records(0..10));
    assert!(rec.torn_tail.is_none());
}
