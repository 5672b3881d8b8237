//! One module per subcommand.

pub mod config;
pub mod measure;
pub mod run;
