//! The query string of a request: the shared parser of `vesta_service::query` (the console's
//! forms use it too), whose refusals are 400s here.

pub use vesta_service::query::{BadRequest, Query, shorten};

use crate::error::ApiError;

/// A refused parameter is a 400 with the parser's sentence.
impl From<BadRequest> for ApiError {
    fn from(e: BadRequest) -> Self {
        ApiError::bad_request(e.message)
    }
}
