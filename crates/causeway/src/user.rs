//! `causeway user`: the users of a cluster — who may log in as a client, as
//! what role — in the users file its `[auth] users` names. Passwords are
//! stored as argon2id hashes; the file is replaced whole (written beside it,
//! then renamed), readable by its owner only, and the nodes read it again
//! within a second of a change.

use crate::login::PASSWORD_ENV;
use crate::output::write_private;
use anyhow::{bail, Context, Result};
use causeway_client::Role;
use causeway_runtime::auth::{self, User, Users};
use causeway_runtime::config;
use clap::{Args, Subcommand};
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(after_help = "\
Roles: read (transactions that only read), write (writes and deletes too),
admin (also the operator hooks: dump, DropPeerConnections, Stats).

The password of `add` is asked for twice at a terminal (typed unseen), or read
from the first line of standard input, or taken from CAUSEWAY_PASSWORD; it is
never a flag. Examples:

  causeway user add --config cluster.toml alice --role write
  printf '%s\\n' \"$PASS\" | causeway user add --users users.toml bob --role read
  causeway user list --config cluster.toml
  causeway user remove --config cluster.toml bob")]
pub struct UserArgs {
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct FileArgs {
    /// The users file itself (created by `add` if missing).
    #[arg(long, value_name = "FILE")]
    users: Option<PathBuf>,
    /// The cluster config file whose [auth] users names the users file.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum UserCommand {
    /// Add a user, or give one a new password and role.
    Add {
        #[command(flatten)]
        file: FileArgs,
        /// The user's name (letters, digits, '.', '_', '-', '@').
        name: String,
        /// What the user may do: read, write or admin.
        #[arg(long, value_parser = parse_role)]
        role: Role,
    },
    /// Remove a user: its next login is refused (sessions open now go on).
    Remove {
        #[command(flatten)]
        file: FileArgs,
        name: String,
    },
    /// List the users and their roles.
    List {
        #[command(flatten)]
        file: FileArgs,
    },
}

fn parse_role(s: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| format!("{s:?}: read, write or admin"))
}

pub fn run(args: UserArgs) -> Result<ExitCode> {
    match args.command {
        UserCommand::Add { file, name, role } => {
            auth::users::check_name(&name).map_err(anyhow::Error::msg)?;
            let path = users_file(&file)?;
            let mut users = read_or_empty(&path)?;
            let password = password(&name)?;
            let password_hash = auth::hash_password(&password).map_err(anyhow::Error::msg)?;
            let replaced = users.get(&name).is_some();
            users.upsert(User { name: name.clone(), role, password_hash });
            save(&path, &users)?;
            let did = if replaced { "updated" } else { "added" };
            println!("{did} user {name:?} ({role}) in {}", path.display());
        }
        UserCommand::Remove { file, name } => {
            let path = users_file(&file)?;
            let mut users = Users::load(&path).map_err(anyhow::Error::msg)?;
            if !users.remove(&name) {
                bail!("no user {name:?} in {}", path.display());
            }
            save(&path, &users)?;
            println!("removed user {name:?} from {}", path.display());
        }
        UserCommand::List { file } => {
            let path = users_file(&file)?;
            let users = Users::load(&path).map_err(anyhow::Error::msg)?;
            for u in users.iter() {
                println!("{}\t{}", u.name, u.role);
            }
            if users.is_empty() {
                eprintln!("{} lists no user", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The users file: given, or named by the config's `[auth] users`.
fn users_file(file: &FileArgs) -> Result<PathBuf> {
    match (&file.users, &file.config) {
        (Some(path), _) => Ok(path.clone()),
        (None, Some(config)) => {
            let plan = config::load(config)?;
            plan.auth.users_file.with_context(|| {
                format!("{} names no users file: add users = \"users.toml\" to its [auth]", config.display())
            })
        }
        (None, None) => bail!("give --users FILE or --config FILE"),
    }
}

fn read_or_empty(path: &Path) -> Result<Users> {
    if path.exists() {
        Users::load(path).map_err(anyhow::Error::msg)
    } else {
        Ok(Users::default())
    }
}

/// Replaced whole: written beside it, then renamed over it, so that a node
/// reading it meanwhile sees the old file or the new, never half of one.
fn save(path: &Path, users: &Users) -> Result<()> {
    let name = path.file_name().with_context(|| format!("{} is not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    write_private(&tmp, &users.to_toml())?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}

/// The new password: from CAUSEWAY_PASSWORD, typed twice unseen at a
/// terminal, or the first line of standard input.
fn password(user: &str) -> Result<String> {
    if let Ok(p) = std::env::var(PASSWORD_ENV) {
        return Ok(p);
    }
    if std::io::stdin().is_terminal() {
        let first = masked(&format!("password for {user}: "))?;
        let again = masked("again: ")?;
        if first != again {
            bail!("the two passwords differ");
        }
        return Ok(first);
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("cannot read the password from standard input")?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}

/// A line read at the terminal with each character shown as `*`.
fn masked(prompt: &str) -> Result<String> {
    use rustyline::highlight::{CmdKind, Highlighter};
    use std::borrow::Cow;

    struct Mask;
    impl Highlighter for Mask {
        fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
            Cow::Owned("*".repeat(line.chars().count()))
        }
        fn highlight_char(&self, _line: &str, _pos: usize, _kind: CmdKind) -> bool {
            true
        }
    }
    impl rustyline::completion::Completer for Mask {
        type Candidate = String;
    }
    impl rustyline::hint::Hinter for Mask {
        type Hint = String;
    }
    impl rustyline::validate::Validator for Mask {}
    impl rustyline::Helper for Mask {}

    let mut editor = rustyline::Editor::<Mask, rustyline::history::DefaultHistory>::new()?;
    editor.set_helper(Some(Mask));
    Ok(editor.readline(prompt)?)
}
