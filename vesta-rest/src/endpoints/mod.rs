//! One module per endpoint (the two issuing endpoints share one, and their wait loop; so do
//! the three segment endpoints).

pub mod console;
pub mod expid;
pub mod healthz;
pub mod issue;
pub mod leaf;
pub mod makeid;
pub mod metrics;
pub mod segment;
pub mod transtime;
