// `sqlx::migrate!` embeds the migration files at compile time; without this, adding a
// migration file does not rebuild the crate and the binary silently lacks it.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
