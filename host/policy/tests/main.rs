//! The integration tests of this crate, as one test binary: linking the crate and its
//! dependencies once, not once per file. Each module is the file of the same name.

mod configs;
mod defaults;
mod hostile;
mod store_limits;
mod support;
