//! One module per endpoint (the two issuing endpoints share one, and their wait loop).

pub mod expid;
pub mod healthz;
pub mod issue;
pub mod makeid;
pub mod metrics;
pub mod transtime;
