//! Leaf's adaptive step, as a pure rule. Leaf (`SegmentIDGenImpl.updateSegmentFromDb`) measures
//! the time since the previous fetch of the tag: under 15 minutes the step doubles unless that
//! passes the cap (1,000,000); from 15 to 30 minutes it stays; from 30 minutes on it halves
//! unless that goes below the table's `step`. Off, every fetch takes the table's `step`.

use std::time::Duration;

/// How the step of the next fetch is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepPolicy {
    /// Adapt at all (Leaf: yes).
    pub adaptive: bool,
    /// Doubling stops at this cap (Leaf: 1,000,000).
    pub max_step: u32,
    /// Fetched sooner than this after the previous fetch: double (Leaf: 15 min).
    pub grow_below: Duration,
    /// Fetched this long or longer after the previous fetch: halve (Leaf: 30 min).
    pub shrink_above: Duration,
}

impl Default for StepPolicy {
    fn default() -> Self {
        crate::SegmentSection::default().step_policy()
    }
}

impl StepPolicy {
    /// The step of the next fetch: `step` was the previous fetch's, `table_step` the `step`
    /// column as last read, `since_previous` the time since the previous fetch.
    ///
    /// Never below `table_step` (an operator who raised the column is obeyed at once), and
    /// doubling never passes `max_step` (a table step above the cap is kept as is).
    pub fn next_step(&self, step: u32, table_step: u32, since_previous: Duration) -> u32 {
        if !self.adaptive {
            return table_step;
        }
        let next = if since_previous < self.grow_below {
            match step.checked_mul(2) {
                Some(doubled) if doubled <= self.max_step => doubled,
                _ => step,
            }
        } else if since_previous < self.shrink_above {
            step
        } else if step / 2 >= table_step {
            step / 2
        } else {
            step
        };
        next.max(table_step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn leaf_rule_doubles_keeps_and_halves() {
        let p = StepPolicy::default();
        assert_eq!(p.next_step(1000, 1000, 14 * MIN), 2000);
        assert_eq!(p.next_step(2000, 1000, 15 * MIN), 2000);
        assert_eq!(p.next_step(2000, 1000, 29 * MIN), 2000);
        assert_eq!(p.next_step(4000, 1000, 30 * MIN), 2000);
        assert_eq!(p.next_step(4000, 1000, 300 * MIN), 2000);
    }

    #[test]
    fn cap_and_floor_hold() {
        let p = StepPolicy::default();
        assert_eq!(
            p.next_step(600_000, 1000, MIN),
            600_000,
            "1.2M passes the cap"
        );
        assert_eq!(p.next_step(500_000, 1000, MIN), 1_000_000);
        assert_eq!(
            p.next_step(1000, 1000, 60 * MIN),
            1000,
            "never below the table"
        );
        assert_eq!(
            p.next_step(1500, 1000, 60 * MIN),
            1500,
            "750 is below the table"
        );
        assert_eq!(
            p.next_step(2000, 5000, 20 * MIN),
            5000,
            "a raised table step wins"
        );
        assert_eq!(
            p.next_step(2_000_000, 2_000_000, MIN),
            2_000_000,
            "a table step over the cap is kept"
        );
        assert_eq!(p.next_step(u32::MAX, 1, MIN), u32::MAX, "no overflow");
    }

    #[test]
    fn off_takes_the_table_step() {
        let p = StepPolicy {
            adaptive: false,
            ..StepPolicy::default()
        };
        assert_eq!(p.next_step(8000, 1000, Duration::ZERO), 1000);
    }
}
