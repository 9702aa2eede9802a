//! `tern admin …`: operator provisioning. Each command prints one JSON object on stdout;
//! a refusal exits non-zero with the reason on stderr.

use anyhow::{Result, anyhow, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use tern_core::admin;
use tern_core::audit::Context;
use tern_core::keys;
use tern_domain::Problem;
use tern_domain::auth::{Preset, Role};
use tern_domain::crypto::MasterKey;
use tern_domain::number::NumberStatus;
use tern_domain::phone;
use tern_domain::plan::{
    self, Category, Effective, Entitlement, Feature, Meter, Overrides, RateWindow,
    SubscriptionStatus,
};
use tern_store::{Db, Org, PhoneNumber};
use uuid::Uuid;

#[derive(Debug, Subcommand)]
pub enum AdminCmd {
    /// Organisations: create, update billing and limits.
    #[command(subcommand)]
    Org(OrgCmd),
    /// Business phone numbers.
    #[command(subcommand)]
    Number(NumberCmd),
    /// Members of an organisation.
    #[command(subcommand)]
    Member(MemberCmd),
    /// API keys.
    #[command(subcommand)]
    Key(KeyCmd),
    /// Custom contact fields.
    #[command(subcommand, name = "contact-field")]
    ContactField(ContactFieldCmd),
    /// Message templates.
    #[command(subcommand)]
    Template(TemplateCmd),
}

#[derive(Debug, Subcommand)]
pub enum TemplateCmd {
    /// Fetch the organisation's templates from the network (all WABAs of its numbers) and
    /// store new ones and changes.
    Sync {
        #[arg(long)]
        org: Uuid,
    },
}

#[derive(Debug, Subcommand)]
pub enum OrgCmd {
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = plan::DEFAULT_PLAN)]
        plan: String,
    },
    Update(OrgUpdate),
    /// The organisation's effective billing state with this period's usage.
    Show {
        #[arg(long)]
        org: Uuid,
    },
}

#[derive(Debug, Args)]
pub struct OrgUpdate {
    #[arg(long)]
    org: Uuid,
    #[arg(long)]
    plan: Option<String>,
    #[arg(long = "subscription-status")]
    subscription_status: Option<String>,
    #[arg(long = "wallet-balance-minor", allow_negative_numbers = true)]
    wallet_balance_minor: Option<i64>,
    /// CATEGORY=MINOR, e.g. marketing=80
    #[arg(long = "price")]
    prices: Vec<String>,
    /// WINDOW=QUOTA, e.g. key-minute=600
    #[arg(long = "rate-limit")]
    rate_limits: Vec<String>,
    /// METER=N, e.g. messages_sent=1000
    #[arg(long = "allowance")]
    allowances: Vec<String>,
    /// ENTITLEMENT=N, e.g. contacts=5000
    #[arg(long = "limit")]
    limits: Vec<String>,
    /// NAME=on|off, e.g. public_api=off
    #[arg(long = "feature")]
    features: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum NumberCmd {
    Add {
        #[arg(long)]
        org: Uuid,
        #[arg(long = "phone-number-id")]
        phone_number_id: String,
        #[arg(long = "display-phone-number")]
        display_phone_number: String,
        #[arg(long = "waba-id")]
        waba_id: String,
        #[arg(long = "access-token")]
        access_token: String,
        #[arg(long = "throughput-mps", default_value_t = 80)]
        throughput_mps: i64,
    },
    Update {
        #[arg(long = "phone-number-id")]
        phone_number_id: String,
        #[arg(long)]
        status: Option<String>,
        #[arg(long = "throughput-mps")]
        throughput_mps: Option<i64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum MemberCmd {
    /// Adds a member; answers `invite_url` when the person has no password yet.
    Add {
        #[arg(long)]
        org: Uuid,
        #[arg(long)]
        email: String,
        #[arg(long)]
        role: String,
    },
    /// Operator recovery: a new one-time link to set a password; turns two-factor off and
    /// ends every session of the person.
    Reset {
        #[arg(long)]
        email: String,
    },
}

/// What the member commands need to print a link: the public URL and the link validity.
#[derive(Debug, Clone)]
pub struct LinkSettings {
    pub public_url: String,
    pub people: tern_core::people::PeopleSettings,
}

impl LinkSettings {
    pub fn from_config(c: &crate::config::Config) -> Self {
        Self {
            public_url: c.public_url.clone(),
            people: c.people.clone(),
        }
    }

    fn url(&self, kind: &str, token: &str) -> String {
        format!(
            "{}/app/{kind}/{token}",
            self.public_url.trim_end_matches('/')
        )
    }
}

#[derive(Debug, Subcommand)]
pub enum KeyCmd {
    Create {
        #[arg(long)]
        org: Uuid,
        #[arg(long)]
        member: Uuid,
        #[arg(long)]
        name: String,
        #[arg(
            long,
            conflicts_with = "permissions",
            required_unless_present = "permissions"
        )]
        preset: Option<String>,
        /// Comma-separated permissions, e.g. messages.read,contacts.read
        #[arg(long, value_delimiter = ',')]
        permissions: Vec<String>,
        /// `live` (the organisation's data) or `test` (its test space, answered by the
        /// built-in simulator; made with the first test key).
        #[arg(long, default_value = "live")]
        mode: String,
    },
    Revoke {
        #[arg(long = "key-id")]
        key_id: Uuid,
    },
    Rotate {
        #[arg(long = "key-id")]
        key_id: Uuid,
    },
}

#[derive(Debug, Subcommand)]
pub enum ContactFieldCmd {
    Add {
        #[arg(long)]
        org: Uuid,
        #[arg(long)]
        key: String,
        #[arg(long)]
        label: String,
        #[arg(long = "type")]
        field_type: String,
    },
}

/// Parses `admin` arguments (without the leading `admin`), for in-process callers such as
/// the demo and tests.
pub fn parse(args: &[&str]) -> Result<AdminCmd> {
    use clap::{FromArgMatches, Subcommand};
    let cmd = AdminCmd::augment_subcommands(clap::Command::new("admin").no_binary_name(true));
    let matches = cmd.try_get_matches_from(args).map_err(|e| anyhow!("{e}"))?;
    AdminCmd::from_arg_matches(&matches).map_err(|e| anyhow!("{e}"))
}

/// Like [`run`], with the Cloud API client to use for commands that reach the network
/// (`template sync`); without one, a client is built from the `TERN_*` configuration.
pub async fn run_with_cloud(
    db: &Db,
    key: &MasterKey,
    cloud: Option<&tern_cloudapi::CloudApiClient>,
    cmd: AdminCmd,
) -> Result<Value> {
    match cmd {
        AdminCmd::Template(TemplateCmd::Sync { org }) => sync_templates(db, key, cloud, org).await,
        other => run(db, key, other).await,
    }
}

/// Like [`run_with_cloud`], with the configuration the links are printed with (`tern
/// admin` itself; the other entry points read it from the environment when needed).
pub async fn run_configured(
    db: &Db,
    key: &MasterKey,
    cloud: Option<&tern_cloudapi::CloudApiClient>,
    config: &crate::config::Config,
    cmd: AdminCmd,
) -> Result<Value> {
    let links = LinkSettings::from_config(config);
    match cmd {
        AdminCmd::Member(MemberCmd::Add { org, email, role }) => {
            add_member(db, &links, org, &email, &role).await
        }
        AdminCmd::Member(MemberCmd::Reset { email }) => reset_member(db, &links, &email).await,
        other => run_with_cloud(db, key, cloud, other).await,
    }
}

fn env_links() -> Result<LinkSettings> {
    Ok(LinkSettings::from_config(&crate::config::Config::load(
        None,
    )?))
}

async fn sync_templates(
    db: &Db,
    key: &MasterKey,
    cloud: Option<&tern_cloudapi::CloudApiClient>,
    org_id: Uuid,
) -> Result<Value> {
    get_org(db, org_id).await?;
    let built;
    let cloud = match cloud {
        Some(c) => c,
        None => {
            built = crate::app::cloud_client(&crate::config::Config::load(None)?)?;
            &built
        }
    };
    let r = tern_engine::templates::sync_org(db, cloud, key, org_id).await?;
    if !r.failures.is_empty() {
        let list: Vec<String> = r
            .failures
            .iter()
            .map(|(waba, e)| format!("WABA {waba}: {e}"))
            .collect();
        bail!(
            "template sync incomplete ({} stored before the failure): {}",
            r.synced,
            list.join("; ")
        );
    }
    Ok(json!({
        "org_id": r.org_id,
        "wabas": r.wabas,
        "synced": r.synced,
        "created": r.created,
        "updated": r.updated,
        "skipped": r.skipped,
    }))
}

pub async fn run(db: &Db, key: &MasterKey, cmd: AdminCmd) -> Result<Value> {
    match cmd {
        AdminCmd::Template(TemplateCmd::Sync { org }) => sync_templates(db, key, None, org).await,
        AdminCmd::Org(OrgCmd::Create { name, plan }) => create_org(db, &name, &plan).await,
        AdminCmd::Org(OrgCmd::Update(u)) => update_org(db, u).await,
        AdminCmd::Org(OrgCmd::Show { org }) => show_org(db, org).await,
        AdminCmd::Number(NumberCmd::Add {
            org,
            phone_number_id,
            display_phone_number,
            waba_id,
            access_token,
            throughput_mps,
        }) => {
            add_number(
                db,
                key,
                org,
                &phone_number_id,
                &display_phone_number,
                &waba_id,
                &access_token,
                throughput_mps,
            )
            .await
        }
        AdminCmd::Number(NumberCmd::Update {
            phone_number_id,
            status,
            throughput_mps,
        }) => update_number(db, &phone_number_id, status.as_deref(), throughput_mps).await,
        AdminCmd::Member(MemberCmd::Add { org, email, role }) => {
            add_member(db, &env_links()?, org, &email, &role).await
        }
        AdminCmd::Member(MemberCmd::Reset { email }) => {
            reset_member(db, &env_links()?, &email).await
        }
        AdminCmd::Key(KeyCmd::Create {
            org,
            member,
            name,
            preset,
            permissions,
            mode,
        }) => {
            let mode = tern_domain::auth::Mode::parse(&mode)
                .ok_or_else(|| anyhow!("--mode must be live or test, got {mode:?}"))?;
            let grant = (preset.as_deref(), permissions.as_slice());
            create_key(db, key, org, member, &name, grant, mode).await
        }
        AdminCmd::Key(KeyCmd::Revoke { key_id }) => revoke_key(db, key_id).await,
        AdminCmd::Key(KeyCmd::Rotate { key_id }) => rotate_key(db, key_id).await,
        AdminCmd::ContactField(ContactFieldCmd::Add {
            org,
            key,
            label,
            field_type,
        }) => add_contact_field(db, org, &key, &label, &field_type).await,
    }
}

pub fn org_json(o: &Org) -> Value {
    let overrides = Overrides::from_json(&o.overrides);
    let eff = Effective::new(&o.plan, &overrides);
    let map = |pairs: Vec<(&str, Value)>| {
        Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    };
    json!({
        "id": o.id,
        "name": o.name,
        "plan": o.plan,
        "subscription_status": o.subscription_status,
        "wallet": {"balance_minor": o.wallet_balance_minor, "currency": o.wallet_currency},
        "features": map(Feature::ALL.iter().map(|f| (f.as_str(), json!(eff.has_feature(*f)))).collect()),
        "limits": map(Entitlement::ALL.iter().map(|e| (e.as_str(), json!(eff.limit(*e)))).collect()),
        "allowances": map(Meter::ALL.iter().map(|m| (m.as_str(), json!(eff.allowance(*m)))).collect()),
        "rate_limits": map(RateWindow::ALL.iter().map(|w| (w.as_str(), json!(eff.rate_limit(*w))))
            .chain([(plan::BURST, json!(eff.burst()))]).collect()),
        "prices_minor": map(Category::ALL.iter().map(|c| (c.as_str(), json!(eff.price_minor(*c)))).collect()),
        "overrides": overrides.to_json(),
        "created_at": tern_domain::time::format_ms(o.created_at),
        "updated_at": tern_domain::time::format_ms(o.updated_at),
    })
}

async fn create_org(db: &Db, name: &str, plan_name: &str) -> Result<Value> {
    let name = name.trim();
    if name.is_empty() {
        bail!("--name must not be empty");
    }
    if plan::plan(plan_name).is_none() {
        bail!(
            "unknown plan {plan_name:?}; plans are: {}",
            plan::plan_names()
        );
    }
    let org = admin::create_org(db, name, plan_name)
        .await
        .map_err(refused)?;
    Ok(org_json(&org))
}

/// [`org_json`] plus the current billing period and each meter's use in it.
async fn show_org(db: &Db, id: Uuid) -> Result<Value> {
    let org = get_org(db, id).await?;
    let overrides = Overrides::from_json(&org.overrides);
    let eff = Effective::new(&org.plan, &overrides);
    let (start, end) = plan::billing_period(org.billing_period_start, tern_domain::time::now_ms());
    let mut usage = serde_json::Map::new();
    for m in Meter::ALL {
        let used = db
            .usage_in_period(id, m.as_str(), start)
            .await
            .map_err(|e| anyhow!("cannot read usage: {e}"))?;
        usage.insert(
            m.as_str().into(),
            json!({"used": used, "allowance": eff.allowance(*m)}),
        );
    }
    let mut v = org_json(&org);
    v["billing_period"] = json!({
        "start": tern_domain::time::format_ms(start),
        "end": tern_domain::time::format_ms(end),
    });
    v["usage"] = Value::Object(usage);
    Ok(v)
}

async fn get_org(db: &Db, id: Uuid) -> Result<Org> {
    admin::get_org(db, id).await.map_err(refused)
}

/// A refusal of the core as the CLI reports it: `code: message`.
fn refused(p: Problem) -> anyhow::Error {
    anyhow!("{}: {}", p.code.as_str(), p.message)
}

fn parse_u64(kind: &str, name: &str, v: &str) -> Result<u64> {
    v.parse()
        .map_err(|_| anyhow!("{kind} {name}: {v:?} is not a non-negative whole number"))
}

async fn update_org(db: &Db, u: OrgUpdate) -> Result<Value> {
    let mut org = get_org(db, u.org).await?;
    let mut o = Overrides::from_json(&org.overrides);
    if let Some(p) = u.plan {
        if plan::plan(&p).is_none() {
            bail!("unknown plan {p:?}; plans are: {}", plan::plan_names());
        }
        org.plan = p;
    }
    if let Some(s) = u.subscription_status {
        org.subscription_status = SubscriptionStatus::parse(&s).ok_or_else(|| {
            anyhow!(
                "unknown subscription status {s:?}; use one of: {}",
                SubscriptionStatus::names()
            )
        })?;
    }
    let wallet_target = u.wallet_balance_minor;
    for a in &u.prices {
        let (k, v) = plan::parse_assignment(a)
            .ok_or_else(|| anyhow!("--price takes CATEGORY=MINOR, got {a:?}"))?;
        let c = Category::parse(k)
            .ok_or_else(|| anyhow!("unknown category {k:?}; use one of: {}", Category::names()))?;
        let v: i64 = v
            .parse()
            .ok()
            .filter(|v| *v >= 0)
            .ok_or_else(|| anyhow!("price {k}: {v:?} is not a non-negative whole number"))?;
        o.prices_minor.insert(c.as_str().into(), v);
    }
    for a in &u.rate_limits {
        let (k, v) = plan::parse_assignment(a)
            .ok_or_else(|| anyhow!("--rate-limit takes WINDOW=QUOTA, got {a:?}"))?;
        let name = match RateWindow::parse(k) {
            Some(w) => w.as_str(),
            None if k == plan::BURST => plan::BURST,
            None => bail!(
                "unknown rate-limit window {k:?}; use one of: {}, {}",
                RateWindow::names(),
                plan::BURST
            ),
        };
        o.rate_limits
            .insert(name.into(), parse_u64("rate limit", k, v)?);
    }
    for a in &u.allowances {
        let (k, v) = plan::parse_assignment(a)
            .ok_or_else(|| anyhow!("--allowance takes METER=N, got {a:?}"))?;
        let m = Meter::parse(k)
            .ok_or_else(|| anyhow!("unknown meter {k:?}; use one of: {}", Meter::names()))?;
        o.allowances
            .insert(m.as_str().into(), parse_u64("allowance", k, v)?);
    }
    for a in &u.limits {
        let (k, v) = plan::parse_assignment(a)
            .ok_or_else(|| anyhow!("--limit takes ENTITLEMENT=N, got {a:?}"))?;
        let e = Entitlement::parse(k).ok_or_else(|| {
            anyhow!(
                "unknown entitlement {k:?}; use one of: {}",
                Entitlement::names()
            )
        })?;
        o.limits
            .insert(e.as_str().into(), parse_u64("limit", k, v)?);
    }
    for a in &u.features {
        let (k, v) = plan::parse_assignment(a)
            .ok_or_else(|| anyhow!("--feature takes NAME=on|off, got {a:?}"))?;
        let f = Feature::parse(k)
            .ok_or_else(|| anyhow!("unknown feature {k:?}; use one of: {}", Feature::names()))?;
        let on = match v {
            "on" | "true" => true,
            "off" | "false" => false,
            _ => bail!("feature {k}: use on or off, got {v:?}"),
        };
        o.features.insert(f.as_str().into(), on);
    }
    org.overrides = o.to_json();
    let org = admin::update_org(db, org, wallet_target)
        .await
        .map_err(refused)?;
    Ok(org_json(&org))
}

fn number_json(n: &PhoneNumber) -> Value {
    json!({
        "id": n.id,
        "org_id": n.org_id,
        "display_phone_number": n.display_phone_number,
        "waba_id": n.waba_id,
        "status": n.status.as_str(),
        "throughput_mps": n.throughput_mps,
        "created_at": tern_domain::time::format_ms(n.created_at),
        "updated_at": tern_domain::time::format_ms(n.updated_at),
    })
}

fn check_network_id(what: &str, v: &str) -> Result<()> {
    if v.is_empty()
        || v.len() > 64
        || !v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        bail!("{what} must be 1 to 64 letters, digits, '_' or '-', got {v:?}");
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn add_number(
    db: &Db,
    key: &MasterKey,
    org_id: Uuid,
    pnid: &str,
    display: &str,
    waba: &str,
    token: &str,
    mps: i64,
) -> Result<Value> {
    check_network_id("--phone-number-id", pnid)?;
    check_network_id("--waba-id", waba)?;
    let display = phone::parse_international(display)
        .map_err(|e| anyhow!("--display-phone-number {e}"))?
        .e164;
    if token.trim().is_empty() {
        bail!("--access-token must not be empty");
    }
    if !(1..=10_000).contains(&mps) {
        bail!("--throughput-mps must be from 1 to 10000");
    }
    let n = admin::add_number(
        db,
        key,
        admin::NewNumber {
            org_id,
            phone_number_id: pnid,
            display_phone_number: display,
            waba_id: waba,
            access_token: token,
            throughput_mps: mps,
        },
    )
    .await
    .map_err(refused)?;
    Ok(number_json(&n))
}

async fn update_number(
    db: &Db,
    pnid: &str,
    status: Option<&str>,
    mps: Option<i64>,
) -> Result<Value> {
    let status = match status {
        None => None,
        Some(s) => Some(
            NumberStatus::parse(s)
                .ok_or_else(|| anyhow!("--status must be connected or disconnected, got {s:?}"))?,
        ),
    };
    if let Some(m) = mps
        && !(1..=10_000).contains(&m)
    {
        bail!("--throughput-mps must be from 1 to 10000");
    }
    if status.is_none() && mps.is_none() {
        bail!("nothing to update: give --status and/or --throughput-mps");
    }
    let n = admin::update_number(db, pnid, status, mps)
        .await
        .map_err(refused)?;
    Ok(number_json(&n))
}

async fn add_member(
    db: &Db,
    links: &LinkSettings,
    org_id: Uuid,
    email: &str,
    role: &str,
) -> Result<Value> {
    let role = Role::parse(role)
        .ok_or_else(|| anyhow!("--role must be owner, admin or developer, got {role:?}"))?;
    let email = email.trim().to_lowercase();
    let valid = email
        .split_once('@')
        .is_some_and(|(a, b)| !a.is_empty() && b.contains('.') && !b.starts_with('.'));
    if !valid || email.contains(char::is_whitespace) {
        bail!("--email {email:?} is not an e-mail address");
    }
    let invited = tern_core::people::invite_in(
        db,
        &links.people,
        &tern_core::audit::Context::operator(),
        org_id,
        &email,
        role,
        tern_core::people::Inviter::Operator,
    )
    .await
    .map_err(refused)?;
    let m = invited.member;
    let mut out = json!({"id": m.id, "org_id": m.org_id, "email": m.email, "role": m.role});
    if let Some(token) = invited.link {
        out["invite_url"] = json!(links.url("invite", &token));
    }
    Ok(out)
}

async fn reset_member(db: &Db, links: &LinkSettings, email: &str) -> Result<Value> {
    let email = email.trim().to_lowercase();
    let token = tern_core::people::reset_in(
        db,
        &links.people,
        &tern_core::audit::Context::operator(),
        &email,
    )
    .await
    .map_err(refused)?;
    Ok(json!({"email": email, "reset_url": links.url("reset", &token)}))
}

async fn create_key(
    db: &Db,
    master_key: &MasterKey,
    org_id: Uuid,
    member_id: Uuid,
    name: &str,
    (preset, permissions): (Option<&str>, &[String]),
    mode: tern_domain::auth::Mode,
) -> Result<Value> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > keys::MAX_NAME_CHARS {
        bail!("--name must be 1 to 100 characters");
    }
    let preset = match preset {
        Some(p) => Some(Preset::parse(p).ok_or_else(|| {
            anyhow!("unknown preset {p:?}; use send_messages, read_only or full_access")
        })?),
        None => None,
    };
    let new = keys::NewKey {
        member_id,
        name,
        preset,
        permissions,
        mode,
    };
    let k = keys::create(db, master_key, &Context::operator(), org_id, new)
        .await
        .map_err(refused)?;
    Ok(
        json!({"id": k.key.id, "key": k.plaintext, "permissions": k.key.permissions,
        "mode": k.key.mode}),
    )
}

/// The organisation of key `id` (the CLI names the key only), or the use case's 404.
async fn org_of_key(db: &Db, id: Uuid) -> Result<Uuid> {
    match db.get_api_key(id).await? {
        Some(k) => Ok(k.org_id),
        None => Err(refused(
            Problem::not_found().with_message(format!("API key {id} does not exist")),
        )),
    }
}

async fn revoke_key(db: &Db, id: Uuid) -> Result<Value> {
    let org_id = org_of_key(db, id).await?;
    let k = keys::revoke(db, &Context::operator(), org_id, id)
        .await
        .map_err(refused)?;
    Ok(json!({
        "id": k.id,
        "revoked_at": k.revoked_at.map(tern_domain::time::format_ms),
    }))
}

async fn rotate_key(db: &Db, id: Uuid) -> Result<Value> {
    let org_id = org_of_key(db, id).await?;
    let k = keys::rotate(db, &Context::operator(), org_id, id)
        .await
        .map_err(refused)?;
    Ok(json!({"id": k.key.id, "key": k.plaintext}))
}

async fn add_contact_field(
    db: &Db,
    org_id: Uuid,
    key: &str,
    label: &str,
    field_type: &str,
) -> Result<Value> {
    if let Err(m) = tern_domain::contact::check_field_key(key) {
        bail!("--key {m}, got {key:?}");
    }
    if label.trim().is_empty() {
        bail!("--label must not be empty");
    }
    if !tern_domain::contact::FIELD_TYPES.contains(&field_type) {
        bail!("--type must be text, number, date or boolean, got {field_type:?}");
    }
    let f = admin::add_contact_field(db, org_id, key, label.trim(), field_type)
        .await
        .map_err(refused)?;
    Ok(
        json!({"id": f.id, "org_id": f.org_id, "key": f.key, "label": f.label, "type": f.field_type}),
    )
}
