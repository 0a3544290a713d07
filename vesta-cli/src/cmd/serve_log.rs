//! How the servers (`vesta serve`) write their own lines and the library's events to stderr:
//! plain text or one JSON object per line, and the runtime they run on.

use anyhow::Context;

/// How a server writes its log lines to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event; colours only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object per line (timestamp, level, target, fields) for log collectors.
    Json,
}

/// The format in force for [`say`], set once by [`run_server`].
static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Sets the format of [`say`] and [`run_server`] (once; later calls change nothing).
pub fn set_log_format(format: LogFormat) {
    let _ = LOG_FORMAT.set(format);
}

/// Prints one of the server's own lines (listening on, stopped) to stderr in the log format:
/// as it is, or as a JSON object like the library's events.
pub fn say(line: &str) {
    match LOG_FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Text => eprintln!("{line}"),
        LogFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "level": "INFO",
                "target": "vesta",
                "fields": { "message": line },
            })
        ),
    }
}

/// Runs a server's future on a multi-threaded runtime, library events logged to stderr in
/// `format` at `warn` and above (`RUST_LOG` overrides); ANSI colours only on a terminal, so the
/// journal and log files get plain text.
pub fn run_server(
    format: LogFormat,
    server: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    set_log_format(format);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(server)
}
