//! Arrow out to Python without copying: a record batch is handed over through the Arrow
//! PyCapsule interface (`__arrow_c_stream__`), which pyarrow, polars and pandas read in place.

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{ArrayRef, RecordBatch, RecordBatchIterator};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use llem_records::{FieldKind, FieldValue};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::LlemError;

/// One record batch Python can read as an Arrow stream (`pyarrow.table(t)`,
/// `polars.from_arrow(t)`).
#[pyclass(frozen, module = "llem._native")]
pub struct ArrowTable {
    batch: RecordBatch,
}

impl ArrowTable {
    /// Wraps `batch`.
    pub fn new(batch: RecordBatch) -> Self {
        Self { batch }
    }
}

#[pymethods]
impl ArrowTable {
    /// The Arrow PyCapsule stream protocol; the schema request is not honoured (the
    /// columns are what they are), as the protocol allows.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        stream_capsule(py, self.batch.clone())
    }

    /// Number of rows.
    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }
}

/// `batch` as an `arrow_array_stream` capsule; the consumer takes the stream, or the capsule's
/// destructor releases it.
pub fn stream_capsule(py: Python<'_>, batch: RecordBatch) -> PyResult<Bound<'_, PyCapsule>> {
    let schema = batch.schema();
    let reader = RecordBatchIterator::new([Ok::<_, ArrowError>(batch)], schema);
    let stream = FFI_ArrowArrayStream::new(Box::new(reader));
    PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
}

/// A column under construction, typed by its field kind.
enum Column {
    Str(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
}

impl Column {
    fn of(kind: FieldKind) -> (Self, DataType) {
        match kind {
            FieldKind::Str | FieldKind::OptStr => (Self::Str(StringBuilder::new()), DataType::Utf8),
            FieldKind::Int | FieldKind::OptInt => (Self::Int(Int64Builder::new()), DataType::Int64),
            FieldKind::Float | FieldKind::OptFloat => {
                (Self::Float(Float64Builder::new()), DataType::Float64)
            }
            FieldKind::Bool => (Self::Bool(BooleanBuilder::new()), DataType::Boolean),
        }
    }

    fn push(&mut self, v: FieldValue<'_>) {
        match (self, v) {
            (Self::Str(b), FieldValue::Str(s)) => b.append_value(s),
            (Self::Int(b), FieldValue::Int(i)) => b.append_value(i),
            (Self::Float(b), FieldValue::Float(f)) => b.append_value(f),
            (Self::Float(b), FieldValue::Int(i)) => b.append_value(i as f64),
            (Self::Bool(b), FieldValue::Bool(x)) => b.append_value(x),
            (Self::Str(b), _) => b.append_null(),
            (Self::Int(b), _) => b.append_null(),
            (Self::Float(b), _) => b.append_null(),
            (Self::Bool(b), _) => b.append_null(),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Self::Str(mut b) => Arc::new(b.finish()),
            Self::Int(mut b) => Arc::new(b.finish()),
            Self::Float(mut b) => Arc::new(b.finish()),
            Self::Bool(mut b) => Arc::new(b.finish()),
        }
    }
}

/// A record batch of `n` rows with the named, typed `fields`; `value(row, field)` gives each
/// cell.
pub fn batch_of<'a>(
    fields: &[(&str, FieldKind)],
    n: usize,
    value: impl Fn(usize, usize) -> FieldValue<'a>,
) -> PyResult<RecordBatch> {
    let mut columns = Vec::with_capacity(fields.len());
    let mut schema = Vec::with_capacity(fields.len());
    for (j, (name, kind)) in fields.iter().enumerate() {
        let (mut c, ty) = Column::of(*kind);
        for i in 0..n {
            c.push(value(i, j));
        }
        columns.push(c.finish());
        schema.push(Field::new(*name, ty, true));
    }
    RecordBatch::try_new(Arc::new(Schema::new(schema)), columns)
        .map_err(|e| LlemError::new_err(e.to_string()))
}
