//! TEMPORARY STUB of the coordinator's session layer (helpers/session-api.md), only so the
//! keys and webhooks pages compile before it lands; replaced by the real file on merge.
#![allow(dead_code, unused_variables)]

use crate::AppState;
use crate::frame::{Flash, FlashKind, Frame, Nav};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use tern_domain::auth::Role;

#[derive(Clone)]
pub struct Current {
    pub csrf: String,
    pub flash: Vec<Flash>,
}

pub struct Signed(pub Current);
impl Signed {
    pub fn frame(&self, nav: Nav) -> Frame {
        unimplemented!()
    }
    pub fn ctx(&self) -> tern_core::audit::Context {
        unimplemented!()
    }
    pub fn confirmed(&self, state: &AppState) -> bool {
        false
    }
}

pub struct OrgMember {
    pub signed: Signed,
    pub org: tern_store::Org,
    pub member: tern_store::Member,
}
impl OrgMember {
    pub fn role(&self) -> Role {
        self.member.role
    }
    pub fn frame(&self, nav: Nav) -> Frame {
        self.signed.frame(nav)
    }
    pub fn ctx(&self) -> tern_core::audit::Context {
        self.signed.ctx()
    }
    pub fn confirmed(&self, state: &AppState) -> bool {
        self.signed.confirmed(state)
    }
}

impl FromRequestParts<AppState> for OrgMember {
    type Rejection = Response;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        Err(Redirect::to("/app/sign-in").into_response())
    }
}

pub async fn require_confirmation(
    state: &AppState,
    me: &Signed,
    secret: Option<&str>,
) -> Result<(), String> {
    Err("Enter your password to confirm it is you.".into())
}

pub fn confirm_label(me: &Signed) -> &'static str {
    "Your password"
}

pub fn redirect_with_flash(state: &AppState, to: &str, kind: FlashKind, text: &str) -> Response {
    Redirect::to(to).into_response()
}
