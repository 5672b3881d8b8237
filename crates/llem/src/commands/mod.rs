//! One module per subcommand.

pub mod config;
pub mod execute;
pub mod measure;
pub mod run;
