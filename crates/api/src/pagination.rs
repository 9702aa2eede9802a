//! The list primitive: `limit` (1–100, default 25) and an opaque signed `cursor`, with
//! pages shaped `{"data": [...], "next_cursor": "..." | null}`.

use crate::auth::AuthContext;
use crate::error::ApiError;
use crate::extract::QueryParams;
use crate::state::AppState;
use serde::Serialize;
use tern_domain::cursor;
use tern_domain::{FieldError, Problem};
use utoipa::ToSchema;

/// A page of a list.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    /// The items of this page.
    pub data: Vec<T>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A decoded list request.
pub struct ListRequest {
    pub limit: i64,
    /// Keyset position after which the page starts.
    pub after: Option<Vec<String>>,
    fingerprint: String,
}

/// A list's query string, read in one place for every list: the list's own filters (named
/// by its handler) plus `limit` and `cursor`. Unknown, repeated or empty parameters are
/// refused at once; a filter's problem is kept and answered together with those of `limit`
/// and `cursor`, so a request names every problem at once.
pub struct ListQuery {
    filters: &'static [&'static str],
    params: QueryParams,
    errors: Vec<FieldError>,
}

impl ListQuery {
    pub fn parse(raw: Option<&str>, filters: &'static [&'static str]) -> Result<Self, ApiError> {
        let mut allowed = filters.to_vec();
        allowed.extend(["limit", "cursor"]);
        Ok(ListQuery {
            filters,
            params: QueryParams::parse(raw, &allowed)?,
            errors: Vec::new(),
        })
    }

    /// A filter's value as given.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.params.get(name)
    }

    /// A filter read by `read`; a value it refuses is kept as the filter's problem.
    pub fn filter<T>(
        &mut self,
        name: &'static str,
        read: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        match read(self.params.get(name)?) {
            Ok(v) => Some(v),
            Err(m) => {
                self.errors.push(FieldError::new(name, m));
                None
            }
        }
    }

    /// Adds a problem found across filters (e.g. two that cannot be combined).
    pub fn problem(&mut self, name: &str, message: impl Into<String>) {
        self.errors.push(FieldError::new(name, message));
    }

    /// The request: `limit` and `cursor` decoded, the cursor bound to `list`, to `scope`
    /// (what the path names) and to every filter's value, so a cursor only continues the
    /// query that produced it. Every problem found so far is answered here.
    pub fn finish(
        self,
        state: &AppState,
        auth: &AuthContext,
        list: &str,
        scope: &[(&str, Option<&str>)],
    ) -> Result<ListRequest, ApiError> {
        let mut bound: Vec<(&str, Option<&str>)> = scope.to_vec();
        bound.extend(self.filters.iter().map(|f| (*f, self.params.get(f))));
        ListRequest::decode(state, auth, &self.params, list, &bound, self.errors)
    }
}

impl ListRequest {
    /// `filters` are the list's own filter values; they are bound into the cursor so a
    /// cursor only continues the query that produced it.
    fn decode(
        state: &AppState,
        auth: &AuthContext,
        params: &QueryParams,
        list: &str,
        filters: &[(&str, Option<&str>)],
        mut errors: Vec<FieldError>,
    ) -> Result<Self, ApiError> {
        let limit = cursor::parse_limit(params.get("limit")).unwrap_or_else(|m| {
            errors.push(FieldError::new("limit", m));
            25
        });
        let fingerprint = cursor::fingerprint(list, filters);
        let after = match params.get("cursor") {
            None => None,
            Some(c) => match cursor::decode(&state.core.key, c, auth.org_id, &fingerprint) {
                Ok(pos) => Some(pos),
                Err(_) => {
                    errors.push(FieldError::new(
                        "cursor",
                        "is not valid for this list; pass back next_cursor unchanged with the same filters",
                    ));
                    None
                }
            },
        };
        if !errors.is_empty() {
            return Err(ApiError(Problem::validation(errors)));
        }
        Ok(ListRequest {
            limit,
            after,
            fingerprint,
        })
    }

    /// The position of lists ordered by id alone.
    pub fn after_id(&self) -> Result<Option<uuid::Uuid>, ApiError> {
        let bad = || ApiError(Problem::field("cursor", "is not valid for this list"));
        match self.after.as_deref() {
            None => Ok(None),
            Some([id]) => uuid::Uuid::parse_str(id).map(Some).map_err(|_| bad()),
            Some(_) => Err(bad()),
        }
    }

    /// The position of lists ordered by `(timestamp, id)`.
    pub fn after_ts_id(&self) -> Result<Option<(i64, uuid::Uuid)>, ApiError> {
        let bad = || ApiError(Problem::field("cursor", "is not valid for this list"));
        match self.after.as_deref() {
            None => Ok(None),
            Some([ts, id]) => match (ts.parse::<i64>(), uuid::Uuid::parse_str(id)) {
                (Ok(ts), Ok(id)) => Ok(Some((ts, id))),
                _ => Err(bad()),
            },
            Some(_) => Err(bad()),
        }
    }

    /// Rows to fetch: one more than the page, to learn whether a next page exists.
    pub fn fetch_limit(&self) -> i64 {
        self.limit + 1
    }

    /// Builds the page from `limit + 1` fetched rows; `position` gives an item's keyset
    /// position.
    pub fn page<R, T>(
        &self,
        state: &AppState,
        auth: &AuthContext,
        mut rows: Vec<R>,
        position: impl Fn(&R) -> Vec<String>,
        to_dto: impl FnMut(R) -> T,
    ) -> Page<T> {
        let has_more = rows.len() as i64 > self.limit;
        rows.truncate(self.limit as usize);
        let next_cursor = if has_more {
            rows.last().map(|last| {
                cursor::encode(
                    &state.core.key,
                    auth.org_id,
                    &self.fingerprint,
                    position(last),
                )
            })
        } else {
            None
        };
        Page {
            data: rows.into_iter().map(to_dto).collect(),
            next_cursor,
        }
    }
}
