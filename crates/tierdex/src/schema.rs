//! The document model: an external id, a title and a body.

use serde::{Deserialize, Serialize};

pub use crate::common::{DocId, TERMINATED};

/// One document as read from a corpus and as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Document {
    /// External identifier (stored, not indexed).
    pub id: String,
    /// Title text (indexed with positions and offsets, stored).
    pub title: String,
    /// Body text (indexed with positions and offsets, stored).
    pub body: String,
}

/// An indexed text field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    /// The document title.
    Title = 0,
    /// The document body.
    Body = 1,
}

impl Field {
    /// All indexed fields, in id order.
    pub const ALL: [Field; 2] = [Field::Title, Field::Body];

    /// Number of indexed fields.
    pub const COUNT: usize = 2;

    /// The field's name as written in queries (`title:`, `body:`).
    pub fn name(self) -> &'static str {
        match self {
            Field::Title => "title",
            Field::Body => "body",
        }
    }

    /// Looks a field up by its query name.
    pub fn from_name(name: &str) -> Option<Field> {
        match name {
            "title" => Some(Field::Title),
            "body" => Some(Field::Body),
            _ => None,
        }
    }

    /// Dense numeric id (0 for title, 1 for body).
    pub fn id(self) -> u8 {
        self as u8
    }

    /// Inverse of [`Field::id`].
    pub fn from_id(id: u8) -> Option<Field> {
        match id {
            0 => Some(Field::Title),
            1 => Some(Field::Body),
            _ => None,
        }
    }

    /// The field's text in `doc`.
    pub fn text(self, doc: &Document) -> &str {
        match self {
            Field::Title => &doc.title,
            Field::Body => &doc.body,
        }
    }
}
