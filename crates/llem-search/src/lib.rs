//! llem's search: which configuration of a sweep is best under constraints, found by measuring
//! part of the grid. [`Space`] turns the sweep's configurations into points of a mixed
//! (numeric and categorical) space; [`Search::step`] goes from the measurements so far to the
//! next candidates to measure, or to the answer; [`sim`] builds response surfaces with known
//! optima to prove that it finds them. It runs nothing itself: the study runner measures what
//! it proposes. Why this algorithm: `docs/search.md`.

mod draw;
mod goal;
mod gp;
mod linalg;
mod search;
pub mod sim;
mod space;

pub use goal::{Goal, Limit};
pub use gp::{Gp, Hyper, Point, Prior};
pub use search::{
    Estimate, Judgement, Next, Observation, Search, Settings, Status, Step, StopReason,
};
pub use space::{Axis, AxisKind, Space};
