//! The parts of `scripts/soak` worth sharing and testing on their own: child processes killed
//! by PID, the on-disk duplicate check (an external merge sort) and a seeded random source.
//! The orchestrator (`src/bin/soak/`) and its worker (`src/bin/soak_worker/`) are built on them;
//! docs/soak.md says what the soak runs and what it proves.

pub mod check;
pub mod child;
pub mod rng;
pub mod seq;
