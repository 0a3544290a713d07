//! The soak's duplicate check, on disk: every ID file is read once into sorted runs of bounded
//! size (written to a temp dir), then the runs are merged and equal neighbours counted. Memory
//! stays at one run (8 bytes per ID of `run_len`) however many IDs the soak wrote.
//!
//! ID files come in two formats: 8-byte little-endian words (the soak's own workers) and decimal
//! lines (`vesta gen`). A process killed mid-write leaves a partial last record; it is skipped
//! and counted, never read as an ID.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// How a file stores its IDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// 8 bytes each, little-endian.
    Binary,
    /// One decimal per line.
    Text,
}

impl Format {
    /// Roughly how many bytes one ID takes (for progress estimates while files grow).
    pub fn bytes_per_id(self) -> u64 {
        match self {
            Format::Binary => 8,
            Format::Text => 20,
        }
    }
}

/// One file of IDs handed out by one process.
#[derive(Clone, Debug)]
pub struct IdFile {
    /// Where it is.
    pub path: PathBuf,
    /// How it stores IDs.
    pub format: Format,
    /// The process that wrote it (for evidence).
    pub process: String,
}

/// What reading one file found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// IDs read.
    pub ids: u64,
    /// Bytes of a cut last record (a process killed mid-write).
    pub partial_tail_bytes: u64,
    /// Complete lines that are not an ID (should never happen).
    pub bad_lines: u64,
}

/// Reads every complete ID of `file`, in file order.
pub fn read_ids(file: &IdFile, mut each: impl FnMut(u64)) -> io::Result<ReadStats> {
    let mut stats = ReadStats::default();
    let mut reader = BufReader::with_capacity(1 << 20, File::open(&file.path)?);
    match file.format {
        Format::Binary => {
            let mut word = [0u8; 8];
            loop {
                let got = read_full(&mut reader, &mut word)?;
                if got == 8 {
                    each(u64::from_le_bytes(word));
                    stats.ids += 1;
                } else {
                    stats.partial_tail_bytes = got as u64;
                    break;
                }
            }
        }
        Format::Text => {
            let mut line = Vec::with_capacity(32);
            loop {
                line.clear();
                let n = reader.read_until(b'\n', &mut line)?;
                if n == 0 {
                    break;
                }
                if line.last() != Some(&b'\n') {
                    stats.partial_tail_bytes = n as u64;
                    break;
                }
                match std::str::from_utf8(&line[..n - 1])
                    .ok()
                    .and_then(|s| s.parse().ok())
                {
                    Some(id) => {
                        each(id);
                        stats.ids += 1;
                    }
                    None => stats.bad_lines += 1,
                }
            }
        }
    }
    Ok(stats)
}

/// Reads until `buf` is full or the end; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The result of the duplicate check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// IDs read from every file.
    pub total: u64,
    /// Distinct IDs.
    pub distinct: u64,
    /// Occurrences beyond the first: `total - distinct`.
    pub duplicates: u64,
    /// The first duplicated IDs, ascending (at most [`MAX_EXAMPLES`]).
    pub examples: Vec<u64>,
    /// Sorted runs written to disk.
    pub runs: usize,
    /// Per file, in the order given.
    pub files: Vec<ReadStats>,
}

/// Duplicated IDs kept as evidence; the count covers all of them.
pub const MAX_EXAMPLES: usize = 1000;

/// Reads `files` into sorted runs of at most `run_len` IDs under `tmp`, merges them and counts
/// duplicates. `each` sees every ID with the index of its file (for the caller's statistics).
/// The runs are deleted afterwards.
pub fn find_duplicates(
    files: &[IdFile],
    tmp: &Path,
    run_len: usize,
    mut each: impl FnMut(usize, u64),
) -> io::Result<Outcome> {
    fs::create_dir_all(tmp)?;
    let run_len = run_len.max(1);
    let mut buf: Vec<u64> = Vec::with_capacity(run_len);
    let mut runs: Vec<PathBuf> = Vec::new();
    let mut out = Outcome::default();
    for (i, file) in files.iter().enumerate() {
        let mut io_err = None;
        let stats = read_ids(file, |id| {
            each(i, id);
            buf.push(id);
            if buf.len() == run_len
                && let Err(e) = write_run(&mut buf, tmp, &mut runs)
            {
                io_err.get_or_insert(e);
            }
        })?;
        if let Some(e) = io_err {
            return Err(e);
        }
        out.total += stats.ids;
        out.files.push(stats);
    }
    if !buf.is_empty() {
        write_run(&mut buf, tmp, &mut runs)?;
    }
    drop(buf);
    out.runs = runs.len();
    merge(&runs, &mut out)?;
    for run in &runs {
        fs::remove_file(run)?;
    }
    Ok(out)
}

fn write_run(buf: &mut Vec<u64>, tmp: &Path, runs: &mut Vec<PathBuf>) -> io::Result<()> {
    buf.sort_unstable();
    let path = tmp.join(format!("run-{}.bin", runs.len()));
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
    for id in buf.iter() {
        w.write_all(&id.to_le_bytes())?;
    }
    w.flush()?;
    buf.clear();
    runs.push(path);
    Ok(())
}

/// A sorted run being merged.
struct RunReader {
    reader: BufReader<File>,
}

impl RunReader {
    fn next(&mut self) -> io::Result<Option<u64>> {
        let mut word = [0u8; 8];
        match read_full(&mut self.reader, &mut word)? {
            8 => Ok(Some(u64::from_le_bytes(word))),
            0 => Ok(None),
            n => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("a sorted run ends in {n} stray bytes"),
            )),
        }
    }
}

/// K-way merge of the sorted runs; counts equal neighbours.
fn merge(runs: &[PathBuf], out: &mut Outcome) -> io::Result<()> {
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (i, path) in runs.iter().enumerate() {
        let mut r = RunReader {
            reader: BufReader::with_capacity(1 << 18, File::open(path)?),
        };
        if let Some(id) = r.next()? {
            heap.push(Reverse((id, i)));
        }
        readers.push(r);
    }
    let mut previous: Option<u64> = None;
    while let Some(Reverse((id, i))) = heap.pop() {
        if previous == Some(id) {
            out.duplicates += 1;
            if out.examples.len() < MAX_EXAMPLES && out.examples.last() != Some(&id) {
                out.examples.push(id);
            }
        } else {
            out.distinct += 1;
            previous = Some(id);
        }
        if let Some(next) = readers[i].next()? {
            heap.push(Reverse((next, i)));
        }
    }
    Ok(())
}

/// Where each of `ids` occurs: (id, file index, position of the ID in that file), in file order.
/// The evidence for a duplicate: which processes handed it out, and when in their output.
pub fn locate(files: &[IdFile], ids: &HashSet<u64>) -> io::Result<Vec<(u64, usize, u64)>> {
    let mut found = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let mut position = 0u64;
        read_ids(file, |id| {
            if ids.contains(&id) {
                found.push((id, i, position));
            }
            position += 1;
        })?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(dir: &Path, name: &str, ids: &[u64], tail: &[u8]) -> IdFile {
        let path = dir.join(name);
        let mut bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        bytes.extend_from_slice(tail);
        fs::write(&path, bytes).unwrap();
        IdFile {
            path,
            format: Format::Binary,
            process: name.into(),
        }
    }

    fn text(dir: &Path, name: &str, body: &str) -> IdFile {
        let path = dir.join(name);
        fs::write(&path, body).unwrap();
        IdFile {
            path,
            format: Format::Text,
            process: name.into(),
        }
    }

    /// Duplicates inside one file, across files, across formats and across runs (runs of 3 IDs
    /// force many runs) are all counted; cut tails are skipped, not read as IDs.
    #[test]
    fn counts_every_duplicate_across_runs_files_and_formats() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![
            binary(dir.path(), "a", &[10, 3, 7, 3, 99], &[1, 2, 3]),
            text(dir.path(), "b", "7\n1000\n18446744073709551615\n12"),
            binary(dir.path(), "c", &[u64::MAX, 5, 6], &[]),
            text(dir.path(), "d", "not an id\n42\n"),
        ];
        let mut seen = Vec::new();
        let out = find_duplicates(&files, &dir.path().join("tmp"), 3, |f, id| {
            seen.push((f, id));
        })
        .unwrap();
        assert_eq!(out.total, 12);
        assert_eq!(seen.len(), 12);
        assert_eq!(
            out.duplicates, 3,
            "3 twice in a, 7 in a and b, MAX in b and c"
        );
        assert_eq!(out.distinct, 9);
        assert_eq!(out.examples, vec![3, 7, u64::MAX]);
        assert_eq!(out.runs, 4);
        assert_eq!(out.files[0].partial_tail_bytes, 3);
        assert_eq!(out.files[1].partial_tail_bytes, 2);
        assert_eq!(out.files[3].bad_lines, 1);
        assert_eq!(
            fs::read_dir(dir.path().join("tmp")).unwrap().count(),
            0,
            "runs are deleted"
        );

        let wanted: HashSet<u64> = [7, u64::MAX].into();
        let found = locate(&files, &wanted).unwrap();
        assert_eq!(
            found,
            vec![(7, 0, 2), (7, 1, 0), (u64::MAX, 1, 2), (u64::MAX, 2, 0)]
        );
    }

    #[test]
    fn distinct_ids_and_no_files_give_no_duplicate() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<u64> = (0..1000).map(|i| i * 7919 % 1009).collect();
        let files = vec![binary(dir.path(), "a", &ids, &[])];
        let out = find_duplicates(&files, &dir.path().join("t"), 64, |_, _| {}).unwrap();
        assert_eq!((out.total, out.distinct, out.duplicates), (1000, 1000, 0));
        assert_eq!(out.runs, 16);
        let out = find_duplicates(&[], &dir.path().join("t"), 64, |_, _| {}).unwrap();
        assert_eq!((out.total, out.duplicates, out.runs), (0, 0, 0));
    }
}
