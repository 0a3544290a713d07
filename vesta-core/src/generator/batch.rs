//! What a batch call hands out: runs of consecutive sequence numbers in one unit
//! ([`IdRun`]), the batch of them ([`IdBatch`]) and their IDs in order ([`BatchIds`]).

/// A run of IDs with consecutive sequence numbers in one time unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IdRun {
    /// The first ID.
    pub first: u64,
    /// How many IDs; the k-th is `first + k * step`.
    pub count: u64,
    /// The distance between IDs whose sequence numbers differ by one: the layout's
    /// [`seq_step`](crate::Layout::seq_step) (1024 in Vesta's layouts, 1 where seq is the lowest field).
    pub step: u64,
}

impl IdRun {
    /// The k-th ID of the run, if k < count.
    pub fn get(&self, k: u64) -> Option<u64> {
        (k < self.count).then(|| self.first + k * self.step)
    }

    /// The last ID of the run (`first` for an empty run).
    pub fn last(&self) -> u64 {
        self.first + self.count.saturating_sub(1) * self.step
    }

    /// The IDs of the run, in increasing order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + use<> {
        let (first, step) = (self.first, self.step);
        (0..self.count as usize).map(move |k| first + k as u64 * step)
    }
}

/// IDs handed out by one batch call: contiguous runs, increasing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdBatch {
    pub(super) runs: Vec<IdRun>,
    pub(super) len: u64,
}

impl IdBatch {
    /// A batch of the given runs (e.g. decoded from a server's answer).
    pub fn from_runs(runs: Vec<IdRun>) -> Self {
        let len = runs.iter().map(|r| r.count).sum();
        IdBatch { runs, len }
    }

    /// The number of IDs.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the batch holds no ID.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The runs, in increasing order.
    pub fn runs(&self) -> &[IdRun] {
        &self.runs
    }

    /// Every ID, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(IdRun::iter)
    }

    /// Every ID in a vector.
    pub fn to_vec(&self) -> Vec<u64> {
        let mut v = Vec::with_capacity(self.len as usize);
        v.extend(self.iter());
        v
    }
}

/// The IDs of an [`IdBatch`] in order, from its runs (`for id in &batch`, `for id in batch`).
#[derive(Clone, Debug)]
pub struct BatchIds<R> {
    runs: R,
    run: Option<IdRun>,
    k: u64,
}

impl<R: Iterator<Item = IdRun>> Iterator for BatchIds<R> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        loop {
            let run = match self.run {
                Some(run) if self.k < run.count => run,
                _ => {
                    self.run = Some(self.runs.next()?);
                    self.k = 0;
                    continue;
                }
            };
            let id = run.first + self.k * run.step;
            self.k += 1;
            return Some(id);
        }
    }
}

impl<'a> IntoIterator for &'a IdBatch {
    type Item = u64;
    type IntoIter = BatchIds<std::iter::Copied<std::slice::Iter<'a, IdRun>>>;

    fn into_iter(self) -> Self::IntoIter {
        BatchIds {
            runs: self.runs.iter().copied(),
            run: None,
            k: 0,
        }
    }
}

impl IntoIterator for IdBatch {
    type Item = u64;
    type IntoIter = BatchIds<std::vec::IntoIter<IdRun>>;

    fn into_iter(self) -> Self::IntoIter {
        BatchIds {
            runs: self.runs.into_iter(),
            run: None,
            k: 0,
        }
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn a_batch_iterates_its_runs_in_order_by_reference_and_by_value() {
        let batch = IdBatch::from_runs(vec![
            IdRun {
                first: 10,
                count: 3,
                step: 1024,
            },
            IdRun {
                first: 5000,
                count: 0,
                step: 1,
            },
            IdRun {
                first: 9000,
                count: 2,
                step: 1,
            },
        ]);
        let want = vec![10, 1034, 2058, 9000, 9001];
        assert_eq!((&batch).into_iter().collect::<Vec<_>>(), want);
        assert_eq!(batch.iter().collect::<Vec<_>>(), want);
        let mut seen = Vec::new();
        for id in &batch {
            seen.push(id);
        }
        assert_eq!(seen, want);
        assert_eq!(batch.into_iter().collect::<Vec<_>>(), want);
        assert_eq!(IdBatch::default().into_iter().next(), None);
    }
}
