//! `causeway shell`: begin, read, write and commit by hand, or from a script.

use anyhow::{anyhow, Context, Result};
use causeway_client::{Client, ClientOptions, ClientTls, Error, SessionToken};
use clap::Args;
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;
use tokio::runtime::Runtime;

#[derive(Args, Debug)]
pub struct ShellArgs {
    /// The server to connect to (`host:port`): any server of the DC whose data the shell should see.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7100")]
    connect: String,
    /// Speak TLS, trusting this CA certificate (the `ca.pem` that
    /// `causeway certs` wrote for the cluster): needed by a cluster whose
    /// config has a [tls] table.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    #[command(flatten)]
    login: crate::login::LoginArgs,
}

pub const HELP: &str = r#"Commands (one per line; keys and values are text, "quoted" if they hold spaces):
  begin                start a transaction
  read K [K...]        read keys in the running transaction
  write K V            write V under K in the running transaction
  delete K             delete K in the running transaction (reads then find no value)
  commit               commit the running transaction (prints its commit stamp)
  abort                abandon the running transaction
  ro K [K...]          a read-only transaction: read keys in one round trip, nothing to commit
  token                print the session token (between transactions)
  resume TOKEN         adopt a session token exported on a connection to the same DC
  info                 the server, its DC, the protocol and the size limits
  dump                 every key the server holds, with its newest applied value (an operator hook)
  connect [ADDR]       open a new connection (a new session), to ADDR or the same server
  help                 this text
  quit, exit           leave (so does Ctrl-D)

A value that is missing prints as (none). In quoted text, \" \\ \n \t and \xNN (any byte)
are escapes; values that are not plain text print the same way. Lines starting with # are
comments.

A command that fails inside a transaction leaves it unable to commit: `commit` then
aborts it and says which command was refused, so a transaction never commits in part.

When standard input is not a terminal, the shell runs it as a script: results go to
standard output, errors to standard error, and the exit status is 1 if any command
failed or the script ended inside a transaction (which is aborted), 0 otherwise. A
script stops at the first error that closes the connection."#;

pub fn run(args: ShellArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start tokio")?;
    let tls = match &args.ca {
        Some(ca) => Some(ClientTls::from_ca_file(ca).map_err(|e| anyhow!("--ca: {e}"))?),
        None => None,
    };
    let credentials = args.login.credentials()?;
    let options = ClientOptions { name: "causeway-shell".into(), tls, credentials, ..ClientOptions::default() };
    // The error's text already names its cause: no `{:#}` chain.
    let client = runtime
        .block_on(Client::connect_with(args.connect.as_str(), options.clone()))
        .map_err(|e| anyhow!(e.to_string()))?;
    let mut shell = Shell { runtime, client, options, addr: args.connect, in_txn: false, warned_eof: false };
    if std::io::stdin().is_terminal() {
        shell.interactive();
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(if shell.script(std::io::stdin().lock()) { ExitCode::SUCCESS } else { ExitCode::from(1) })
    }
}

struct Shell {
    runtime: Runtime,
    client: Client,
    /// How `connect` connects again.
    options: ClientOptions,
    /// The address of the current connection.
    addr: String,
    /// Whether a transaction is running, as far as this shell knows (for the prompt).
    in_txn: bool,
    /// Leaving inside a transaction was asked for once already.
    warned_eof: bool,
}

/// What to do after a command.
enum Flow {
    Continue,
    Quit,
}

impl Shell {
    fn interactive(&mut self) {
        let mut editor = match rustyline::DefaultEditor::with_config(
            rustyline::Config::builder().auto_add_history(true).max_history_size(1000).expect("a valid size").build(),
        ) {
            Ok(editor) => editor,
            Err(e) => {
                eprintln!("no line editing ({e}); reading plain lines");
                self.script(std::io::stdin().lock());
                return;
            }
        };
        let history = history_file();
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        self.banner();
        println!("type help for the commands");
        loop {
            match editor.readline(self.prompt()) {
                Ok(line) => {
                    self.warned_eof = false;
                    match self.execute(&line) {
                        Ok(Flow::Continue) => {}
                        Ok(Flow::Quit) if self.leave_now() => break,
                        Ok(Flow::Quit) => {}
                        Err(message) => {
                            eprintln!("error: {message}");
                            if self.client.is_closed() {
                                eprintln!("the connection is closed; `connect` opens a new one");
                            }
                        }
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => continue,
                Err(rustyline::error::ReadlineError::Eof) if self.leave_now() => break,
                Err(rustyline::error::ReadlineError::Eof) => continue,
                Err(e) => {
                    eprintln!("error: cannot read the terminal: {e}");
                    break;
                }
            }
        }
        if let Some(path) = &history {
            let _ = editor.save_history(path);
        }
    }

    /// The prompt: whether the shell is connected, and in a transaction.
    fn prompt(&self) -> &'static str {
        match (self.client.is_closed(), self.in_txn) {
            (true, _) => "causeway (disconnected)> ",
            (false, true) => "causeway [tx]> ",
            (false, false) => "causeway> ",
        }
    }

    /// What `info` prints: the server and its limits, or that there is none.
    fn info(&self) -> Vec<String> {
        let s = self.client.server();
        if self.client.is_closed() {
            return vec![
                format!("server     none: the connection to {} at {} is closed", s.node, self.addr),
                "           `connect` opens a new one".to_string(),
            ];
        }
        let l = &s.limits;
        vec![
            format!("server     {} at {}", s.node, self.addr),
            format!("dc         {}", s.dc),
            format!("protocol   {}", s.protocol),
            format!("wire       version {}", s.version),
            format!(
                "limits     key {} bytes, value {} bytes, {} keys per read, {} writes per transaction",
                l.max_key_bytes, l.max_value_bytes, l.max_keys_per_read, l.max_writes_per_txn
            ),
        ]
    }

    /// Whether to leave at `quit` or Ctrl-D: inside a transaction, only when
    /// asked a second time (the transaction is then aborted).
    fn leave_now(&mut self) -> bool {
        if !self.in_txn || self.client.is_closed() {
            return true;
        }
        if !self.warned_eof {
            self.warned_eof = true;
            eprintln!("a transaction is open and leaving aborts it: commit or abort it, or leave again to abort it");
            return false;
        }
        let _ = self.runtime.block_on(self.client.abort());
        eprintln!("aborted the open transaction");
        true
    }

    /// Runs commands from `input`, one a line; whether all succeeded (and
    /// no transaction was left open: it is aborted, and said so).
    fn script(&mut self, input: impl BufRead) -> bool {
        let ok = self.script_lines(input);
        if self.in_txn && !self.client.is_closed() {
            eprintln!("error: the script ended inside a transaction; it was aborted, nothing of it committed");
            let _ = self.runtime.block_on(self.client.abort());
            self.in_txn = false;
            return false;
        }
        ok
    }

    fn script_lines(&mut self, mut input: impl BufRead) -> bool {
        let mut ok = true;
        let mut buf = Vec::new();
        for number in 1.. {
            buf.clear();
            match input.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    eprintln!("error: cannot read standard input: {e}");
                    return false;
                }
            }
            let result = match std::str::from_utf8(&buf) {
                Ok(line) => self.execute(line),
                Err(_) => Err("the line is not UTF-8 (write \\xNN for a byte)".into()),
            };
            match result {
                Ok(Flow::Continue) => {}
                Ok(Flow::Quit) => break,
                Err(message) => {
                    eprintln!("error: line {number}: {message}");
                    ok = false;
                    if self.client.is_closed() {
                        eprintln!("error: the connection is closed; stopping");
                        break;
                    }
                }
            }
        }
        ok
    }

    fn banner(&self) {
        let s = self.client.server();
        println!("connected to {} at {} (DC {}, protocol {})", s.node, self.addr, s.dc, s.protocol);
    }

    /// Runs one line; prints its results on standard output.
    fn execute(&mut self, line: &str) -> Result<Flow, String> {
        let words = split(line)?;
        let Some((command, args)) = words.split_first() else { return Ok(Flow::Continue) };
        let command = String::from_utf8_lossy(command).to_lowercase();
        let arity = |min: usize, max: usize, usage: &str| {
            if args.len() < min || args.len() > max {
                Err(format!("usage: {usage}"))
            } else {
                Ok(())
            }
        };
        match command.as_str() {
            "help" | "?" => {
                arity(0, 0, "help")?;
                println!("{HELP}");
            }
            "quit" | "exit" => {
                arity(0, 0, "quit")?;
                return Ok(Flow::Quit);
            }
            "begin" => {
                arity(0, 0, "begin")?;
                done(&mut self.in_txn, self.runtime.block_on(self.client.begin()))?;
                self.in_txn = true;
                println!("started");
            }
            "read" => {
                arity(1, usize::MAX, "read K [K...]")?;
                let values = done(&mut self.in_txn, self.runtime.block_on(self.client.read(args)))?;
                print_values(args, &values);
            }
            "write" => {
                arity(2, 2, "write K V")?;
                let (key, value) = (args[0].clone(), args[1].clone());
                // Wait for the acknowledgement, so that an error belongs to this line.
                let client = &mut self.client;
                let result = self.runtime.block_on(async move {
                    client.write(key, value).await?;
                    client.confirm_writes().await
                });
                done(&mut self.in_txn, result)?;
                println!("written");
            }
            "delete" | "del" => {
                arity(1, 1, "delete K")?;
                let key = args[0].clone();
                // Wait for the acknowledgement, so that an error belongs to this line.
                let client = &mut self.client;
                let result = self.runtime.block_on(async move {
                    client.delete(key).await?;
                    client.confirm_writes().await
                });
                done(&mut self.in_txn, result)?;
                println!("deleted");
            }
            "commit" => {
                arity(0, 0, "commit")?;
                let committed = self.runtime.block_on(self.client.commit());
                // However it ended, the transaction is over.
                self.in_txn = false;
                let stamp = done(&mut self.in_txn, committed)?;
                match stamp {
                    Some(s) => println!("committed at ts={} dc={} txid={}", s.ts, s.dc, s.txid),
                    None => println!("committed (no writes)"),
                }
            }
            "abort" => {
                arity(0, 0, "abort")?;
                done(&mut self.in_txn, self.runtime.block_on(self.client.abort()))?;
                self.in_txn = false;
                println!("aborted");
            }
            "ro" => {
                arity(1, usize::MAX, "ro K [K...]")?;
                let values = done(&mut self.in_txn, self.runtime.block_on(self.client.read_only(args)))?;
                print_values(args, &values);
            }
            "token" => {
                arity(0, 0, "token")?;
                let token = done(&mut self.in_txn, self.runtime.block_on(self.client.export_session()))?;
                println!("{token}");
            }
            "resume" => {
                arity(1, 1, "resume TOKEN")?;
                let token: SessionToken = std::str::from_utf8(&args[0])
                    .map_err(|_| "a token is hex text".to_string())?
                    .parse()
                    .map_err(|e: Error| e.to_string())?;
                done(&mut self.in_txn, self.runtime.block_on(self.client.resume_session(&token)))?;
                println!("resumed");
            }
            "info" => {
                arity(0, 0, "info")?;
                for line in self.info() {
                    println!("{line}");
                }
            }
            "dump" => {
                arity(0, 0, "dump")?;
                // Page by page, printed as they come: any size works.
                let mut after = None;
                loop {
                    let page = done(&mut self.in_txn, self.runtime.block_on(self.client.dump_page(after)))?;
                    for (k, v) in &page.entries {
                        println!("{} = {}", show(k), show(v));
                    }
                    after = page.next.clone();
                    if after.is_none() {
                        if page.is_partial() {
                            println!("(partial: this server holds only some of the partitions)");
                        }
                        break;
                    }
                }
            }
            "connect" => {
                arity(0, 1, "connect [ADDR]")?;
                let addr = match args.first() {
                    Some(a) => String::from_utf8(a.clone()).map_err(|_| "an address is text".to_string())?,
                    None => self.addr.clone(),
                };
                let client = self.runtime.block_on(Client::connect_with(addr.as_str(), self.options.clone()));
                self.client = client.map_err(|e| e.to_string())?;
                self.addr = addr;
                self.in_txn = false;
                self.banner();
            }
            other => return Err(format!("unknown command {other:?}; type help for the commands")),
        }
        Ok(Flow::Continue)
    }
}

/// Notes what a client call's result says about the transaction (for the
/// prompt), and turns its error into a message.
fn done<T>(in_txn: &mut bool, result: Result<T, Error>) -> Result<T, String> {
    match &result {
        Err(
            Error::UnknownTransaction | Error::NoActiveTransaction | Error::RefusedEarlier { .. } | Error::Aborted(_),
        ) => *in_txn = false,
        // The connection is gone, and its session and transaction with it.
        Err(e) if e.is_fatal() => *in_txn = false,
        _ => {}
    }
    result.map_err(|e| e.to_string())
}

fn print_values(keys: &[Vec<u8>], values: &[Option<causeway_client::Bytes>]) {
    for (k, v) in keys.iter().zip(values) {
        match v {
            Some(v) => println!("{} = {}", show(k), show(v)),
            None => println!("{} = (none)", show(k)),
        }
    }
}

/// Where the interactive history lives: `~/.causeway_history`, if there is a home.
fn history_file() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".causeway_history"))
}

/// Splits a line into words: separated by whitespace, or `"quoted"` with
/// the escapes `\"`, `\\`, `\n`, `\t`, `\r`, `\0` and `\xNN`. A `#` at the
/// start of a word outside quotes starts a comment.
fn split(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else { break };
        if first == '#' {
            break;
        }
        let mut word = Vec::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("unterminated quote".into()),
                    Some('"') => break,
                    Some('\\') => word.push(escape(&mut chars)?),
                    Some(c) => word.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                return Err("a quoted word must end at a space".into());
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                word.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            }
        }
        words.push(word);
    }
    Ok(words)
}

fn escape(chars: &mut impl Iterator<Item = char>) -> Result<u8, String> {
    Ok(match chars.next() {
        Some('"') => b'"',
        Some('\\') => b'\\',
        Some('n') => b'\n',
        Some('t') => b'\t',
        Some('r') => b'\r',
        Some('0') => 0,
        Some('x') => {
            let hex: String = chars.take(2).collect();
            match u8::from_str_radix(&hex, 16) {
                Ok(b) if hex.len() == 2 => b,
                _ => return Err(format!("\\x needs two hex digits, not {hex:?}")),
            }
        }
        Some(c) => return Err(format!("unknown escape \\{c}")),
        None => return Err("unterminated quote".into()),
    })
}

/// Shows a key or value: as it is if it is plain text, else quoted with the
/// escapes [`split`] reads back.
fn show(bytes: &[u8]) -> String {
    let plain = !bytes.is_empty()
        && std::str::from_utf8(bytes).is_ok_and(|s| {
            !s.starts_with('#') && s != "(none)" && !s.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"')
        });
    if plain {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut out = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_client::testing::MockServer;

    fn words(line: &str) -> Vec<Vec<u8>> {
        split(line).unwrap()
    }

    #[test]
    fn split_reads_plain_and_quoted_words() {
        assert_eq!(words("  write k  v "), [&b"write"[..], b"k", b"v"]);
        assert_eq!(words(r#"write "a key" "x\"y\\z\n\xff""#), [&b"write"[..], b"a key", b"x\"y\\z\n\xff"]);
        assert_eq!(words(r#"write k """#), [&b"write"[..], b"k", b""]);
        assert_eq!(words("read x # a comment"), [&b"read"[..], b"x"]);
        assert_eq!(words("# only a comment"), Vec::<Vec<u8>>::new());
        assert_eq!(words("write k v#1"), [&b"write"[..], b"k", b"v#1"]);
        assert!(split(r#"write "k"#).is_err());
        assert!(split(r#"write "k"v"#).is_err());
        assert!(split(r#"write "\q""#).is_err());
        assert!(split(r#"write "\x4""#).is_err());
    }

    #[test]
    fn show_quotes_only_what_is_not_plain_and_split_reads_it_back() {
        assert_eq!(show(b"hello"), "hello");
        assert_eq!(show("héllo".as_bytes()), "héllo");
        for (bytes, shown) in [
            (&b"hello world"[..], r#""hello world""#),
            (b"", r#""""#),
            (b"(none)", r#""(none)""#),
            (b"#x", r##""#x""##),
            (b"a\"b\\c", r#""a\"b\\c""#),
            (b"\xff\x00\n", r#""\xff\x00\n""#),
        ] {
            assert_eq!(show(bytes), shown);
            assert_eq!(words(&show(bytes)), [bytes]);
        }
    }

    /// A shell on a mock server that runs on a runtime of its own, so it
    /// serves while the shell blocks; dropping that runtime kills the server.
    fn shell_on_mock() -> (tokio::runtime::Runtime, MockServer, Shell) {
        let server_rt = tokio::runtime::Runtime::new().unwrap();
        let server = server_rt.block_on(MockServer::start()).unwrap();
        let addr = server.addr().to_string();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let options = ClientOptions::default();
        let client = runtime.block_on(Client::connect_with(addr.as_str(), options.clone())).unwrap();
        (server_rt, server, Shell { runtime, client, options, addr, in_txn: false, warned_eof: false })
    }

    #[test]
    fn after_the_server_dies_the_shell_says_so_and_leaves_the_transaction() {
        let (server_rt, _server, mut shell) = shell_on_mock();
        shell.execute("begin").unwrap();
        assert_eq!(shell.prompt(), "causeway [tx]> ");
        assert!(shell.info()[0].starts_with("server     mock at 127.0.0.1:"), "{:?}", shell.info());
        server_rt.shutdown_background();
        assert!(shell.execute("read x").is_err());
        assert_eq!(shell.prompt(), "causeway (disconnected)> ");
        assert!(!shell.in_txn);
        let info = shell.info();
        assert!(info[0].starts_with("server     none: the connection to mock at 127.0.0.1:"), "{info:?}");
        assert!(info[0].ends_with("is closed"), "{info:?}");
        assert!(shell.leave_now(), "nothing to lose: leave at once");
    }

    #[test]
    fn leaving_inside_a_transaction_asks_twice_then_aborts_it() {
        let (_server_rt, _server, mut shell) = shell_on_mock();
        assert!(shell.leave_now(), "outside a transaction: leave at once");
        shell.execute("begin").unwrap();
        shell.execute("write k v").unwrap();
        assert!(!shell.leave_now(), "the first Ctrl-D warns");
        assert!(shell.leave_now(), "the second leaves");
        // The transaction was aborted: the session is free again.
        shell.in_txn = false;
        shell.execute("begin").unwrap();
    }
}
