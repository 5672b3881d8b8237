//! One module per subcommand.

pub mod config;
pub mod run;
